// profile-store: one operation of the harness's workload on one backend, small enough for valgrind
// to read (the harness binary's debug information makes it give up). The store is seeded first
// (with the change feed off, as the raw side records nothing); callgrind counts only the operation
// when given `--toggle-collect=*runOperation*`:
//
//     valgrind --tool=callgrind --toggle-collect='*runOperation*' \
//         .build/release/profile-store lmdb scan 20000
//
// Operations: insert (one writeSync of COUNT items; insert-feed with the change feed on), bulk (one
// writeSync of insert(contentsOf:) of COUNT items into an empty store, change feed on; each
// repetition inserts the COUNT keys after the last one's), literal and pieces (COUNT of the
// workload's record literals made and let go, against their names and payloads only: what a
// literal costs; any backend, nothing stored), batched (COUNT items into an empty store,
// 1,000 a writeSync, change feed on, as the main table's batched row), scan (one
// full fetch), foreach (one full visit), get-each (the gets of get, each in a read of its own; raw-lmdb begins and aborts a read transaction for each), rows (one visit of Rows, each decoded into a struct), inplace
// (one visit of Rows, their fields read in place), get (COUNT point gets, at most 100,000), query (100 indexed
// equality fetches), unindexed (one filtered fetch), typed (one typed fetch through Codable), generated (one
// typed fetch through the code @StoredModel generates; on LMDB from each record's fields in place),
// generated-visit (the same models handed to a closure, none kept, through forEach),
// generated-rows (the same models read by name from rows, through visit and init(row:)), insert-generated (COUNT such models in one
// writeSync, change feed on); copy (Migrator.copy of
// the seeded store into the other backend), verify and checksum (Migrator.verify of the seeded
// store against such a copy, item by item and by range checksum); small and async (the harness's
// 10,000 small transactions, one insert each, through writeSync and writeAsync, on the seeded store
// with the change feed on, as the main table runs them; small-threads: the same from two threads
// at once, half each; small-off: small with the change feed off, as the main table's rows "change feed
// off" run them); jsonl-load (JSONLines.load, into a new store
// of the backend, of a file the seeded store was exported to). The backend `memory` is an in-memory store
// (no raw C side; no migration operations); `postgres` a PostgresStore in a schema of its own on the
// server whose socket directory PGHOST names (no raw C side; its copy is the SQLite -> PostgreSQL
// migration at the destination's batch, into a schema of its own each time). The backends `raw-lmdb` and `raw-sqlite`
// run the harness's raw C side of insert, batched, scan, foreach, get, query, unindexed, small, copy and
// small-feed (small, each transaction writing the feed's entry as the store does), so
// that the API's count has the raw one beside it.
// `PROFILE_REPEAT=N` runs the operation N times after one seeding (a read operation, bulk, or
// postgres copy; an insert would insert its keys again) and prints each run's time to standard
// error, so that `perf record` sees the operation rather than the seeding.
import BenchSupport
import DataStoreAPI
import DataStoreModels
import Foundation
import InMemoryStore
import JSONLStore
import LMDBStore
import PostgresStore
import SQLiteStore
import StoreMigration
import Synchronization

let arguments = CommandLine.arguments
let backends = ["lmdb", "sqlite", "memory", "postgres", "raw-lmdb", "raw-sqlite"]
guard arguments.count >= 3, backends.contains(arguments[1]) else {
    FileHandle.standardError.write(Data("usage: profile-store lmdb|sqlite|memory|postgres|raw-lmdb|raw-sqlite insert|insert-feed|bulk|batched|literal|pieces|scan|foreach|get|get-each|query|unindexed|typed|generated|generated-visit|generated-rows|small|small-off|small-feed|small-threads|async|copy|verify|checksum|jsonl-load [COUNT]\n".utf8))
    exit(2)
}
let backend = arguments[1]
let operation = arguments[2]
let count = arguments.count > 3 ? Int(arguments[3]) ?? 20_000 : 20_000
let workload = Workload(count: count)

