// datastore-bench: every backend and the migration next to the raw C API doing the same work in
// the same run, and SQLiteStore's typed layer next to GRDB.
//
//     swift run -c release datastore-bench [--quick] [--sizes 100000,1000000] [--schema-steps] [--feed] [--jsonl] [--postgres] [--writers] [--scaling] [--backends] [--migration] [--relationships] [--no-postgres] [--no-grdb] [--standbys]
import ArgumentParser
import BenchSupport
import DataStoreAPI
import Foundation
import LMDBStore
import SQLiteStore
import StoreMigration

/// The harness's options, parsed by swift-argument-parser as `migrate-store`'s are: `--help`
/// prints them, and an unknown argument or a bad `--sizes` is refused (exit 2) rather than
/// running the full benchmark (11 minutes).
struct BenchOptions: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "datastore-bench")

    @Flag(help: "20,000 items, one size: a quick look.") var quick = false
    @Option(help: "Comma-separated item counts (default 100000,1000000; with --scaling, the store sizes).")
    var sizes: String?
    @Flag(help: "Only the schema-step table.") var schemaSteps = false
    @Flag(help: "Only the change feed's table.") var feed = false
    @Flag(help: "Only the JSON Lines table.") var jsonl = false
    @Flag(help: "Only the PostgreSQL table.") var postgres = false
    @Flag(help: "Only the small-write and thread-scaling table.") var scaling = false
    @Flag(help: "Only the SQLite and LMDB rows of the main table (and GRDB unless --no-grdb).") var backends = false
    @Flag(help: "Only the migration rows (copies both ways and both verifies).") var migration = false
    @Flag(help: "Only the relationship rows (eager loading, cascades, reference checks).") var relationships = false
    @Flag(help: "Only Sync's JSON: import of users with 10 nested notes each, and export (100,000 users; 1,000 with --quick).")
    var syncJSON = false
    @Flag(help: "Only the async API next to the synchronous one.") var async = false
    @Flag(help: ArgumentHelp("Only the Core Data and plain SQLite sources: read, copied into LMDB and PostgreSQL, next "
        + "to a raw C loop reading the same table (and pgloader).")) var foreign = false
    @Flag(help: ArgumentHelp("Only the Realm source: a generated Realm file read, and copied into LMDB and "
        + "PostgreSQL, next to a raw Swift loop over the file's bytes; the same file encrypted.")) var realm = false
    @Flag(help: "Leave out the PostgreSQL rows.") var noPostgres = false
    @Flag(help: "Every row that a store runs in, again on encrypted stores (a raw key): the SQLite, LMDB and PostgreSQL rows, the migration, schema-step, feed, async, relationship, Sync JSON, JSON Lines, scaling and writer rows.")
    var encryption = false
    @Flag(help: "Leave out the GRDB table.") var noGrdb = false
    @Flag(help: "Only the typed layer's table (GRDB, Codable, @StoredModel, the hand-written loop; 100,000 records).")
    var typed = false
    @Flag(help: "Leave out the Fluent table (it needs PostgreSQL too).") var noFluent = false
    @Flag(help: "Only the Fluent table (SQLite and PostgreSQL).") var fluent = false
    @Flag(help: ArgumentHelp("Only PostgreSQL's writers: one-insert transactions from 1, 4, 16 and 64 threads, tasks "
        + "and processes, next to pgbench and Fluent at the same concurrency, and one connection next to libpq."))
    var writers = false
    @Option(help: .hidden) var writerChild: String?
    @Option(help: .hidden) var realmCopyChild: String?
    @Flag(help: ArgumentHelp("Only reads from a standby: 16 readers against a primary alone and a primary with an "
        + "asynchronous standby of their own, read-your-writes on and off (with --postgres, the PostgreSQL table "
        + "follows in the same run).")) var standbys = false

    /// The item counts of `--sizes`, when given.
    var sizeList: [Int]? {
        sizes.map { $0.split(separator: ",", omittingEmptySubsequences: false).map { Int($0) ?? 0 } }
    }

    func validate() throws {
        if let list = sizeList, list.isEmpty || list.contains(where: { $0 <= 0 }) {
            throw ValidationError("--sizes needs a comma-separated list of positive item counts")
        }
    }
}

