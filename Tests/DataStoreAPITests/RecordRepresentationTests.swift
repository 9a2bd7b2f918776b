@_spi(Backend) import DataStoreAPI
import Foundation
import PropertyBased
import Testing

// A record is a store's layout and values, a literal's pairs or a dictionary; the app must not
// be able to tell which. These properties compare all three on random names (repeated ones
// included) and values, and the key order used without encoding against the encoded one.

private let names = ["id", "name", "score", "a", "", "é", "e\u{301}", "K", "\u{212A}", "name2", "x\u{0}"]

private func randomValue(_ rng: inout some RandomNumberGenerator) -> Value {
    switch rng.next() % 6 {
    case 0: return .null
    case 1: return .int(Int64(bitPattern: rng.next()) >> Int64(rng.next() % 64))
    case 2: return .double(Double(bitPattern: rng.next()))
    case 3: return .string(names[Int(rng.next() % UInt64(names.count))])
    case 4: return .bytes((0..<Int(rng.next() % 4)).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
    default: return .bool(rng.next() % 2 == 0)
    }
}

/// Up to 20 pairs: past 16 a literal is hashed, so both sides of the limit are covered.
private let pairsGenerator = Generator<[(String, Value)], [[(String, Value)]]>(
    run: { rng in
        (0..<Int(rng.next() % 21)).map { _ in (names[Int(rng.next() % UInt64(names.count))], randomValue(&rng)) }
    },
    shrink: { pairs in pairs.isEmpty ? [] : [Array(pairs.dropLast()), Array(pairs.dropFirst())] })

@Test func literalsDictionariesAndStoredRecordsAreIndistinguishable() async {
    await propertyCheck(count: 500, input: pairsGenerator) { pairs in
        let literal = Record(pairs: pairs)
        let dictionary = Record(Dictionary(pairs, uniquingKeysWith: { _, last in last }))
        let layout = RecordLayout(Array(dictionary.values.keys).sorted())
        let stored = Record(layout: layout, values: layout.names.map { dictionary[$0] })
        for record in [literal, stored] {
            #expect(record == dictionary)
            #expect(record.hashValue == dictionary.hashValue)
            #expect(record.count == dictionary.count)
            #expect(Set(record.attributeNames) == Set(dictionary.attributeNames))
            #expect(record.values == dictionary.values)
            for (position, name) in (names + ["missing"]).enumerated() {
                // "K" and the Kelvin sign, "é" and "e" with a combining accent: equal as Swift
                // strings, so one name in every representation.
                #expect(record.value(ifPresent: name) == dictionary.value(ifPresent: name))
                #expect(record.value(ifPresent: name, at: position % 20) == dictionary.value(ifPresent: name))
            }
            #expect(record.values(in: layout) == layout.names.map { dictionary[$0] })
            var changed = record
            var expected = dictionary
            for (name, value) in [("score", Value.int(9)), ("new", .null), ("id", .string("k"))] {
                changed[name] = value
                expected[name] = value
            }
            #expect(changed == expected)
            #expect(record == dictionary, "a changed copy left the original as it was")
        }
    }
}

@Test func aLiteralsLastRepeatedNameWins() {
    let record: Record = ["a": 1, "b": 2, "a": 3]
    #expect(record.count == 2)
    #expect(record["a"] == 3)
    #expect(record == Record(["a": 3, "b": 2]))
}

private let keyGenerator = Generator<(Value, Value), [(Value, Value)]>(
    run: { rng in
        func key(_ kind: UInt64, _ rng: inout some RandomNumberGenerator) -> Value {
            switch kind {
            case 0:
                let edges: [Int64] = [.min, .min + 1, -1, 0, 1, .max - 1, .max]
                return .int(rng.next() % 2 == 0 ? edges[Int(rng.next() % 7)] : Int64(bitPattern: rng.next()))
            case 1:
                let pieces = ["", "a", "ab", "\u{0}", "é", "e\u{301}", "\u{7F}", "\u{80}", "\u{10FFFF}", "z"]
                return .string((0..<Int(rng.next() % 4)).map { _ in pieces[Int(rng.next() % 10)] }.joined())
            default:
                var bytes = (0..<16).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                if rng.next() % 2 == 0 { bytes[Int(rng.next() % 16)] = 0; bytes[15] = 0xFF }
                return .uuid(UUID(bytes: bytes) ?? UUID())
            }
        }
        let kind = rng.next() % 3
        let a = key(kind, &rng)
        return (a, rng.next() % 8 == 0 ? a : key(kind, &rng))
    },
    shrink: { _ in [] })

@Test func keysCompareWithoutEncodingInTheirEncodedOrder() async {
    await propertyCheck(count: 5_000, input: keyGenerator) { a, b in
        let encoded = Value.compareBytes(try KeyEncoding.encodeKey(a), try KeyEncoding.encodeKey(b))
        #expect(try KeyEncoding.compareKeys(a, b) == encoded, "\(a) against \(b)")
        #expect((try KeyEncoding.compareKeys(a, b) == 0) == (a == b))
    }
    #expect(throws: StoreError.self) { try KeyEncoding.compareKeys(.double(1), .double(2)) }
}

@Test func aRecordIsTwoReferences() {
    // Every copy of a record (into a fetch's array, out of a page, into a batch) retains what
    // it holds: the representation is kept to two references (its names and its values) and
    // the tag that says which kind of names (the standard library's collections leave the
    // compiler no spare bits for it, so it takes a word of its own). Four references took 32
    // bytes.
    #expect(MemoryLayout<Record>.size <= 3 * MemoryLayout<AnyObject>.size)
}