/// The workload's item declared with the model macro: its typed reads and writes run the code
/// `@StoredModel` generates (`generated`, `insert-generated`), not `Codable`.
@StoredModel("Item")
struct GeneratedItem {
    var id: Int64
    var name: String
    var score: Int64
    var ratio: Double
    var payload: [UInt8]

    init(_ workload: Workload, _ i: Int) {
        (id, name, score, ratio, payload) = (Int64(i), workload.name(i), workload.score(i), workload.ratio(i),
                                             workload.payload(i))
    }
}


/// How many times `bulk` ran in this process.
nonisolated(unsafe) var bulkRounds = 0

/// The harness's own code for each side (`APIBench`, `RawLMDBBench`, `RawSQLiteBench`), so that
/// the counts of the API and of raw C are of the same work.
@inline(never)
func runOperation(_ store: any DataStore, _ operation: String, count: Int) throws -> Int {
    let api = APIBench(store: store, workload: workload)
    switch operation {
    case "insert":
        try api.insertAll(from: 0, count: count, batch: count)
        return count
    case "literal":
        // What a record literal costs its writer: COUNT of the workload's records made and let go.
        for i in 0..<count { consume(workload.record(i)) }
        return count
    case "pieces":
        // Against it, what the raw C loop makes of the same item: its name and its payload.
        for i in 0..<count { consume(workload.name(i)); consume(workload.payload(i)) }
        return count
    case "batched":
        // The harness's batched row: 1,000 inserts a writeSync, into an empty store.
        try api.insertAll(from: 0, count: count, batch: 1_000)
        return count
    case "bulk":
        // The harness's bulk row: one writeSync of insert(contentsOf:) (COPY on PostgreSQL).
        // Each repetition (PROFILE_REPEAT) inserts keys of its own, after the last one's.
        let first = bulkRounds * count
        bulkRounds += 1
        try store.writeSync { w in try w.insert(contentsOf: (first..<(first + count)).map(workload.record), into: "Item") }
        return count
    case "scan": return try api.scan()
    case "get": return try api.pointGets(workload.lookups)
    case "get-each":
        // The same gets, each in a read of its own (what a server does for each request).
        return try workload.lookups.reduce(0) { found, key in
            found + (try store.read { try $0.get("Item", key: .int(Int64(key))) } == nil ? 0 : 1)
        }
    case "foreach": return try api.visit()
    case "rows": return try api.visitRows()
    case "inplace": return Int(truncatingIfNeeded: try api.visitInPlace())
    case "query": return try api.indexedQueries()
    case "unindexed": return try api.unindexedQuery()
    case "typed": return try store.read { try $0.fetch(WorkloadItem.self).count }
    case "generated": return try store.read { try $0.fetch(GeneratedItem.self).count }
    case "generated-visit":
        // The same models handed to a closure, none kept (forEach; on LMDB from stored fields).
        return try store.read { r in
            var visited = 0
            try r.forEach(GeneratedItem.self, sortedBy: []) { item in
                consume(item)
                visited += 1
            }
            return visited
        }
    case "generated-rows":
        // The same models read by name from rows (what the fetch above did before it read fields in place).
        return try store.read { r in
            var items: [GeneratedItem] = []
            try r.visit(FetchRequest("Item")) { row in items.append(try GeneratedItem(row: row)) }
            return items.count
        }
    case "insert-generated":
        let items = (0..<count).map { GeneratedItem(workload, $0) }
        try store.writeSync { w in for item in items { try w.insert(item) } }
        return count
    case "small":
        try api.smallTransactions(from: count)
        return Workload.smallTransactions
    case "small-threads":
        // The same small transactions from two threads at once (half each), on one store: what
        // its shared state costs writers of one process that run on both cores.
        let half = Workload.smallTransactions / 2
        let failures = Mutex<[any Error]>([])
        let threads = (0..<2).map { t in
            Thread {
                do { try api.smallTransactions(from: count + t * half, count: half) } catch {
                    failures.withLock { $0.append(error) }
                }
            }
        }
        for thread in threads { thread.start() }
        while threads.contains(where: { !$0.isFinished }) { usleep(1_000) }
        if let failure = failures.withLock({ $0.first }) { throw failure }
        return 2 * half
    case "async":
        try api.asyncWrites(from: count)
        return Workload.smallTransactions
    default: throw StoreError(.invalidArgument, "unknown operation '\(operation)'")
    }
}

