import DataStoreAPI
import DataStoreConformance
import Foundation
@testable import StoreMigration
import Testing

private func digest(_ values: [Value]) -> UInt64 {
    var digest = ItemDigest()
    digest.mix(UInt64(values.count))
    for value in values { digest.add(value) }
    return digest.finalize()
}

/// Sequences of values the item compare tells apart, and that a careless digest would not:
/// equal bits of different types, -0.0 against 0.0, Unicode forms, bytes moved from one value
/// to the next, zero bytes against padding, order. Every one must have a digest of its own.
@Test func itemDigestsTellApartValuesTheItemCompareTellsApart() {
    let zeroUUID = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    let sequences: [[Value]] = [
        [], [.null], [.null, .null], [.bool(false)], [.bool(true)], [.int(0)], [.int(1)], [.int(2)], [.int(256)], [.int(257)], [.double(0.0)],
        [.double(-0.0)], [.string("")], [.bytes([])], [.date(Timestamp(microsecondsSinceEpoch: 0))], [.uuid(zeroUUID)],
        [.string("\u{E9}")], [.string("e\u{301}")], [.string("ab"), .string("c")], [.string("a"), .string("bc")],
        [.bytes([0])], [.bytes([0, 0, 0, 0, 0, 0, 0])], [.bytes([0, 0, 0, 0, 0, 0, 0, 0])],
        [.bytes([0, 0, 0, 0, 0, 0, 0, 0, 0])], [.string("a")], [.bytes([0x61])], [.int(1), .int(2)], [.int(2), .int(1)],
        [.string("12345678"), .null], [.string("1234567"), .string("8")],
    ]
    var seen: [UInt64: [Value]] = [:]
    for values in sequences {
        let d = digest(values)
        #expect(seen[d] == nil, "\(values) has the digest of \(seen[d] ?? [])")
        seen[d] = values
    }
}

/// Random items of every value type, each changed in one value by one bit, one byte, or one
/// byte more or less: the changed item's digest always differs from the original's.
@Test func itemDigestsChangeWithEverySingleValueChange() {
    var rng = SplitMix64(seed: 0xD16E57)
    var changes = 0
    for _ in 0..<20_000 {
        var bytes = (0..<Int(rng.next() % 40)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        let text = String(decoding: bytes.map { 0x20 + $0 % 0x5F }, as: UTF8.self)
        let item: [Value] = [
            .int(Int64(bitPattern: rng.next())), .string(text), .double(Double(bitPattern: rng.next() >> 2)),
            .bytes(bytes), .date(Timestamp(microsecondsSinceEpoch: Int64(bitPattern: rng.next() >> 1))),
            .bool(rng.next() % 2 == 0),
        ]
        var changed = item
        let position = Int(rng.next() % UInt64(item.count))
        switch item[position] {
        case .int(let n): changed[position] = .int(n ^ (1 << Int64(rng.next() % 64)))
        case .double(let d): changed[position] = .double(Double(bitPattern: d.bitPattern ^ (1 << (rng.next() % 62))))
        case .date(let t):
            changed[position] = .date(Timestamp(microsecondsSinceEpoch: t.microsecondsSinceEpoch ^ (1 << Int64(rng.next() % 62))))
        case .bool(let b): changed[position] = .bool(!b)
        case .string(let s): changed[position] = .string(rng.next() % 2 == 0 ? s + " " : String(s.dropLast()) + "\u{7F}")
        case .bytes:
            if bytes.isEmpty || rng.next() % 2 == 0 {
                bytes.append(UInt8(truncatingIfNeeded: rng.next()))
            } else {
                bytes[Int(rng.next() % UInt64(bytes.count))] ^= 1 << UInt8(rng.next() % 8)
            }
            changed[position] = .bytes(bytes)
        default: continue
        }
        guard changed != item else { continue }
        changes += 1
        #expect(digest(changed) != digest(item), "\(item) and \(changed)")
    }
    #expect(changes > 19_000)
}
