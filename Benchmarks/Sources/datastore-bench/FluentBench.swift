import BenchSupport
import DataStoreAPI
import FluentKit
import FluentPostgresDriver
import FluentSQLiteDriver
import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresStore
import SQLiteStore

/// The ``Track`` model as Fluent declares it: the same table, columns and index. (`@Field` is
/// spelled out: DataStoreAPI's `Field` would shadow it.)
final class FluentTrack: Model, @unchecked Sendable {
    static let schema = "Track"
    @ID(custom: "id", generatedBy: .user) var id: Int64?
    @FieldProperty<FluentTrack, String>(key: "title") var title: String
    @FieldProperty<FluentTrack, Int64>(key: "plays") var plays: Int64
    @FieldProperty<FluentTrack, Double>(key: "rating") var rating: Double
    @FieldProperty<FluentTrack, Data>(key: "artwork") var artwork: Data

    init() {}

    init(_ track: Track) {
        id = track.id
        title = track.title
        plays = track.plays
        rating = track.rating
        artwork = track.artwork
    }
}

/// One row of the Fluent table: seconds of Fluent and of the typed layer for the same work.
struct FluentRow {
    var backend: String
    var operation: String
    var operations: Int
    var fluent: Double
    var store: Double
}

/// The same Codable model through Fluent (fluent-sqlite-driver, fluent-postgres-driver) and
/// through the typed layer (SQLiteStore, PostgresStore), `count` items: inserts in one
/// transaction, fetch all, 1,000 fetches by an indexed attribute, 1,000 one-insert transactions.
/// Both sides run with the same durability (SQLite synchronous=NORMAL, PostgreSQL asynchronous
/// commit). Fluent's inserts go as its batched `create(on:)`, 1,000 models a statement (the
/// largest batch under SQLite's limit of bound variables with 5 columns).
/// With `key`, each backend's rows again with the store encrypted (Fluent's side as it is).
@MainActor func fluentComparison(count: Int, key: StoreKey? = nil) throws -> [FluentRow] {
    let (host, url) = (postgresHost, postgresURL("bench_typed"))
    return try blocking { try await fluentComparison(count: count, postgresHost: host, postgresURL: url, key: key) }
}

private func fluentComparison(count: Int, postgresHost: String, postgresURL: String, key: StoreKey?) async throws
    -> [FluentRow] {
    let tracks = (0..<count).map(Track.make)
    var entity = try Track.entitySchema()
    entity.indexes = [Index("byPlays", on: ["plays"])]
    let schema = Schema(entities: [entity])
    let group = MultiThreadedEventLoopGroup.singleton
    let databases = Databases(threadPool: NIOThreadPool.singleton, on: group)
    var logger = Logger(label: "fluent-bench")
    logger.logLevel = .error
    var rows: [FluentRow] = []

    // SQLite: one file each, WAL and synchronous=NORMAL on both sides.
    let directory = scratch("fluent")
    try? FileManager.default.removeItem(atPath: directory)
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    databases.use(.sqlite(.file(directory + "/fluent.sqlite")), as: .sqlite)
    let sqlite = databases.database(.sqlite, logger: logger, on: group.any())!
    try await (sqlite as! any SQLDatabase).raw("PRAGMA journal_mode=WAL").run()
    try await (sqlite as! any SQLDatabase).raw("PRAGMA synchronous=NORMAL").run()
    for key in key == nil ? [nil] : [nil, key] {
        let name = key == nil ? "store" : "encrypted"
        let sqliteStore = try SQLiteStore(path: directory + "/\(name).sqlite", schema: schema,
                                          options: SQLiteOptions(durability: .normal, key: key))
        rows += try await fluentRows("SQLite" + (key == nil ? "" : ", encrypted"), fluent: sqlite, store: sqliteStore,
                                     tracks: tracks)
        try sqliteStore.close()
    }

    // PostgreSQL: the benchmarks' server, a schema each.
    let location = try PostgresLocation(parsing: postgresURL)
    try? PostgresStore.destroy(location)
    var configuration = SQLPostgresConfiguration(unixDomainSocketPath: postgresHost + "/.s.PGSQL.5432",
                                                 username: "postgres", password: nil, database: "datastore")
    configuration.searchPath = ["bench_fluent"]
    databases.use(.postgres(configuration: configuration), as: .psql)
    let postgres = databases.database(.psql, logger: logger, on: group.any())!
    let sql = postgres as! any SQLDatabase
    try await sql.raw("DROP SCHEMA IF EXISTS bench_fluent CASCADE").run()
    try await sql.raw("CREATE SCHEMA bench_fluent").run()
    try await sql.raw("SET synchronous_commit TO off").run()
    for key in key == nil ? [nil] : [nil, key] {
        let postgresStore = try PostgresStore(url: postgresURL, schema: schema, durability: .normal, key: key)
        rows += try await fluentRows("PostgreSQL" + (key == nil ? "" : ", encrypted"), fluent: postgres,
                                     store: postgresStore, tracks: tracks)
        try postgresStore.close()
        try? PostgresStore.destroy(location)
    }
    try await sql.raw("DROP SCHEMA bench_fluent CASCADE").run()
    await databases.shutdownAsync()
    return rows
}