let options: BenchOptions
do {
    options = try BenchOptions.parse()
} catch {
    let succeeded = BenchOptions.exitCode(for: error) == .success
    FileHandle.standardError.write(Data((BenchOptions.fullMessage(for: error) + "\n").utf8))
    exit(succeeded ? 0 : 2)
}
if let child = options.writerChild { runWriterChild(child) }
if let child = options.realmCopyChild { runRealmCopyChild(child) }
/// The raw key of `--encryption`'s encrypted stores.
let benchmarkKey = try StoreKey(rawKey: (0..<32).map { UInt8($0) })
if options.standbys {
    try benchmarkStandbyReads(keys: options.encryption ? [nil, benchmarkKey] : [nil])
    // With --postgres, the PostgreSQL table follows in the same run.
    if !options.postgres { exit(0) }
}
if options.writers {
    try benchmarkPostgresWriterScaling(clients: options.sizeList ?? [1, 4, 16, 64], key: options.encryption ? benchmarkKey : nil)
    exit(0)
}
let quick = options.quick
var sizes = options.sizeList ?? (quick ? [20_000] : [100_000, 1_000_000])
if options.fluent {
    let count = options.sizeList?.first ?? (quick ? 20_000 : 100_000)
    printFluentTable(try fluentComparison(count: count, key: options.encryption ? benchmarkKey : nil), count: count)
    exit(0)
}

/// The typed layer's table: GRDB, the typed layer through `Codable` and through the code
/// `@StoredModel` generates, and the hand-written C-API loop, `grdbCount` records each.
func printTypedTable(_ grdb: TypedComparison, count grdbCount: Int) {
    print("")
    print("| Codable records (\(grdbCount)) | GRDB 7 records/s | SQLiteStore typed layer records/s | hand-written C-API loop records/s | SQLiteStore / GRDB | SQLiteStore / hand-written |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    print(String(format: "| insert in one transaction | %.0f | %.0f | %.0f | %.2f | %.2f |", Double(grdbCount) / grdb.grdbInsert,
                 Double(grdbCount) / grdb.storeInsert, Double(grdbCount) / grdb.handInsert, grdb.grdbInsert / grdb.storeInsert,
                 grdb.handInsert / grdb.storeInsert))
    print(String(format: "| fetch all | %.0f | %.0f | %.0f | %.2f | %.2f |", Double(grdbCount) / grdb.grdbFetch,
                 Double(grdbCount) / grdb.storeFetch, Double(grdbCount) / grdb.handFetch, grdb.grdbFetch / grdb.storeFetch,
                 grdb.handFetch / grdb.storeFetch))
    // The same records declared with @StoredModel: the generated row decoder and record encoder.
    print(String(format: "| insert in one transaction, @StoredModel | %.0f | %.0f | %.0f | %.2f | %.2f |",
                 Double(grdbCount) / grdb.grdbInsert, Double(grdbCount) / grdb.generatedInsert,
                 Double(grdbCount) / grdb.handInsert, grdb.grdbInsert / grdb.generatedInsert,
                 grdb.handInsert / grdb.generatedInsert))
    print(String(format: "| insert in one transaction, @StoredModel, change feed off | %.0f | %.0f | %.0f | %.2f | %.2f |",
                 Double(grdbCount) / grdb.grdbInsert, Double(grdbCount) / grdb.generatedInsertFeedOff,
                 Double(grdbCount) / grdb.handInsert, grdb.grdbInsert / grdb.generatedInsertFeedOff,
                 grdb.handInsert / grdb.generatedInsertFeedOff))
    print(String(format: "| fetch all, @StoredModel | %.0f | %.0f | %.0f | %.2f | %.2f |", Double(grdbCount) / grdb.grdbFetch,
                 Double(grdbCount) / grdb.generatedFetch, Double(grdbCount) / grdb.handFetch,
                 grdb.grdbFetch / grdb.generatedFetch, grdb.handFetch / grdb.generatedFetch))
    if let (insert, fetch) = grdb.encrypted {
        // The same generated model on an encrypted store (--encryption), next to the same columns.
        print(String(format: "| insert in one transaction, @StoredModel, encrypted | %.0f | %.0f | %.0f | %.2f | %.2f |",
                     Double(grdbCount) / grdb.grdbInsert, Double(grdbCount) / insert, Double(grdbCount) / grdb.handInsert,
                     grdb.grdbInsert / insert, grdb.handInsert / insert))
        print(String(format: "| fetch all, @StoredModel, encrypted | %.0f | %.0f | %.0f | %.2f | %.2f |",
                     Double(grdbCount) / grdb.grdbFetch, Double(grdbCount) / fetch, Double(grdbCount) / grdb.handFetch,
                     grdb.grdbFetch / fetch, grdb.handFetch / fetch))
    }
}

