@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
@testable import StoreMigration
import Testing

/// The four records the package keeps in a store's reserved metadata (a migration's checkpoint,
/// a follow's position, a switch's record, the start of a switch's copy) share one damage rule:
/// a damaged one is refused as damage naming the store and the record, never read as absent
/// nor computed again.
@Suite struct ReservedRecordTests {
    static let damaged: [UInt8] = Array("{\"entity\": 7, ".utf8)

    /// Each record, damaged in turn in a store, read by the reader its operation uses.
    @Test(arguments: [Migrator.checkpointKey, Migrator.followKey, SwitchRecord.key, SwitchingStore.copyStartKey])
    func eachDamagedRecordGivesTheSameRefusal(_ key: String) throws {
        let dir = try TemporaryDirectory()
        let location = dir.location(.sqlite, "store")
        let store = try location.open(schema: Fixtures.schema)
        defer { try? store.close() }
        try store.writeSync { try $0.setReservedMetadata(Self.damaged, forKey: key) }
        let name = location.description
        let readers: [String: () throws -> Void] = [
            Migrator.checkpointKey: { _ = try Migrator.checkpoint(of: store, named: name) },
            Migrator.followKey: { _ = try Migrator.followState(of: store, named: name) },
            SwitchRecord.key: { _ = try SwitchRecord.read(from: store, named: name) },
            SwitchingStore.copyStartKey: { _ = try SwitchingStore.copyStartRecord.read(from: store, named: name) },
        ]
        let read = try #require(readers[key])
        #expect { try read() } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.code == .corrupt && error.message.hasPrefix("\(name): its ")
                && error.message.contains("(reserved record '\(key)') is damaged, so where the operation stands is "
                    + "unknown; nothing was done")
        }
    }

    /// A record's JSON has its keys in sorted order: persisted bytes do not follow a
    /// dictionary's order, which changes from one process to the next (six keys: a hash order
    /// comes out sorted once in 720 processes).
    @Test func aRecordsJSONHasItsKeysSorted() throws {
        struct Six: Codable, Equatable {
            var f = 6, a = 1, e = 5, b = 2, d = 4, c = 3
        }
        let dir = try TemporaryDirectory()
        let store = try dir.location(.sqlite, "store").open(schema: Fixtures.schema)
        defer { try? store.close() }
        let record = ReservedRecord<Six>(key: Migrator.checkpointKey, what: "test record")
        try store.writeSync { try record.write(Six(), into: $0) }
        let bytes = try #require(try store.read { try $0.metadata(forKey: Migrator.checkpointKey) })
        let json = String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        #expect(json == #"{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6}"#)
        #expect(try record.read(from: store, named: nil) == Six())
    }

    /// A SQLite source of `items` items, and an LMDB destination whose copy from it stopped
    /// after its third batch of 20, leaving a checkpoint.
    static func stoppedCopy(in dir: TemporaryDirectory, items: Int) throws -> (StoreLocation, StoreLocation) {
        let source = dir.location(.sqlite, "source")
        let seeded = try source.open(schema: Fixtures.schema)
        try Fixtures.load(Fixtures.items(items, seed: 5), into: seeded)
        try seeded.close()
        let stopped = dir.location(.lmdb, "stopped")
        var batches = 0
        #expect(throws: MigrationInterrupted.self) {
            try Migrator.copy(from: source, to: stopped, options: MigrationOptions(batchSize: 20),
                              shouldStop: { batches += 1; return batches == 3 })
        }
        return (source, stopped)
    }

    /// End to end: a resume with a damaged checkpoint and a follow with a damaged position are
    /// refused, and the destination keeps what it held.
    @Test func aResumeAndAFollowRefuseADamagedRecord() throws {
        let dir = try TemporaryDirectory()
        let (source, stopped) = try Self.stoppedCopy(in: dir, items: 300)
        let opened = try Migrator.acceptingUnfinished { try stopped.open(schema: nil) }
        try opened.writeSync { try $0.setReservedMetadata(Self.damaged, forKey: Migrator.checkpointKey) }
        try opened.close()
        #expect { try Migrator.copy(from: source, to: stopped, options: MigrationOptions(resume: true)) } throws: {
            ($0 as? StoreError)?.code == .corrupt && "\($0)".contains("migration checkpoint")
        }
        let copied = dir.location(.sqlite, "copied")
        _ = try Migrator.copy(from: source, to: copied)
        let destination = try copied.open(schema: nil)
        try destination.writeSync { try $0.setReservedMetadata(Self.damaged, forKey: Migrator.followKey) }
        try destination.close()
        #expect {
            try Migrator.follow(from: source, to: copied, options: FollowOptions(untilIdle: .milliseconds(100)))
        } throws: {
            ($0 as? StoreError)?.code == .corrupt && "\($0)".contains("follow position")
        }
        #expect(try contents(copied) == contents(source))
    }

    /// A checkpoint ends with a checksum of its JSON: every byte of a stopped copy's checkpoint
    /// changed in turn (one bit, which leaves most of the JSON readable, and often a number that
    /// is another number) is refused as damage; the same JSON without its checksum, as a version
    /// before checksums wrote it, still reads.
    @Test func everyChangedByteOfACheckpointIsRefusedAndAnUnsealedOneStillReads() throws {
        let dir = try TemporaryDirectory()
        let (_, stopped) = try Self.stoppedCopy(in: dir, items: 100)
        let store = try Migrator.acceptingUnfinished { try stopped.open(schema: nil) }
        defer { try? store.close() }
        let name = stopped.description
        let sealed = try #require(try store.read { try $0.metadata(forKey: Migrator.checkpointKey) })
        let read = try #require(try Migrator.checkpoint(of: store, named: name))
        #expect(sealed[sealed.count - 5] == 0, "JSON, a NUL byte, four bytes of checksum")
        for offset in sealed.indices {
            var changed = sealed
            changed[offset] ^= 0x01
            try store.writeSync { try $0.setReservedMetadata(changed, forKey: Migrator.checkpointKey) }
            #expect("byte \(offset)", performing: { _ = try Migrator.checkpoint(of: store, named: name) }, throws: {
                ($0 as? StoreError)?.code == .corrupt && "\($0)".contains("migration checkpoint")
            })
        }
        try store.writeSync { try $0.setReservedMetadata(Array(sealed.dropLast(5)), forKey: Migrator.checkpointKey) }
        #expect(try Migrator.checkpoint(of: store, named: name) == read)
    }
}
