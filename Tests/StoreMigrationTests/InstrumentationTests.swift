import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import InMemoryStore
import LMDBStore
import Logging
import MetricsTestKit
import SQLiteStore
import StoreMigration
import Synchronization
import Testing

/// A swift-log handler that keeps every message, for the tests to read.
final class KeptMessages: Sendable {
    let messages = Mutex<[(Logger.Level, String, Logger.Metadata)]>([])

    var logger: Logger {
        Logger(label: "test") { _ in Handler(kept: self) }
    }

    func texts(_ level: Logger.Level? = nil) -> [String] {
        messages.withLock { $0.filter { level == nil || $0.0 == level }.map(\.1) }
    }

    struct Handler: LogHandler {
        let kept: KeptMessages
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            kept.messages.withLock { $0.append((event.level, "\(event.message)", event.metadata ?? [:])) }
        }
    }
}

/// With a logger and a metrics factory, every backend logs its open and its slow blocks and
/// counts commits, rollbacks and reads, with the commit's duration; LMDB logs its map growing.
@Test(arguments: ["sqlite", "lmdb", "memory"])
func storesLogAndCountWhatTheyDoWhenTheAppAsks(_ kind: String) throws {
    let dir = try TemporaryDirectory()
    let kept = KeptMessages()
    let metrics = TestMetrics()
    let instrumentation = Instrumentation(logger: kept.logger, metrics: metrics, slowOperation: .zero)
    let store: any DataStore
    switch kind {
    case "sqlite": store = try SQLiteStore(path: dir.path("s.sqlite"), schema: Fixtures.schema,
                                           instrumentation: instrumentation)
    case "lmdb": store = try LMDBStore(path: dir.path("s.lmdb"), schema: Fixtures.schema,
                                       options: LMDBOptions(initialMapSize: 256 << 10), instrumentation: instrumentation)
    default: store = try InMemoryStore(schema: Fixtures.schema, instrumentation: instrumentation)
    }
    defer { try? store.close() }
    #expect(kept.texts(.info).contains("store opened"))
    for n in 0..<3 { try store.writeSync { try $0.insert(["key": .string("k\(n)"), "value": .int(Int64(n))], into: "Keyed") } }
    #expect(throws: StoreError.self) { try store.writeSync { try $0.insert(["key": "k0", "value": 9], into: "Keyed") } }
    for _ in 0..<5 { _ = try store.read { try $0.count(FetchRequest("Keyed")) } }
    let backend = ["sqlite": "sqlite", "lmdb": "lmdb", "memory": "inmemory"][kind]!
    #expect(try metrics.expectCounter("datastore_commits_total", [("backend", backend)]).totalValue == 3)
    #expect(try metrics.expectCounter("datastore_rollbacks_total", [("backend", backend)]).totalValue == 1)
    #expect(try metrics.expectCounter("datastore_reads_total", [("backend", backend)]).totalValue >= 5)
    let durations = try metrics.expectTimer("datastore_commit_duration", [("backend", backend)]).values
    #expect(durations.count == 3 && durations.allSatisfy { $0 > 0 })
    // Every block is slower than a threshold of zero.
    #expect(kept.texts(.warning).filter { $0 == "slow write block" }.count == 4)
    #expect(kept.texts(.warning).contains("slow read block"))
    if kind == "lmdb" {
        // 2 MiB into a 256 KiB map.
        let blob = Value.string(String(repeating: "x", count: 64 << 10))
        for n in 0..<32 {
            try store.writeSync { try $0.insert(["key": .string("big\(n)"), "note": blob], into: "Keyed") }
        }
        #expect(kept.texts(.notice).contains("LMDB map grown"), "\(kept.texts())")
    }
}

/// The migration engine logs its start, each phase of each entity and its end, and counts the
/// items it copied.
@Test func theMigrationEngineLogsItsPhasesAndCountsItsItems() throws {
    let dir = try TemporaryDirectory()
    let source = try StoreLocation(parsing: "sqlite:" + dir.path("source.sqlite"))
    let store = try source.open(schema: Fixtures.schema)
    try store.writeSync { w in
        for n in 0..<50 { try w.insert(["key": .string("k\(n)"), "value": .int(Int64(n))], into: "Keyed") }
    }
    try store.close()
    let kept = KeptMessages()
    let metrics = TestMetrics()
    try Migrator.copy(from: source, to: StoreLocation(parsing: "lmdb:" + dir.path("copy.lmdb")),
                      options: MigrationOptions(instrumentation: Instrumentation(logger: kept.logger, metrics: metrics)))
    let texts = kept.texts(.info)
    #expect(texts.first == "migration started" && texts.last == "migration finished", "\(texts)")
    #expect(texts.contains("migration phase"))
    #expect(try metrics.expectCounter("datastore_migration_items_total", [("phase", "copy")]).totalValue >= 50)
}

/// Without instrumentation a store logs nothing: the default logger has no handler that
/// prints, and no metrics system is bootstrapped in the tests.
@Test func aStoreWithoutInstrumentationReportsNothing() throws {
    let instrumentation = Instrumentation.none
    #expect(instrumentation.logger.handler is SwiftLogNoOpLogHandler)
    #expect(instrumentation.metrics == nil)
}

/// The change-wait settings are reachable on `any DataStore`, without a downcast.
@Test func changeWaitSettingsWorkOnAnyDataStore() throws {
    let dir = try TemporaryDirectory()
    let store: any DataStore = try SQLiteStore(path: dir.path("s.sqlite"), schema: Fixtures.schema)
    defer { try? store.close() }
    #expect(store.changePollInterval == .milliseconds(5) && store.usesCommitNotifications)
    store.changePollInterval = .milliseconds(20)
    store.usesCommitNotifications = false
    #expect(store.changePollInterval == .milliseconds(20) && !store.usesCommitNotifications)
    #expect((store as? SQLiteStore)?.changePollInterval == .milliseconds(20))
}