if options.typed {
    let count = options.sizeList?.first ?? (quick ? 20_000 : 100_000)
    printTypedTable(try grdbComparison(count: count, key: options.encryption ? benchmarkKey : nil), count: count)
    exit(0)
}

struct Row {
    var backend: String
    var operation: String
    var n: Int
    var operations: Int
    var apiSeconds: Double
    var rawSeconds: Double
    /// Peak RssAnon growth during the API's and the raw side's run, in KiB.
    var apiPeak = 0
    var rawPeak = 0
}

var rows: [Row] = []

/// `memory`: whether `api` was timed just before `raw`, the last two blocks timed, so that their
/// memory peaks are the last two (rows whose times were taken earlier show none).
@MainActor func record(_ backend: String, _ operation: String, _ n: Int, operations: Int, api: Double, raw: Double,
                       memory: Bool = true, peaks: (api: Int, raw: Int)? = nil) {
    rows.append(Row(backend: backend, operation: operation, n: n, operations: operations, apiSeconds: api, rawSeconds: raw,
                    apiPeak: memory ? peaks?.api ?? RssAnonSampler.shared.peak(back: 2) : -1,
                    rawPeak: memory ? peaks?.raw ?? RssAnonSampler.shared.peak(back: 1) : -1))
    let ratio = raw / api
    FileHandle.standardError.write(Data(String(format: "%@ %@ n=%d: api %.3fs raw %.3fs (%.2f of raw)\n", backend,
                                               operation, n, api, raw, ratio).utf8))
}

/// How many times a write row's two sides are timed (``inTurns(_:syncing:api:raw:)``).
let writeRounds = 3

/// A row's two sides timed in turns, the API's then the raw side's, `rounds` times: the fastest
/// round of each side, and that round's memory peak. A write row's rounds each write where no
/// round wrote before (keys of its own, or a store of its own, which `api` and `raw` choose from
/// the round they are given); a write timed once moved by up to 0.3 of a ratio from one run to the
/// next (Benchmarks/README.md), and taking turns keeps a slow stretch of the machine (a
/// checkpoint, the page cache's write-back) from landing on one side only. With `syncing` (the
/// writes), each side's round starts once the page cache has written out what earlier writes
/// left in it (`sync()`, not timed): otherwise a round's fsyncs also wait for the last round's
/// pages, which the kernel writes back while the next one runs.
@MainActor func inTurns(_ rounds: Int = writeRounds, syncing: Bool = true, api: (Int) throws -> Void,
                        raw: (Int) throws -> Void) rethrows -> (api: Double, raw: Double, peaks: (api: Int, raw: Int)) {
    var best = (api: Double.infinity, raw: Double.infinity, peaks: (api: 0, raw: 0))
    for round in 0..<rounds {
        if syncing { sync() }
        let a = try time { try api(round) }
        if a < best.api { (best.api, best.peaks.api) = (a, RssAnonSampler.shared.peak(back: 1)) }
        if syncing { sync() }
        let r = try time { try raw(round) }
        if r < best.raw { (best.raw, best.peaks.raw) = (r, RssAnonSampler.shared.peak(back: 1)) }
    }
    return best
}

/// A read row's two sides timed in turns (``inTurns(_:syncing:api:raw:)``), `runs` times. Until 7
/// December 2026 each side ran its 5 runs in a block, the API's first: a slow stretch of the
/// machine then fell on one side only, and one side's time moved by half from one row to the next
/// of a run (the raw visit, the same loop in two rows: 0.049 s and 0.083 s).
@MainActor func recordReads(_ backend: String, _ operation: String, _ n: Int, operations: Int, runs: Int = 5,
                            api: () throws -> Void, raw: () throws -> Void) rethrows {
    let timed = try inTurns(runs, syncing: false, api: { _ in try api() }, raw: { _ in try raw() })
    record(backend, operation, n, operations: operations, api: timed.api, raw: timed.raw, peaks: timed.peaks)
}

