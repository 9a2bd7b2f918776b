@_spi(Backend) @testable import DataStoreAPI
import DataStoreConformance
import Foundation
import Testing

/// The change feed's entry format: version 3 (LEB128 lengths, an int entity's keys as
/// differences) read back as written for every kind of key, entries of version 2 (what stores
/// written before hold until their retention trims them) read as before, and damage refused.
struct FeedEntryTests {
    private static let token = ChangeToken(store: UUID(uuidString: "00000000-0000-0000-0000-000000000001")!, sequence: 7)
    private static let time = Timestamp(microsecondsSinceEpoch: 1_733_000_000_123_456)

    /// A group of `keys` (values of `type`, in ascending key order) with `kinds`.
    private static func group(_ entity: String, _ type: ValueType, _ keys: [Value], _ kinds: [ItemChange.Kind],
                              cleared: Bool = false, overflowed: Bool = false) throws -> RecordedChanges.Group {
        var table = TouchedKeys(intKeys: type == .int)
        for key in keys { try KeyEncoding.withEncodedKey(key) { table.append($0) } }
        return RecordedChanges.Group(entity: entity, keyType: type, cleared: cleared, overflowed: overflowed,
                                     keys: table, kinds: kinds)
    }

    /// The change set `changes` stands for.
    private static func expected(_ changes: RecordedChanges) throws -> ChangeSet {
        var set = ChangeSet(token: token, committedAt: time)
        for group in changes.entities {
            if group.cleared { set.cleared.append(group.entity) }
            if group.overflowed { set.overflowed.append(group.entity) }
            for (i, kind) in group.kinds.enumerated() {
                set.items.append(ItemChange(entity: group.entity,
                                            key: try KeyEncoding.decodeKey(group.keys.key(i), as: group.keyType), kind: kind))
            }
        }
        return set
    }

    /// Every kind of key, the ints at both ends of their range and around each LEB128 length.
    private static func everyKind() throws -> RecordedChanges {
        let ints: [Int64] = [.min, .min + 1, -1 << 40, -129, -128, -1, 0, 1, 63, 64, 127, 128, 16_383, 16_384, 1 << 40,
                             .max - 1, .max]
        let strings = ["", "a", "b", "é", String(repeating: "x", count: 127), String(repeating: "x", count: 128),
                       String(repeating: "y", count: 300)]
        let uuids = (0..<3).map { i in UUID(uuid: (UInt8(i), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)) }
        let kinds: [ItemChange.Kind] = [.inserted, .updated, .deleted]
        var changes = RecordedChanges()
        changes.entities.append(try group("Account", .int, ints.map(Value.int),
                                          ints.indices.map { kinds[$0 % 3] }, cleared: true))
        changes.entities.append(try group("Empty", .int, [], [], overflowed: true))
        changes.entities.append(try group("Tag", .string, strings.map(Value.string), strings.indices.map { kinds[$0 % 3] }))
        changes.entities.append(try group("Track", .uuid, uuids.map(Value.uuid), [.deleted, .inserted, .updated]))
        return changes
    }

    @Test func everyKindOfKeyReadsBackAsWritten() throws {
        let changes = try Self.everyKind()
        let entry = ChangeLog.encodeEntry(changes, committedAt: Self.time)
        #expect(entry.first == 3)
        let read = try ChangeLog.decodeEntry(entry, token: Self.token)
        #expect(read == (try Self.expected(changes)))
        #expect(read.cleared == ["Account"] && read.overflowed == ["Empty"])
    }

    /// Random sets of int keys (sorted, as the recorder hands them over), from a seeded generator.
    @Test func randomIntKeysReadBackAsWritten() throws {
        var random = SplitMix64(seed: 0x5EED)
        for round in 0..<200 {
            let count = Int.random(in: 0...300, using: &random)
            let spread: Int64 = [Int64(10), 1 << 20, .max][round % 3]
            let keys = Set((0..<count).map { _ in Int64.random(in: -spread...spread, using: &random) }).sorted()
            let kinds = keys.map { _ in [ItemChange.Kind.inserted, .updated, .deleted].randomElement(using: &random)! }
            var changes = RecordedChanges()
            changes.entities.append(try Self.group("Item", .int, keys.map(Value.int), kinds))
            let read = try ChangeLog.decodeEntry(ChangeLog.encodeEntry(changes, committedAt: Self.time), token: Self.token)
            #expect(read == (try Self.expected(changes)), "round \(round)")
        }
    }

