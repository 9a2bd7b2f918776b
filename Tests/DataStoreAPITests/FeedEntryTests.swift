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

    /// A group of `keys` (values of `type`, in ascending key order) with `kinds`, recorded in a
    /// table of words for an int entity (as the recorder does), of bytes with `asBytes`.
    private static func group(_ entity: String, _ type: ValueType, _ keys: [Value], _ kinds: [ItemChange.Kind],
                              cleared: Bool = false, overflowed: Bool = false,
                              asBytes: Bool = false) throws -> RecordedChanges.Group {
        var table = TouchedKeys(intKeys: type == .int && !asBytes)
        for key in keys { try KeyEncoding.withEncodedKey(key) { table.append($0) } }
        return RecordedChanges.Group(entity: entity, keyType: type, cleared: cleared, overflowed: overflowed,
                                     keys: table, kinds: .listed(kinds))
    }

    /// The change set of groups of `keys` with `kinds` in `entities`' order, built from the
    /// values themselves (not read back from a table of keys).
    private static func expected(_ groups: [(entity: String, keys: [Value], kinds: [ItemChange.Kind])],
                                 cleared: [String] = [], overflowed: [String] = []) -> ChangeSet {
        var set = ChangeSet(token: token, committedAt: time)
        set.cleared = cleared
        set.overflowed = overflowed
        for group in groups {
            for (key, kind) in zip(group.keys, group.kinds) {
                set.items.append(ItemChange(entity: group.entity, key: key, kind: kind))
            }
        }
        return set
    }

    private static let everyKindGroups: [(entity: String, keys: [Value], kinds: [ItemChange.Kind])] = {
        let ints: [Int64] = [.min, .min + 1, -1 << 40, -129, -128, -1, 0, 1, 63, 64, 127, 128, 16_383, 16_384, 1 << 40,
                             .max - 1, .max]
        let strings = ["", "a", "b", "é", String(repeating: "x", count: 127), String(repeating: "x", count: 128),
                       String(repeating: "y", count: 300)]
        let uuids = (0..<3).map { i in UUID(uuid: (UInt8(i), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)) }
        let kinds: [ItemChange.Kind] = [.inserted, .updated, .deleted]
        return [("Account", ints.map(Value.int), ints.indices.map { kinds[$0 % 3] }),
                ("Empty", [], []),
                ("Tag", strings.map(Value.string), strings.indices.map { kinds[$0 % 3] }),
                ("Track", uuids.map(Value.uuid), [.deleted, .inserted, .updated])]
    }()

    /// Every kind of key, the ints at both ends of their range and around each LEB128 length;
    /// the int keys in a table of bytes with `intsAsBytes` (a table that fell back to bytes).
    private static func everyKind(intsAsBytes: Bool = false) throws -> RecordedChanges {
        var changes = RecordedChanges()
        for (entity, keys, kinds) in everyKindGroups {
            let type: ValueType = entity == "Tag" ? .string : entity == "Track" ? .uuid : .int
            changes.entities.append(try group(entity, type, keys, kinds, cleared: entity == "Account",
                                              overflowed: entity == "Empty", asBytes: intsAsBytes))
        }
        return changes
    }

    private static let everyKindExpected = expected(everyKindGroups, cleared: ["Account"], overflowed: ["Empty"])

    @Test(arguments: [false, true])
    func everyKindOfKeyReadsBackAsWritten(intsAsBytes: Bool) throws {
        let changes = try Self.everyKind(intsAsBytes: intsAsBytes)
        let entry = ChangeLog.encodeEntry(changes, committedAt: Self.time)
        #expect(entry.first == 3)
        // The Account group's flags: cleared, and written by differences unless its table is bytes.
        let flagsAt = 1 + 8 + 4 + 4 + "Account".utf8.count
        #expect(entry[flagsAt] == (intsAsBytes ? 1 : 1 | 4))
        #expect(try ChangeLog.decodeEntry(entry, token: Self.token) == Self.everyKindExpected)
    }

    /// A group whose items were all inserted, recorded as their count (what the recorder hands
    /// over for a bulk load or a one-insert transaction), is written byte for byte as the same
    /// group with each item's kind listed, for keys of every kind and tables of both forms.
    @Test(arguments: [false, true])
    func insertsRecordedAsACountAreWrittenAsListedOnes(intsAsBytes: Bool) throws {
        let ints: [Int64] = [.min, -1 << 40, -129, -1, 0, 1, 127, 128, 16_384, .max]
        let inputs: [(String, ValueType, [Value])] = [
            ("Account", .int, ints.map(Value.int)),
            ("Tag", .string, ["", "a", "é", String(repeating: "y", count: 300)].map(Value.string)),
            ("Track", .uuid, (0..<3).map { i in .uuid(UUID(uuid: (UInt8(i), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))) }),
        ]
        var listed = RecordedChanges()
        var counted = RecordedChanges()
        for (entity, type, keys) in inputs {
            let group = try Self.group(entity, type, keys, keys.map { _ in .inserted }, asBytes: intsAsBytes)
            listed.entities.append(group)
            var count = group
            count.kinds = .inserted(count: keys.count)
            counted.entities.append(count)
        }
        let entry = ChangeLog.encodeEntry(counted, committedAt: Self.time)
        #expect(entry == ChangeLog.encodeEntry(listed, committedAt: Self.time))
        let expected = Self.expected(inputs.map { ($0.0, $0.2, $0.2.map { _ in .inserted }) })
        #expect(try ChangeLog.decodeEntry(entry, token: Self.token) == expected)
    }

    /// A table of words that gets a key of another length moves every key to bytes, in order.
    @Test func aTableOfWordsGivenAnotherKeyKeepsEveryKey() throws {
        var table = TouchedKeys(intKeys: true)
        let ints: [Int64] = [-5, 0, 7]
        for n in ints { try KeyEncoding.withEncodedKey(.int(n)) { table.append($0) } }
        try KeyEncoding.withEncodedKey(.string("odd")) { table.append($0) }
        #expect(!table.isWords && table.count == 4)
        #expect(try (0..<3).map { try KeyEncoding.decodeKey(table.key($0), as: .int) } == ints.map(Value.int))
        #expect(table.key(3) == Array("odd".utf8))
        #expect(table.compare(0, 1) < 0 && table.compare(2, 1) > 0)
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
            #expect(read == Self.expected([("Item", keys.map(Value.int), kinds)]), "round \(round)")
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

    /// Entries as versions 1 and 2 wrote them (a four-byte length before each key's bytes, an
    /// int key's 8 bytes; version 2 with its checksum, version 1 without), which a store written
    /// before keeps: read as they always were.
    @Test(arguments: [UInt8(1), 2])
    func entriesOfEarlierVersionsReadAsBefore(version: UInt8) throws {
        let entry = Self.encodeEarlier(try Self.everyKind(), version: version)
        #expect(entry.first == version)
        #expect(try ChangeLog.decodeEntry(entry, token: Self.token) == Self.everyKindExpected)
    }

    /// Version 2 knew no difference flag: an entry of version 2 that has it is damaged.
    @Test func aVersion2EntryWithTheDifferenceFlagIsCorrupt() throws {
        var changes = RecordedChanges()
        changes.entities.append(try Self.group("Item", .int, [.int(1)], [.inserted]))
        var entry = Array(Self.encodeEarlier(changes, version: 2).dropLast(4))
        let flagsAt = 1 + 8 + 4 + 4 + "Item".utf8.count
        #expect(entry[flagsAt] == 0)
        entry[flagsAt] = 4
        SealedBytes.seal(&entry)
        expectCorrupt(entry)
    }

    /// A group written by differences that ends before its last key.
    @Test func aDifferenceGroupCutShortIsCorrupt() throws {
        var changes = RecordedChanges()
        changes.entities.append(try Self.group("Item", .int, [.int(1), .int(2), .int(1_000)], [.inserted, .inserted, .updated]))
        let good = ChangeLog.encodeEntry(changes, committedAt: Self.time)
        // The last item: its kind and a two-byte difference (998 zigzagged is 1,996).
        var cut = Array(good.dropLast(4 + 3))
        SealedBytes.seal(&cut)
        expectCorrupt(cut)
        var half = Array(good.dropLast(4 + 1))
        SealedBytes.seal(&half)
        expectCorrupt(half)
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
        // Ten bytes whose tenth holds more than the 64th bit: read without that check, the
        // length would be 0 (the bit shifted out), and the entry whole.
        var wide = Array(good.dropLast(4))
        wide.removeLast(2)
        wide += Array(repeating: 0x80, count: 9) + [0x02]
        SealedBytes.seal(&wide)
        expectCorrupt(wide)
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

    /// The writer of versions 1 and 2, as it was: each key a kind, a four-byte length and its
    /// bytes; version 2 then sealed with the CRC-32C of it all.
    private static func encodeEarlier(_ changes: RecordedChanges, version: UInt8) -> [UInt8] {
        var out: [UInt8] = [version]
        func u32(_ n: Int) { withUnsafeBytes(of: UInt32(n).littleEndian) { out += $0 } }
        withUnsafeBytes(of: UInt64(bitPattern: time.microsecondsSinceEpoch).littleEndian) { out += $0 }
        u32(changes.entities.count)
        for group in changes.entities {
            u32(group.entity.utf8.count)
            out += group.entity.utf8
            out.append((group.cleared ? 1 : 0) | (group.overflowed ? 2 : 0))
            out.append(group.keyType == .int ? 1 : group.keyType == .string ? 2 : 3)
            u32(group.kinds.count)
            group.kinds.forEach { i, kind in
                let key = group.keys.key(i)
                out.append(kind.rawValue)
                u32(key.count)
                out += key
            }
        }
        if version == 2 { SealedBytes.seal(&out) }
        return out
    }
}