/// ``record(_:_:_:operations:api:raw:memory:peaks:)`` of a row timed ``inTurns(_:syncing:api:raw:)``.
@MainActor func recordInTurns(_ backend: String, _ operation: String, _ n: Int, operations: Int,
                              api: (Int) throws -> Void, raw: (Int) throws -> Void) rethrows {
    let timed = try inTurns(api: api, raw: raw)
    record(backend, operation, n, operations: operations, api: timed.api, raw: timed.raw, peaks: timed.peaks)
}

func check(_ a: Int, _ b: Int, _ what: String) {
    precondition(a == b, "\(what): API returned \(a), raw C \(b)")
}

@MainActor func benchmarkBackend(_ name: String, n: Int, open: (String) throws -> any DataStore,
                      raw: (String) -> (insert: (Int, Int, Int) -> Void, gets: ([Int]) -> Int, scan: () -> Int,
                                        visit: () -> Int, visitInPlace: () -> Int64, indexed: () -> Int,
                                        unindexed: () -> Int, sameLayout: (String, Int64) -> Bool,
                                        smallWithFeed: ((Int, Int) -> Void)?),
                      storePath: (String) -> String) throws {
    let workload = Workload(count: n)
    let directory = scratch(name)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    // The inserts into an empty store: each round into stores of its own, opened before the
    // turns; the last round's are the ones the next rows read.
    let last = writeRounds - 1
    let stores = try (0..<writeRounds).map { try open(directory + ($0 == last ? "/bulk" : "/bulk-\($0)")) }
    let raws = (0..<writeRounds).map { raw(directory + ($0 == last ? "/raw-bulk" : "/raw-bulk-\($0)")) }
    try recordInTurns(name, "bulk insert, one writeSync", n, operations: n,
                  api: { try APIBench(store: stores[$0], workload: workload).insertAll(from: 0, count: n, batch: n) },
                  raw: { raws[$0].insert(0, n, n) })
    for other in stores.dropLast() { try other.close() }
    // The same inserts from models the macro declares (BenchItem), each built in the loop as
    // the raw side builds its values.
    let typedStores = try (0..<writeRounds).map { try open(directory + "/typed-\($0)") }
    let typedRaws = (0..<writeRounds).map { raw(directory + "/raw-typed-\($0)") }
    try recordInTurns(name, "bulk insert of @StoredModel structs, one writeSync", n, operations: n,
                  api: { round in try typedStores[round].writeSync { w in for i in 0..<n { try w.insert(BenchItem(workload, i)) } } },
                  raw: { typedRaws[$0].insert(0, n, n) })
    for other in typedStores { try other.close() }
    let store = stores[last]
    let api = APIBench(store: store, workload: workload)
    let rawBulk = raws[last]
    let batched = try (0..<writeRounds).map { try open(directory + "/batched-\($0)") }
    let rawBatched = (0..<writeRounds).map { raw(directory + "/raw-batched-\($0)") }
    try recordInTurns(name, "batched inserts (1,000 per writeSync)", n, operations: n,
                  api: { try APIBench(store: batched[$0], workload: workload).insertAll(from: 0, count: n, batch: 1_000) },
                  raw: { rawBatched[$0].insert(0, n, 1_000) })
    for other in batched { try other.close() }
    let keys = workload.lookups
    var (a, b) = (0, 0)
    try recordReads(name, "point get by key", n, operations: keys.count,
                    api: { a = try api.pointGets(keys) }, raw: { b = rawBulk.gets(keys) })
    check(a, b, "point gets")
    try recordReads(name, "full ordered scan", n, operations: n, api: { a = try api.scan() }, raw: { b = rawBulk.scan() })
    check(a, b, "scan")
    try recordReads(name, "full ordered fetch of @StoredModel structs", n, operations: n,
                    api: { a = try store.read { try $0.fetch(BenchItem.self, sortedBy: []).count } },
                    raw: { b = rawBulk.scan() })
    check(a, b, "typed fetch")
    try recordReads(name, "full ordered visit (forEach, none kept)", n, operations: n, api: { a = try api.visit() },
                    raw: { b = rawBulk.visit() })
    check(a, b, "visit")
    try recordReads(name, "full ordered visit (Row, each decoded, none kept)", n, operations: n,
                    api: { a = try api.visitRows() }, raw: { b = rawBulk.visit() })
    check(a, b, "visit of rows")
    // The same visit of models the macro declares (BenchItem), each handed to a closure and none
    // kept: on LMDB read from each record's fields in place, as the typed fetch reads them.
    try recordReads(name, "full ordered visit of @StoredModel structs (forEach, none kept)", n, operations: n,
                    api: {
                        a = try store.read { r in
                            var visited = 0
                            try r.forEach(BenchItem.self, sortedBy: []) { item in
                                consume(item)
                                visited += 1
                            }
                            return visited
                        }
                    }, raw: { b = rawBulk.visit() })
    check(a, b, "typed visit")
    var (sumAPI, sumRaw): (Int64, Int64) = (0, 0)
    try recordReads(name, "full ordered visit (Row, fields read in place)", n, operations: n,
                    api: { sumAPI = try api.visitInPlace() }, raw: { sumRaw = rawBulk.visitInPlace() })
    precondition(sumAPI == sumRaw, "visit in place: API summed \(sumAPI), raw C \(sumRaw)")
    try recordReads(name, "query on indexed attribute (100 x ==)", n, operations: Workload.queriedScores,
                    api: { a = try api.indexedQueries() }, raw: { b = rawBulk.indexed() })
    check(a, b, "indexed query")
    try recordReads(name, "query on non-indexed attribute", n, operations: 1,
                    api: { a = try api.unindexedQuery() }, raw: { b = rawBulk.unindexed() })
    check(a, b, "unindexed query")
    // The small writes: each round of each row the next 10,000 keys, on both sides.
    let small = Workload.smallTransactions
    /// The small `writeSync` row and the `writeAsync` row (the `pair`th pair of rows, named with
    /// `suffix`), each against `raw` (its first key, the commits) doing the same 10,000 commits.
    func smallRows(_ pair: Int, _ suffix: String, raw: @escaping (Int, Int) -> Void) throws {
        /// The first key of `round` of the `row`th small-write row.
        func firstKey(_ row: Int, _ round: Int) -> Int { n + (row * writeRounds + round) * small }
        try recordInTurns(name, "10,000 small writeSync" + suffix, n, operations: small,
                          api: { try api.smallTransactions(from: firstKey(2 * pair, $0)) },
                          raw: { raw(firstKey(2 * pair, $0), small) })
        try recordInTurns(name, "10,000 writeAsync" + suffix, n, operations: small,
                          api: { try api.asyncWrites(from: firstKey(2 * pair + 1, $0)) },
                          raw: { raw(firstKey(2 * pair + 1, $0), small) })
    }
    try smallRows(0, "", raw: { rawBulk.insert($0, $1, 1) })
    if let smallWithFeed = rawBulk.smallWithFeed {
        // The store's small writes again, against a C loop that also writes the entry the store's
        // change feed writes for each (SQLite: its table; LMDB: its key in `_ds_meta`; its
        // bytes). Not quite the same work: by these rows the store's feed holds more than its
        // retention (10,000 transactions), and the store also deletes its oldest entries (256
        // every 256 commits), which the C loop does not.
        try smallRows(1, ", raw C writing the feed's entry too", raw: smallWithFeed)
    }
    // And with the store's change feed off, against the C loop without the entry: the same work
    // on both sides again. (Last: the feed stays off in this store.)
    try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: false)) }
    try smallRows(2, ", change feed off", raw: { rawBulk.insert($0, $1, 1) })
    try store.close()
    // Two items the store wrote (the first, whose numbers are zeros, and the last), read by the
    // raw side next to its own: the two sides store (and so read and check) the same bytes, on
    // LMDB the index entries too. An encrypted store's are sealed, the raw side's not: the check
    // is made on the runs without --encryption.
    if !name.hasSuffix("encrypted") {
        for id in [0, n - 1] {
            precondition(rawBulk.sameLayout(storePath(directory + "/bulk"), Int64(id)),
                         "\(name): the raw side does not store item \(id) as the store does: its layout is not the store's")
        }
    }
}

