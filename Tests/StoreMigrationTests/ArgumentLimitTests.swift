@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import InMemoryStore
import LMDBStore
import SQLiteStore
@testable import StoreMigration
import Testing

/// Arguments past what the code counts with, each of which trapped before (an outside read of the
/// arguments found them): now refused naming the argument, or taken without an overflow.
@Suite struct ArgumentLimitTests {
    @Test func moreReadersThanLMDBCountsAreRefused() throws {
        let dir = try TemporaryDirectory()
        #expect(performing: {
            _ = try LMDBStore(path: dir.path("readers.lmdb"), schema: Fixtures.schema,
                              options: LMDBOptions(maxReaders: 5_000_000_000))
        }, throws: { ($0 as? StoreError)?.code == .invalidArgument && "\($0)".contains("maxReaders 5000000000") })
    }

    /// A slow-operation threshold past what 64 bits of nanoseconds hold is never reached.
    @Test func aSlowThresholdOfCenturiesIsTakenWithoutAnOverflow() throws {
        let kept = KeptMessages()
        let store = try InMemoryStore(schema: Fixtures.schema, instrumentation: Instrumentation(
            logger: kept.logger, slowOperation: .seconds(10_000_000_000)))
        defer { try? store.close() }
        try store.writeSync { try $0.insert(["key": "k", "value": 1], into: "Keyed") }
        #expect(kept.texts(.info).contains("store opened"))
        #expect(!kept.texts(.warning).contains { $0.contains("slow") })
    }

    /// A text looked for that is longer than any stored value: refused as past the limit (SQLite
    /// bound its length as 32 bits, which a text of 2 GiB overflowed).
    @Test(arguments: [StoreKind.sqlite, .lmdb, .memory])
    func aSearchedTextPastTheValueLimitIsRefused(_ kind: StoreKind) throws {
        let dir = try TemporaryDirectory()
        let store = try StoreLocation(kind: kind, path: dir.path("searched")).open(schema: Fixtures.schema)
        defer { try? store.close() }
        let long = String(repeating: "a", count: Limits.maxValueBytes + 1)
        for filter in [Filter.contains("key", long), .hasPrefix("key", long)] {
            #expect(performing: { _ = try store.read { try $0.fetch(FetchRequest("Keyed", filter: filter)) } },
                    throws: { ($0 as? StoreError)?.code == .limitExceeded && "\($0)".contains("Keyed.key") })
        }
        #expect(try store.read { try $0.fetch(FetchRequest("Keyed", filter: .contains("key", "a"))) }.isEmpty)
    }

    /// A seed in batches of none is refused before a store is made.
    @Test func aSeedInBatchesOfNoneIsRefusedAndMakesNothing() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("seed.sqlite")
        #expect(performing: { try DemoData.seed(try StoreLocation(parsing: "sqlite:" + path), items: 10, seed: 1, batchSize: 0) },
                throws: { ($0 as? StoreError)?.code == .invalidArgument && "\($0)".contains("batches of 0") })
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    /// A switch record edited to an epoch past what a switch counts to is damage, named.
    @Test func aSwitchRecordWithAnEpochPastItsRangeIsDamage() throws {
        let store = try InMemoryStore(schema: Fixtures.schema)
        defer { try? store.close() }
        for epoch in [Int.max, Int.min, -2] {
            let record = SwitchRecord(id: UUID(), old: "sqlite:/a", new: "lmdb:/b", epoch: epoch, serving: true,
                                      phase: .following)
            try store.writeSync { try record.write(into: $0) }
            #expect(performing: { _ = try SwitchRecord.read(from: store, named: "the store") },
                    throws: { ($0 as? StoreError)?.code == .corrupt && "\($0)".contains("epoch \(epoch)") })
        }
    }
}