    /// A bulk load's entry: 2 bytes per item (a kind and a difference of 1), not 13.
    @Test func consecutiveIntKeysTakeTwoBytesEach() throws {
        var changes = RecordedChanges()
        let keys = (1...10_000).map { Value.int(Int64($0)) }
        changes.entities.append(try Self.group("Item", .int, keys, keys.map { _ in .inserted }))
        let entry = ChangeLog.encodeEntry(changes, committedAt: Self.time)
        #expect(entry.count == 1 + 8 + 4 + (4 + 4 + 1 + 1 + 4) + 10_000 * 2 + 4)
        #expect(try ChangeLog.decodeEntry(entry, token: Self.token).items.count == 10_000)
    }

    /// Entries as version 2 wrote them (a four-byte length before each key's bytes, an int key's
    /// 8 bytes), which a store written before this version keeps: read as they always were.
    @Test func entriesOfVersion2ReadAsBefore() throws {
        let changes = try Self.everyKind()
        let entry = Self.encodeVersion2(changes)
        #expect(entry.first == 2)
        #expect(try ChangeLog.decodeEntry(entry, token: Self.token) == (try Self.expected(changes)))
    }

    @Test func damagedEntriesAreRefusedAsCorrupt() throws {
        var changes = RecordedChanges()
        changes.entities.append(try Self.group("Tag", .string, [.string("a")], [.inserted]))
        let good = ChangeLog.encodeEntry(changes, committedAt: Self.time)
        // Unsealed: version, time, group count, name length, name (3 bytes), flags at 20.
        let flagsAt = 1 + 8 + 4 + 4 + 3
        #expect(good[flagsAt] == 0)
        // A string group flagged as written by differences.
        var flagged = Array(good.dropLast(4))
        flagged[flagsAt] = 4
        SealedBytes.seal(&flagged)
        expectCorrupt(flagged)
        // A flag no version writes.
        var unknown = Array(good.dropLast(4))
        unknown[flagsAt] = 8
        SealedBytes.seal(&unknown)
        expectCorrupt(unknown)
        // A LEB128 length cut off at the end, and one of eleven bytes.
        var cut = Array(good.dropLast(4))
        cut.removeLast(2)  // the key's byte and its length's
        cut.append(0x81)
        SealedBytes.seal(&cut)
        expectCorrupt(cut)
        var long = Array(good.dropLast(4))
        long.removeLast(2)
        long += Array(repeating: 0x80, count: 10) + [0x01, UInt8(ascii: "a")]
        SealedBytes.seal(&long)
        expectCorrupt(long)
        // A changed byte without its sum.
        var changed = good
        changed[flagsAt + 3] ^= 1
        expectCorrupt(changed)
    }

    private func expectCorrupt(_ entry: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            let read = try ChangeLog.decodeEntry(entry, token: Self.token)
            Issue.record("read as \(read)", sourceLocation: sourceLocation)
        } catch let error as StoreError {
            #expect(error.code == .corrupt, sourceLocation: sourceLocation)
            #expect(error.message.contains("transaction 7"), "\(error.message)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("\(error)", sourceLocation: sourceLocation)
        }
    }

    /// Version 2's writer, as it was: each key a kind, a four-byte length and its bytes.
    private static func encodeVersion2(_ changes: RecordedChanges) -> [UInt8] {
        var out: [UInt8] = [2]
        func u32(_ n: Int) { withUnsafeBytes(of: UInt32(n).littleEndian) { out += $0 } }
        withUnsafeBytes(of: UInt64(bitPattern: time.microsecondsSinceEpoch).littleEndian) { out += $0 }
        u32(changes.entities.count)
        for group in changes.entities {
            u32(group.entity.utf8.count)
            out += group.entity.utf8
            out.append((group.cleared ? 1 : 0) | (group.overflowed ? 2 : 0))
            out.append(group.keyType == .int ? 1 : group.keyType == .string ? 2 : 3)
            u32(group.kinds.count)
            for (i, kind) in group.kinds.enumerated() {
                let key = group.keys.key(i)
                out.append(kind.rawValue)
                u32(key.count)
                out += key
            }
        }
        SealedBytes.seal(&out)
        return out
    }
}