func rawSQLite(_ path: String, _ workload: Workload) -> RawSQLiteBench { RawSQLiteBench(path: path + ".sqlite", workload: workload) }

func rawLMDB(_ path: String, _ workload: Workload) -> RawLMDBBench {
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return RawLMDBBench(path: path, workload: workload)
}

/// With `key`, every store encrypted with it (the raw side is the same).
@MainActor func benchmarkMigration(n: Int, key: StoreKey? = nil) throws {
    let workload = Workload(count: n)
    let directory = scratch("migration")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let sqlite = StoreLocation(kind: .sqlite, path: directory + "/source.sqlite").with(key: key)
    let migration = "migration" + (key == nil ? "" : ", encrypted")
    let source = try sqlite.open(schema: Workload.schema, durability: .normal)
    try APIBench(store: source, workload: workload).insertAll(from: 0, count: n, batch: 10_000)
    try source.close()
    let rawSource = RawSQLiteBench(path: directory + "/raw-source.sqlite", workload: workload)
    rawSource.insertAll(from: 0, count: n, batch: 10_000)

    // The raw copy checks nothing, so neither does the API copy here: no source integrity check
    // (`copy` runs one by default; its cost is in the summary). An LMDB source still has its
    // pages walked before liblmdb reads them, which is part of every migration's cost. Each copy
    // row takes its rounds in turns (``inTurns(_:syncing:api:raw:)``), each round into stores of
    // its own; the last round's LMDB copies are what the next rows read.
    let options = MigrationOptions(batchSize: 1_000, verify: false, checkSource: false)
    let last = writeRounds - 1
    let copies = (0..<writeRounds).map { StoreLocation(kind: .lmdb, path: directory + "/copy-\($0).lmdb").with(key: key) }
    let rawCopies = (0..<writeRounds).map { rawLMDB(directory + "/raw-copy-\($0).lmdb", workload) }
    try recordInTurns(migration, "SQLite -> LMDB (Migrator.copy, no verify)", n, operations: n,
                      api: { _ = try Migrator.copy(from: sqlite, to: copies[$0], options: options) },
                      raw: { round in rawSource.forEachRow(batch: 1_000) { rawCopies[round].write($0) } })
    let (lmdb, rawLMDBCopy) = (copies[last], rawCopies[last])
    let backs = (0..<writeRounds).map { StoreLocation(kind: .sqlite, path: directory + "/back-\($0).sqlite").with(key: key) }
    let rawBacks = (0..<writeRounds).map { RawSQLiteBench(path: directory + "/raw-back-\($0).sqlite", workload: workload) }
    try recordInTurns(migration, "LMDB -> SQLite (Migrator.copy, no verify)", n, operations: n,
                      api: { _ = try Migrator.copy(from: lmdb, to: backs[$0], options: options) },
                      raw: { round in rawLMDBCopy.forEachRow(batch: 1_000) { rawBacks[round].write($0) } })
    // The raw compare both verify rows stand beside: every row of both sides, as plain structs.
    let rawCompare = {
        var left: [RawRow] = []
        var right: [RawRow] = []
        rawSource.forEachRow(batch: 1_000) { left += $0 }
        rawLMDBCopy.forEachRow(batch: 1_000) { right += $0 }
        precondition(left == right)
    }
    try recordReads(migration, "verify SQLite vs LMDB item by item (Migrator.verify)", n, operations: n, runs: 3,
                    api: { _ = try Migrator.verify(from: sqlite, to: lmdb, options: MigrationOptions(checkSource: false)) },
                    raw: rawCompare)
    try recordReads(migration, "verify SQLite vs LMDB by range checksum (verify --checksum)", n, operations: n, runs: 3,
                    api: {
                        let report = try Migrator.verify(from: sqlite, to: lmdb,
                                                         options: MigrationOptions(checkSource: false, checksum: true))
                        precondition(report.differences == 0)
                    },
                    raw: rawCompare)
}