/// The raw C side of the same operations (no typed fetch, no migration; a change feed's entry
/// only in small-feed).
@inline(never)
func runOperationRaw(_ raw: RawSide, _ operation: String, count: Int) throws -> Int {
    switch operation {
    case "insert":
        raw.insert(0, count, count)
        return count
    case "batched":
        raw.insert(0, count, 1_000)
        return count
    case "scan": return raw.scan()
    case "get": return raw.gets(workload.lookups)
    case "get-each":
        guard let getsEach = raw.getsEach else { break }
        return getsEach(workload.lookups)
    case "foreach", "rows": return raw.visit()
    case "inplace": return Int(truncatingIfNeeded: raw.visitInPlace())
    case "query": return raw.indexed()
    case "unindexed": return raw.unindexed()
    case "small":
        raw.insert(count, Workload.smallTransactions, 1)
        return Workload.smallTransactions
    case "small-feed":
        guard let withFeed = raw.smallWithFeed else { break }
        withFeed(count, Workload.smallTransactions)
        return Workload.smallTransactions
    default: break
    }
    throw StoreError(.invalidArgument, "no raw C side for '\(operation)'")
}

/// The raw C copy of the harness's migration rows.
@inline(never)
func runOperationRawCopy(_ read: (Int, ([RawRow]) -> Void) -> Void, _ write: @escaping ([RawRow]) -> Void) -> Int {
    var copied = 0
    read(1_000) { rows in
        write(rows)
        copied += rows.count
    }
    return copied
}

/// `JSONLines.load` of a file the seeded store was exported to, into a new store of the same kind.
@inline(never)
func runOperationJSONL(_ path: String, into store: any DataStore) throws -> Int {
    try JSONLines.load(path, into: store)
}

/// The operations of either raw bench.
struct RawSide {
    let insert: (Int, Int, Int) -> Void
    let gets: ([Int]) -> Int
    let scan: () -> Int
    let visit: () -> Int
    let visitInPlace: () -> Int64
    let indexed: () -> Int
    let unindexed: () -> Int
    /// The small transactions, each writing the feed's entry as the store does.
    var smallWithFeed: ((Int, Int) -> Void)?
    /// The point gets, each in a read transaction of its own (LMDB only).
    var getsEach: (([Int]) -> Int)?

    init(lmdb: RawLMDBBench) {
        (insert, gets, scan, visit, visitInPlace) = (lmdb.insertAll, lmdb.pointGets, lmdb.scan, lmdb.visit, lmdb.visitInPlace)
        (indexed, unindexed) = (lmdb.indexedQueries, lmdb.unindexedQuery)
        smallWithFeed = lmdb.insertAllWithFeed
        getsEach = lmdb.pointGetsEachInARead
    }

    init(sqlite: RawSQLiteBench) {
        (insert, gets, scan, visit, visitInPlace) = (sqlite.insertAll, sqlite.pointGets, sqlite.scan, sqlite.visit,
                                                     sqlite.visitInPlace)
        (indexed, unindexed) = (sqlite.indexedQueries, sqlite.unindexedQuery)
        smallWithFeed = sqlite.insertAllWithFeed
    }
}

