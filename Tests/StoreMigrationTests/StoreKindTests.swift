import ArgumentParser
@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
@_spi(Backend) import InMemoryStore
import MigrateStoreCommand
@_spi(Backend) import StoreMigration
import Synchronization
import Testing

/// A fourth backend written outside the package's backends: its own engine (an in-memory engine
/// that counts the transactions it runs), its own store type and its own kind, `tape:NAME`.
final class TapeEngine: StorageEngine {
    let inner: InMemoryEngine
    let transactions = Mutex(0)

    init(_ inner: InMemoryEngine) { self.inner = inner }

    var schema: Schema { inner.schema }

    func withReader<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        transactions.withLock { $0 += 1 }
        return try inner.withReader(body)
    }

    func withWriter<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        transactions.withLock { $0 += 1 }
        return try inner.withWriter(body)
    }

    func close() throws { try inner.close() }
}

final class TapeStore: Store, @unchecked Sendable {
    init(database: InMemoryDatabase, schema: Schema?, upgrades: SchemaUpgrades) throws {
        try super.init(engine: SchemaUpgrader.open(requested: schema, upgrades: upgrades, location: "tape") {
            try TapeEngine(InMemoryEngine(database: database, schema: $0))
        })
    }
}

final class TapeBackend: StoreBackend {
    let databases = Mutex<[String: InMemoryDatabase]>([:])

    var kind: StoreKind { "tape" }
    var fileExtension: String? { nil }
    func exists(at path: String) -> Bool { databases.withLock { $0[path] != nil } }
    func recognizes(_ path: String) -> Bool { false }

    func open(at path: String, schema: Schema?, upgrades: SchemaUpgrades, durability: Durability) throws
        -> any DataStore
    {
        let database = try databases.withLock { all in
            if let existing = all[path] { return existing }
            guard schema != nil else { throw StoreError(.notFound, "tape:\(path) does not exist") }
            all[path] = InMemoryDatabase()
            return all[path] ?? InMemoryDatabase()
        }
        return try TapeStore(database: database, schema: schema, upgrades: upgrades)
    }

    func openSource(at path: String, alreadyChecked: Bool) throws -> any DataStore {
        try open(at: path, schema: nil, durability: .full)
    }

    func check(at path: String) throws -> EngineCheck { EngineCheck("tape is fine") }
    func destroy(at path: String) throws { databases.withLock { _ = $0.removeValue(forKey: path) } }
    func move(from path: String, to other: String) throws {
        databases.withLock { all in all[other] = all.removeValue(forKey: path) }
    }
    func sizeOnDisk(at path: String) -> Int64 { 0 }
}

/// Runs migrate-store in this process; returns its exit code.
func runInProcess(_ arguments: [String]) -> Int32 {
    do {
        var command = try MigrateStore.parseAsRoot(arguments)
        try command.run()
        return 0
    } catch let exit as ExitCode {
        return exit.rawValue
    } catch {
        return MigrateStore.exitCode(for: error).rawValue
    }
}

@Test func aKindRegisteredFromOutsideCopiesVerifiesAndSyncsThroughMigratorAndMigrateStore() throws {
    StoreBackends.register(TapeBackend())
    #expect(StoreBackends.kinds.contains("tape"))
    let dir = try TemporaryDirectory()
    let sqlite = dir.location(.sqlite, "source")
    try DemoData.seed(sqlite, items: 500, seed: 11)
    let tape = try StoreLocation(parsing: "tape:copy")

    let copied = try Migrator.copy(from: sqlite, to: tape)
    #expect(copied.differences == 0 && copied.verified)
    let store = try tape.open(schema: nil)
    #expect(store is TapeStore)
    // Seven orders, and with them their pairs of products.
    let pairs = try store.read { try $0.count(FetchRequest("Order_products", filter: Field("source").among((1...7).map { .int($0) }))) }
    #expect(pairs >= 7)
    try store.writeSync { writer in _ = try writer.delete(FetchRequest("Order", limit: 7)) }
    try store.close()
    #expect(try Migrator.verify(from: sqlite, to: tape).differences == 7 + pairs)
    let synced = try Migrator.sync(from: sqlite, to: tape)
    #expect(synced.entities.reduce(0) { $0 + $1.itemsWritten } == 7 + pairs)
    #expect(try Migrator.verify(from: sqlite, to: tape).differences == 0)

    let back = dir.location(.lmdb, "back")
    #expect(
        runInProcess(["copy", "--from", "tape:copy", "--to", back.description, "--progress", "none"]) == 0)
    #expect(
        runInProcess(["verify", "--from", sqlite.description, "--to", back.description, "--progress", "none"])
            == 0)
    #expect(
        runInProcess(["copy", "--from", sqlite.description, "--to", "tape:second", "--progress", "none"]) == 0
    )
    #expect(
        runInProcess(["sync", "--from", back.description, "--to", "tape:second", "--progress", "none"]) == 0)
    #expect(
        runInProcess(["verify", "--from", "tape:second", "--to", "tape:copy", "--progress", "none"]) == 0)
    #expect(runInProcess(["inspect", "tape:second"]) == 0)
    #expect(runInProcess(["check", "tape:nowhere"]) == 2)
}

@Test func theUsersOwnCommandCopiesTheOneStoreOfTheDirectory() throws {
    let dir = try TemporaryDirectory()
    try DemoData.seed(StoreLocation(kind: .sqlite, path: dir.path("app.sqlite")), items: 300, seed: 5)
    let copy = try runCLI(["--from", "sqlite", "--to", "lmdb", "--progress", "none"], in: dir.url.path)
    #expect(copy.status == 0, "\(copy.errors)")
    #expect(copy.output.contains("verified: every item equals the source snapshot"), "\(copy.output)")
    #expect(FileManager.default.fileExists(atPath: dir.path("app.lmdb/data.mdb")))

    try DemoData.seed(StoreLocation(kind: .sqlite, path: dir.path("other.sqlite")), items: 10, seed: 6)
    let ambiguous = try runCLI(["--from", "sqlite", "--to", "lmdb", "--progress", "none"], in: dir.url.path)
    #expect(
        ambiguous.status == 2 && ambiguous.errors.contains("several stores (app, other)")
            && ambiguous.errors.split(separator: "\n").count == 1, "\(ambiguous.errors)")
    let named = try runCLI(
        ["--from", "sqlite", "--to", "lmdb", "--store", "other", "--progress", "none"],
        in: dir.url.path)
    #expect(named.status == 0, "\(named.errors)")
    #expect(FileManager.default.fileExists(atPath: dir.path("other.lmdb/data.mdb")))
    let inspect = try runCLI(["inspect", "lmdb:\(dir.path("other.lmdb"))"])
    #expect(inspect.output.contains("Customer: 2 items"), "\(inspect.output)")
}

@Test func resumeWithDryRunIsRefusedAndWritesNothing() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    try DemoData.seed(source, items: 100, seed: 2)
    let destination = dir.location(.lmdb, "destination")
    let refused = try runCLI([
        "copy", "--from", source.description, "--to", destination.description, "--resume",
        "--dry-run", "--progress", "none",
    ])
    #expect(refused.status == 64 && refused.errors.contains("--resume and --dry-run"), "\(refused.errors)")
    #expect(!destination.exists)
}