/// The keys each row runs with: none, and with --encryption a raw key too (the same rows on
/// encrypted stores, next to the plain ones).
let benchmarkKeys: [StoreKey?] = options.encryption ? [nil, benchmarkKey] : [nil]
let onlySchemaSteps = options.schemaSteps
let onlyFeed = options.feed
let onlyJSONL = options.jsonl
let onlyPostgres = options.postgres
let onlyScaling = options.scaling
/// Only the SQLite and LMDB rows of the main table (and GRDB unless `--no-grdb`): for iterating.
let onlyBackends = options.backends
/// Only the migration rows (copies both ways and both verifies): for iterating.
let onlyMigration = options.migration
/// Only the relationship rows: 10,000 users with 10 notes each (1,000 with --quick).
let onlyRelationships = options.relationships
if onlyRelationships {
    for key in benchmarkKeys { try benchmarkRelationships(users: quick ? 1_000 : 10_000, notesPerUser: 10, key: key) }
}
/// Only Sync's JSON rows.
let onlySyncJSON = options.syncJSON
if onlySyncJSON {
    for key in benchmarkKeys { try benchmarkSyncJSON(users: quick ? 1_000 : 100_000, notesPerUser: 10, key: key) }
}
/// Only the async rows.
let onlyAsync = options.async
if onlyAsync { for n in sizes { for key in benchmarkKeys { try benchmarkAsync(n: n, key: key) } } }
if options.foreign {
    for n in sizes { for key in benchmarkKeys { try benchmarkForeignSources(n: n, key: key) } }
}
if options.realm {
    for n in sizes { try benchmarkRealm(n: n) }
}
// The small-write and thread-scaling table runs at its own sizes: a store 100 times larger
// must not make a small write slower.
let scalingSizes = options.sizes != nil ? sizes : [2_000, 200_000]
for n in scalingSizes where onlyScaling || !(onlySchemaSteps || onlyFeed || onlyJSONL || onlyPostgres || onlyBackends
                                             || onlyMigration || onlyRelationships || onlySyncJSON || onlyAsync || options.foreign || options.realm) {
    for key in benchmarkKeys { try benchmarkScaling(n: n, key: key) }
}
for n in sizes where onlyPostgres {
    try benchmarkPostgres(n: n)
    for key in benchmarkKeys where key != nil { try benchmarkPostgres(n: n, key: key) }
    for key in benchmarkKeys { try benchmarkPostgresMigration(n: n, key: key) }
}
for n in sizes where onlyJSONL {
    for key in benchmarkKeys { try benchmarkJSONLines(n: n, key: key) }
}
for n in sizes where onlySchemaSteps {
    for key in benchmarkKeys { try benchmarkSchemaSteps(n: n, key: key) }
}
for n in sizes where onlyFeed && !onlyJSONL {
    for key in benchmarkKeys {
        try benchmarkFeed(n: n, key: key)
        try benchmarkMemoryFeed(n: n, key: key)
    }
}
for n in sizes where onlyMigration {
    for key in benchmarkKeys { try benchmarkMigration(n: n, key: key) }
}
if !(onlySchemaSteps || onlyFeed || onlyJSONL || onlyPostgres || onlyScaling || onlyMigration || onlyBackends
      || onlyRelationships || onlySyncJSON || onlyAsync || options.foreign || options.realm) {
    for key in benchmarkKeys {
        try benchmarkRelationships(users: quick ? 1_000 : 10_000, notesPerUser: 10, key: key)
        try benchmarkSyncJSON(users: quick ? 1_000 : 100_000, notesPerUser: 10, key: key)
    }
}
for n in sizes where !onlySchemaSteps && !onlyFeed && !onlyJSONL && !onlyPostgres && !onlyScaling && !onlyMigration
    && !onlyRelationships && !onlySyncJSON && !onlyAsync && !options.foreign && !options.realm {
    // The SQLite and LMDB rows; with --encryption, the same again on encrypted stores.
    for key in benchmarkKeys {
        let suffix = key == nil ? "" : ", encrypted"
        try benchmarkBackend("SQLite" + suffix, n: n,
                             open: { try SQLiteStore(path: $0 + ".sqlite", schema: Workload.schema,
                                                     options: SQLiteOptions(durability: .normal, key: key)) },
                             raw: { path in
                                 let b = rawSQLite(path, Workload(count: n))
                                 return ({ b.insertAll(from: $0, count: $1, batch: $2) }, b.pointGets, b.scan,
                                         b.visit, b.visitInPlace, b.indexedQueries, b.unindexedQuery,
                                         { b.sameLayout(asStoreAt: $0, id: $1) },
                                         { b.insertAllWithFeed(from: $0, count: $1) })
                             }, storePath: { $0 + ".sqlite" })
        try benchmarkBackend("LMDB" + suffix, n: n,
                             open: { try LMDBStore(path: $0 + ".lmdb", schema: Workload.schema,
                                                   options: LMDBOptions(durability: .normal, initialMapSize: 8 << 30, key: key)) },
                             raw: { path in
                                 let b = rawLMDB(path + ".lmdb", Workload(count: n))
                                 return ({ b.insertAll(from: $0, count: $1, batch: $2) }, b.pointGets, b.scan,
                                         b.visit, b.visitInPlace, b.indexedQueries, b.unindexedQuery,
                                         { b.sameLayout(asStoreAt: $0, id: $1) },
                                         { b.insertAllWithFeed(from: $0, count: $1) })
                             }, storePath: { $0 + ".lmdb" })
    }
    if onlyBackends { continue }
    for key in benchmarkKeys {
        try benchmarkMigration(n: n, key: key)
        try benchmarkSchemaSteps(n: n, key: key)
        try benchmarkFeed(n: n, key: key)
        try benchmarkAsync(n: n, key: key)
    }
    for key in benchmarkKeys {
        try benchmarkMemoryFeed(n: n, key: key)
        try benchmarkJSONLines(n: n, key: key)
    }
    if !options.noPostgres {
        for key in benchmarkKeys {
            try benchmarkPostgres(n: n, key: key)
            try benchmarkPostgresMigration(n: n, key: key)
        }
    }
}