/// A migration between the two backends (copy, verify or checksum), without the source's
/// integrity check, as the harness's rows run it.
@inline(never)
func runOperationMigration(_ operation: String, from source: StoreLocation, to destination: StoreLocation) throws -> Int {
    switch operation {
    case "copy":
        return try Migrator.copy(from: source, to: destination,
                                 options: MigrationOptions(batchSize: 1_000, verify: false, checkSource: false)).entities.reduce(0) { $0 + $1.itemsWritten }
    default:
        let report = try Migrator.verify(from: source, to: destination,
                                         options: MigrationOptions(checkSource: false, checksum: operation == "checksum"))
        return report.differences
    }
}

/// Runs a read operation `PROFILE_REPEAT` times (1 unless set), printing each run's time to
/// standard error, so that `perf` sees the operation rather than the seeding.
func repeated(_ body: () throws -> Int) rethrows -> Int {
    let times = Int(ProcessInfo.processInfo.environment["PROFILE_REPEAT"] ?? "") ?? 1
    var result = 0
    for _ in 0..<max(times, 1) {
        let start = ContinuousClock.now
        result = try body()
        if times > 1 { FileHandle.standardError.write(Data("\(ContinuousClock.now - start)\n".utf8)) }
    }
    return result
}

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("profile-\(UUID().uuidString)").path
/// Ends the process, its stores' directory removed (`exit` runs no `defer`: every run left one
/// behind).
func finish(_ code: Int32) -> Never {
    try? FileManager.default.removeItem(atPath: directory)
    exit(code)
}
defer { try? FileManager.default.removeItem(atPath: directory) }
do {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    if backend.hasPrefix("raw-") && operation == "copy" {
        // The harness's raw copy: every row read in pages of 1,000, each page one transaction.
        let workload = Workload(count: count)
        let result: Int
        if backend == "raw-sqlite" {
            let source = RawSQLiteBench(path: directory + "/source.sqlite", workload: workload)
            source.insertAll(from: 0, count: count, batch: count)
            try FileManager.default.createDirectory(atPath: directory + "/copy.lmdb", withIntermediateDirectories: true)
            result = runOperationRawCopy(source.forEachRow, RawLMDBBench(path: directory + "/copy.lmdb", workload: workload).write)
        } else {
            try FileManager.default.createDirectory(atPath: directory + "/source.lmdb", withIntermediateDirectories: true)
            let source = RawLMDBBench(path: directory + "/source.lmdb", workload: workload)
            source.insertAll(from: 0, count: count, batch: count)
            result = runOperationRawCopy(source.forEachRow, RawSQLiteBench(path: directory + "/copy.sqlite", workload: workload).write)
        }
        print("\(backend) \(operation) \(count): \(result)")
        finish(0)
    }
    if backend == "postgres" && operation == "copy" {
        // The harness's migration row: SQLite -> PostgreSQL at the destination's batch, no verify.
        guard let host = ProcessInfo.processInfo.environment["PGHOST"], host.hasPrefix("/") else {
            throw StoreError(.invalidArgument, "the backend postgres needs PGHOST, a server's socket directory")
        }
        let sqlite = StoreLocation(kind: .sqlite, path: directory + "/store.sqlite")
        let source = try sqlite.open(schema: Workload.schema, durability: .normal)
        try APIBench(store: source, workload: workload).insertAll(from: 0, count: count, batch: 10_000)
        try source.close()
        do {
            var urls: [String] = []
            // Each schema copied into is dropped, also when a copy fails.
            defer { for url in urls { try? PostgresStore.destroy(PostgresLocation(parsing: url)) } }
            let result = try repeated {
                urls.append("postgres://postgres@/datastore?schema=profile_copy_\(urls.count)_\(getpid())&host=\(host)")
                let destination = try StoreLocation(parsing: urls[urls.count - 1])
                return try Migrator.copy(from: sqlite, to: destination, options: MigrationOptions(verify: false, checkSource: false))
                    .entities.reduce(0) { $0 + $1.itemsWritten }
            }
            print("\(backend) \(operation) \(count): \(result)")
        }
        finish(0)
    }
    if ["copy", "verify", "checksum"].contains(operation) {
        let lmdb = StoreLocation(kind: .lmdb, path: directory + "/store.lmdb")
        let sqlite = StoreLocation(kind: .sqlite, path: directory + "/store.sqlite")
        let (source, destination) = backend == "lmdb" ? (lmdb, sqlite) : (sqlite, lmdb)
        let store = try source.open(schema: Workload.schema, durability: .normal)
        try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: false)) }
        try APIBench(store: store, workload: workload).insertAll(from: 0, count: count, batch: count)
        try store.close()
        if operation != "copy" {
            _ = try Migrator.copy(from: source, to: destination, options: MigrationOptions(verify: false, checkSource: false))
        }
        let result = try runOperationMigration(operation, from: source, to: destination)
        print("\(backend) \(operation) \(count): \(result)")
        finish(0)
    }
    if backend.hasPrefix("raw-") {
        let raw = backend == "raw-lmdb"
            ? RawSide(lmdb: RawLMDBBench(path: directory, workload: workload))
            : RawSide(sqlite: RawSQLiteBench(path: directory + "/store.sqlite", workload: workload))
        if operation != "insert" && operation != "batched" { raw.insert(0, count, count) }
        let result = try repeated { try runOperationRaw(raw, operation, count: count) }
        print("\(backend) \(operation) \(count): \(result)")
        finish(0)
    }
    func open(_ name: String) throws -> any DataStore {
        let path = directory + "/" + name
        if backend == "memory" { return try InMemoryStore(schema: Workload.schema) }
        if backend == "postgres" {
            guard let host = ProcessInfo.processInfo.environment["PGHOST"], host.hasPrefix("/") else {
                throw StoreError(.invalidArgument, "the backend postgres needs PGHOST, a server's socket directory (Scripts/postgres-server.sh start DIR prints it)")
            }
            let schema = "profile_\(name)_\(ProcessInfo.processInfo.processIdentifier)"
            return try PostgresStore(url: "postgres://postgres@/datastore?schema=\(schema)&host=\(host)",
                                     schema: Workload.schema, durability: .normal)
        }
        if backend == "lmdb" {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            return try LMDBStore(path: path, schema: Workload.schema,
                                 options: LMDBOptions(durability: .normal, initialMapSize: 1 << 30))
        }
        return try SQLiteStore(path: path + ".sqlite", schema: Workload.schema, options: SQLiteOptions(durability: .normal))
    }
    let store = try open("store")
    if operation == "jsonl-load" {
        try APIBench(store: store, workload: workload).insertAll(from: 0, count: count, batch: count)
        let file = directory + "/items.jsonl"
        _ = try JSONLines.export(store, to: file)
        try store.close()
        let loaded = try open("loaded")
        print("\(backend) \(operation) \(count): \(try runOperationJSONL(file, into: loaded))")
        try loaded.close()
        finish(0)
    }
    // `insert-feed`, `bulk`, `small`, `async`: with the change feed on, as a store opens by default
    // and as the harness runs them (the seeding below then records one transaction).
    if !["insert-feed", "insert-generated", "bulk", "batched", "small", "async"].contains(operation) {
        try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: false)) }
    }
    // (An insert's keys are those the seeding would take: it runs on an empty store.)
    if !operation.hasPrefix("insert") && !["bulk", "batched", "literal", "pieces"].contains(operation) {
        try APIBench(store: store, workload: workload).insertAll(from: 0, count: count, batch: count)
    }
    let result = try repeated {
        try runOperation(store, operation == "insert-feed" ? "insert" : operation == "small-off" ? "small" : operation, count: count)
    }
    print("\(backend) \(operation) \(count): \(result)")
    try store.close()
} catch {
    FileHandle.standardError.write(Data("profile-store: \(error)\n".utf8))
    finish(1)
}