/// The rows of one backend. Fluent's database must be the only connection its event loop
/// uses (one connection a loop, the driver's default), so that `SET` statements hold.
private func fluentRows(_ backend: String, fluent: any Database, store: any DataStore,
                                   tracks: [Track]) async throws -> [FluentRow] {
    let count = tracks.count
    try await fluent.schema("Track")
        .field("id", .int64, .identifier(auto: false))
        .field("title", .string, .required)
        .field("plays", .int64, .required)
        .field("rating", .double, .required)
        .field("artwork", .data, .required)
        .create()
    try await (fluent as! any SQLDatabase).raw("CREATE INDEX \"Track.byPlays\" ON \"Track\" (plays)").run()
    var rows: [FluentRow] = []
    let models = tracks.map(FluentTrack.init)
    let fluentInsert = try await timeAsync {
        try await fluent.transaction { db in
            for start in stride(from: 0, to: count, by: 1_000) {
                try await Array(models[start..<min(count, start + 1_000)]).create(on: db)
            }
        }
    }
    let loopInsert = try time { try store.writeSync { w in for track in tracks { try w.insert(track) } } }
    try store.writeSync { _ = try $0.delete(FetchRequest("Track")) }
    let bulkInsert = try time { try store.writeSync { try $0.insert(contentsOf: tracks) } }
    rows.append(FluentRow(backend: backend, operation: "insert, one transaction (typed: a loop of insert)",
                          operations: count, fluent: fluentInsert, store: loopInsert))
    rows.append(FluentRow(backend: backend, operation: "insert, one transaction (typed: insert(contentsOf:))",
                          operations: count, fluent: fluentInsert, store: bulkInsert))

    var fetched = 0
    let fluentFetch = try await bestOfAsync(3) { fetched = try await FluentTrack.query(on: fluent).all().count }
    precondition(fetched == count)
    let storeFetch = try bestOf(3) { fetched = try store.read { try $0.fetch(Track.self) }.count }
    precondition(fetched == count)
    rows.append(FluentRow(backend: backend, operation: "fetch all", operations: count, fluent: fluentFetch,
                          store: storeFetch))

    let queries = 1_000
    var found = 0
    let fluentQueries = try await bestOfAsync(3) {
        found = 0
        for k in 0..<queries { found += try await FluentTrack.query(on: fluent).filter(\FluentTrack.$plays == Int64(k)).all().count }
    }
    let expected = found
    let storeQueries = try bestOf(3) {
        found = 0
        try store.read { r in
            for k in 0..<queries { found += try r.fetch(Track.self, where: Field("plays") == .int(Int64(k))).count }
        }
    }
    precondition(found == expected)
    rows.append(FluentRow(backend: backend, operation: "fetch by an indexed attribute (\(queries) queries)",
                          operations: queries, fluent: fluentQueries, store: storeQueries))

    let small = 1_000
    let fluentSmall = try await timeAsync {
        for i in 0..<small {
            let model = FluentTrack(Track.make(count + i))
            try await fluent.transaction { db in try await model.create(on: db) }
        }
    }
    let storeSmall = try time {
        for i in 0..<small { try store.writeSync { try $0.insert(Track.make(2 * count + i)) } }
    }
    rows.append(FluentRow(backend: backend, operation: "one-insert transactions (\(small))", operations: small,
                          fluent: fluentSmall, store: storeSmall))
    // (The next rows make Fluent's table again.)
    try await fluent.schema("Track").delete()
    return rows
}

func timeAsync(_ body: () async throws -> Void) async rethrows -> Double {
    let start = ContinuousClock.now
    try await body()
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

func bestOfAsync(_ runs: Int, _ body: () async throws -> Void) async rethrows -> Double {
    var best = Double.infinity
    for _ in 0..<runs { best = min(best, try await timeAsync(body)) }
    return best
}

func printFluentTable(_ rows: [FluentRow], count: Int) {
    print("")
    print("| Codable records (\(count)) | backend | operation | Fluent ops/s | typed layer ops/s | typed / Fluent |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for row in rows {
        print(String(format: "| | %@ | %@ | %.0f | %.0f | %.2f |", row.backend, row.operation,
                     Double(row.operations) / row.fluent, Double(row.operations) / row.store, row.fluent / row.store))
    }
}

/// Runs an async call to its end from synchronous code.
func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = BlockingResult<T>()
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        do { box.result = .success(try await body()) } catch { box.result = .failure(error) }
        done.signal()
    }
    done.wait()
    return try box.result!.get()
}

/// What a blocked-on task returned: written by the task before it signals, read after.
final class BlockingResult<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}