print("| backend | operation | items in store | API ops/s | raw ops/s | API / raw | peak RssAnon API / raw (MiB) |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
for row in rows {
    let api = Double(row.operations) / row.apiSeconds
    let raw = Double(row.operations) / row.rawSeconds
    let memory = row.apiPeak < 0 ? "–" : String(format: "%.0f / %.0f", Double(row.apiPeak) / 1024, Double(row.rawPeak) / 1024)
    print(String(format: "| %@ | %@ | %d | %.0f | %.0f | %.2f | %@ |", row.backend, row.operation, row.n, api, raw,
                 api / raw, memory))
}

printScalingTable()

if !realmResumeLines.isEmpty {
    print("")
    print("| Realm items (encrypted) | Item committed when killed | killed after | --resume took | verified | differences |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for line in realmResumeLines { print(line) }
}

if !memoryFeedRows.isEmpty {
    print("")
    print("| in-memory | items | feed off ops/s | feed on ops/s | feed on / feed off |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for (operation, n, off, on) in memoryFeedRows {
        print(String(format: "| %@ | %d | %.0f | %.0f | %.2f |", operation, n, off, on, on / off))
    }
}

if !latencyRows.isEmpty {
    print("")
    print("| backend | live query delivery after writeSync returns: median | p99 | worst |")
    print("| --- | ---: | ---: | ---: |")
    for (backend, median, p99, worst) in latencyRows {
        print(String(format: "| %@ | %.0f µs | %.0f µs | %.0f µs |", backend, median * 1e6, p99 * 1e6, worst * 1e6))
    }
}

let grdbCount = options.noGrdb || options.foreign || options.realm || onlySchemaSteps || onlyFeed || onlyJSONL || onlyPostgres || onlyScaling
    || onlyRelationships ? 0 : (quick ? 20_000 : 100_000)
if grdbCount > 0 {
    printTypedTable(try grdbComparison(count: grdbCount, key: benchmarkKeys.last ?? nil), count: grdbCount)
}

let fluentCount = options.noFluent || options.noPostgres || onlySchemaSteps || onlyFeed || onlyJSONL || onlyScaling
    || onlyRelationships || onlyMigration || onlyBackends || onlySyncJSON || onlyAsync || options.foreign || options.realm || onlyPostgres ? 0
    : (quick ? 20_000 : 100_000)
if fluentCount > 0 {
    printFluentTable(try fluentComparison(count: fluentCount, key: options.encryption ? benchmarkKey : nil), count: fluentCount)
}
