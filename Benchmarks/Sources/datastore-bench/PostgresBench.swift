import BenchSupport
import DataStoreAPI
import Foundation
import PostgresStore
import StoreMigration
import Synchronization

/// The PostgreSQL server the benchmarks use: `PGHOST` (a socket directory) when set, else a
/// throwaway server that `Scripts/postgres-server.sh` starts now and stops at exit.
@MainActor let postgresHost: String = {
    if let host = ProcessInfo.processInfo.environment["PGHOST"], host.hasPrefix("/") { return host }
    let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Scripts/postgres-server.sh").path
    let dir = scratch("postgres")
    try? FileManager.default.removeItem(atPath: dir)
    guard system("/bin/bash '\(script)' start '\(dir)' >/dev/null") == 0 else {
        let message = "datastore-bench: the PostgreSQL server did not start (\(script) start \(dir)); "
            + "install postgresql-15 or set PGHOST to a server's socket directory\n"
        FileHandle.standardError.write(Data(message.utf8))
        exit(1)
    }
    postgresStop = "/bin/bash '\(script)' stop '\(dir)'"
    atexit { if let stop = postgresStop { _ = system(stop) } }
    return dir
}()

nonisolated(unsafe) var postgresStop: String?

@MainActor func postgresURL(_ schema: String) -> String {
    "postgres://postgres@/datastore?schema=\(schema)&host=\(postgresHost)"
}

/// One answer of `sql` on the benchmarks' server, by psql (outside any timed block).
@MainActor func psqlAnswer(_ sql: String) -> String {
    let pipe = Pipe()
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
    process.arguments = ["-h", postgresHost, "-U", "postgres", "-d", "datastore", "-Atc", sql]
    process.standardOutput = pipe
    try? process.run()
    process.waitUntilExit()
    return String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        .trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Brings the server to rest before each timed side of a row: the tables vacuumed and analyzed,
/// the WAL checkpointed, and no autovacuum worker running (waited for, at most a minute). The
/// loads of the rows before leave a checkpoint and autovacuum due at moments of their own; one
/// that falls into one side's time and not the other's moved a row by a factor of two or more
/// (the same raw loop at 2,026/s in one row and 4,217/s in the next, one run).
@MainActor func quietPostgres() {
    _ = psqlAnswer("VACUUM (ANALYZE)")
    _ = psqlAnswer("CHECKPOINT")
    let deadline = ContinuousClock.now + .seconds(60)
    while psqlAnswer("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'") != "0",
          ContinuousClock.now < deadline {
        usleep(50_000)
    }
}


/// The two sides of a row timed in turns on a server at rest: the API's part 0, the raw side's
/// part 0, the API's part 1, and so on, `parts` of each, summed per side. A drift of the
/// machine's speed (on this machine the same raw loop ran at 2,026/s in one row and 4,217/s in
/// the next, one run) then falls on both sides alike.
struct InTurns {
    var api = 0.0, raw = 0.0
    var peaks = (api: 0, raw: 0)
}

/// With `best`, each side's fastest part rather than their sum (reads, which run the same
/// work in every part, as the other backends' reads are the fastest of several).
@MainActor func inTurns(_ parts: Int, best: Bool = false, api: (Int) throws -> Void, raw: (Int) throws -> Void) rethrows
    -> InTurns {
    quietPostgres()
    var turns = InTurns()
    if best { (turns.api, turns.raw) = (.infinity, .infinity) }
    func add(_ total: inout Double, _ seconds: Double) { total = best ? min(total, seconds) : total + seconds }
    // BENCH_TURNS=1 prints each part's two times (on standard error).
    let show = ProcessInfo.processInfo.environment["BENCH_TURNS"] == "1"
    for part in 0..<parts {
        let apiSeconds = try time { try api(part) }
        add(&turns.api, apiSeconds)
        turns.peaks.api = max(turns.peaks.api, RssAnonSampler.shared.peak(back: 1))
        let rawSeconds = try time { try raw(part) }
        add(&turns.raw, rawSeconds)
        turns.peaks.raw = max(turns.peaks.raw, RssAnonSampler.shared.peak(back: 1))
        if show {
            FileHandle.standardError.write(Data(String(format: "  part %d: api %.3f s, raw %.3f s\n", part, apiSeconds,
                                                       rawSeconds).utf8))
        }
    }
    return turns
}

/// A read row: five turns of each side on a server at rest, each side's fastest, and the two
/// sides' answers compared.
@MainActor func readInTurns(_ backend: String, _ operation: String, _ n: Int, operations: Int, _ what: String,
                            api: () throws -> Int, raw: () throws -> Int) rethrows {
    var (a, b) = (0, 0)
    let turns = try inTurns(5, best: true, api: { _ in a = try api() }, raw: { _ in b = try raw() })
    record(backend, operation, n, operations: operations, api: turns.api, raw: turns.raw, peaks: turns.peaks)
    check(a, b, what)
}

/// PostgresStore next to libpq called from C doing the same work: bulk loads by COPY, point gets,
/// scans and queries in one snapshot, small transactions (three round trips, and pipelined);
/// asynchronous commit on both sides (`Durability.normal` is `synchronous_commit = off`), as
/// SQLite runs with synchronous=NORMAL.
/// With `key`, the same rows on an encrypted store (the client seals the values that no index
/// covers; the raw libpq loops read plain tables).
@MainActor func benchmarkPostgres(n: Int, key: StoreKey? = nil) throws {
    let workload = Workload(count: n)
    let name = key == nil ? "PostgreSQL" : "PostgreSQL, encrypted"
    func open(_ schema: String) throws -> PostgresStore {
        try? PostgresStore.destroy(PostgresLocation(parsing: postgresURL(schema)))
        return try PostgresStore(url: postgresURL(schema), schema: Workload.schema, durability: .normal, key: key)
    }
    func raw(_ schema: String) throws -> RawPostgresBench {
        let bench = try RawPostgresBench(host: postgresHost, schema: schema, workload: workload)
        try bench.query("SET synchronous_commit TO off")
        return bench
    }
    // The bulk insert three times each side, in turns, each into an empty table of its own.
    let bulkStores = try (0..<3).map { try open("bench_api_bulk\($0)") }
    let rawBulks = try (0..<3).map { try raw("bench_raw_bulk\($0)") }
    let bulkTurns = try inTurns(3, api: { part in
        try bulkStores[part].writeSync { w in try w.insert(contentsOf: (0..<n).map(workload.record), into: "Item") }
    }, raw: { part in try rawBulks[part].copyAll(from: 0, count: n, batch: n) })
    for bulk in bulkStores {
        try bulk.close()
        try PostgresStore.destroy(bulk.location)
    }
    for bulk in rawBulks { bulk.close() }
    record(name, "bulk insert, one writeSync (insert(contentsOf:), COPY)", n, operations: 3 * n,
           api: bulkTurns.api, raw: bulkTurns.raw, peaks: bulkTurns.peaks)
    // The store and table the rows below read and write, loaded the same way (untimed).
    let store = try open("bench_api")
    let rawBulk = try raw("bench_raw")
    try store.writeSync { w in try w.insert(contentsOf: (0..<n).map(workload.record), into: "Item") }
    try rawBulk.copyAll(from: 0, count: n, batch: n)
    let batched = try open("bench_api_batched")
    let rawBatched = try raw("bench_raw_batched")
    // Ten parts of 10,000 items each side, in turns.
    let batchedTurns = try inTurns(10, api: { part in
        let end = (part + 1) * n / 10
        for start in stride(from: part * n / 10, to: end, by: 1_000) {
            try batched.writeSync { w in
                try w.insert(contentsOf: (start..<min(end, start + 1_000)).map(workload.record), into: "Item")
            }
        }
    }, raw: { part in
        try rawBatched.copyAll(from: part * n / 10, count: (part + 1) * n / 10 - part * n / 10, batch: 1_000)
    })
    record(name, "batched inserts (1,000 per writeSync, COPY)", n, operations: n,
           api: batchedTurns.api, raw: batchedTurns.raw, peaks: batchedTurns.peaks)
    try batched.close()
    try PostgresStore.destroy(batched.location)
    rawBatched.close()
    let api = APIBench(store: store, workload: workload)
    let keys = Array(workload.lookups.prefix(20_000))
    try readInTurns(name, "point get by key", n, operations: keys.count, "point gets",
                api: { try api.pointGets(keys) }, raw: { try rawBulk.pointGets(keys) })
    try readInTurns(name, "full ordered scan", n, operations: n, "scan", api: { try api.scan() }, raw: { try rawBulk.scan() })
    try readInTurns(name, "query on indexed attribute (100 x ==)", n, operations: Workload.queriedScores, "indexed query",
                api: { try api.indexedQueries() }, raw: { try rawBulk.indexedQueries() })
    try readInTurns(name, "query on non-indexed attribute", n, operations: 1, "unindexed query",
                api: { try api.unindexedQuery() }, raw: { try rawBulk.unindexedQuery() })
    // The small transactions in fifty parts of 200 each side, in turns: a thousand of the raw
    // loop's took from 0.16 s to 1.3 s in one row of one run.
    let small = Workload.smallTransactions, part = small / 50
    let syncTurns = try inTurns(50, api: { try api.smallTransactions(from: n + $0 * part, count: part) },
                                raw: { try rawBulk.smallTransactions(from: n + $0 * part, count: part) })
    record(name, "10,000 small writeSync", n, operations: small, api: syncTurns.api, raw: syncTurns.raw,
           peaks: syncTurns.peaks)
    let pipelinedTurns = try inTurns(50, api: { try api.smallTransactions(from: n + small + $0 * part, count: part) },
                                     raw: { try rawBulk.smallTransactions(from: n + small + $0 * part, count: part,
                                                                          pipelined: true) })
    record(name, "10,000 small writeSync vs a pipelined loop", n, operations: small, api: pipelinedTurns.api,
           raw: pipelinedTurns.raw, peaks: pipelinedTurns.peaks)
    let asyncTurns = try inTurns(50, api: { try api.asyncWrites(from: n + 2 * small + $0 * part, count: part) },
                                 raw: { try rawBulk.smallTransactions(from: n + 2 * small + $0 * part, count: part) })
    record(name, "10,000 writeAsync", n, operations: small, api: asyncTurns.api, raw: asyncTurns.raw,
           peaks: asyncTurns.peaks)
    try store.close()
    try PostgresStore.destroy(store.location)
    rawBulk.close()
}

/// The migration SQLite -> PostgreSQL (`Migrator.copy`, as `migrate-store copy` runs it, with
/// its checkpoints, without the integrity check and verify) next to the classic hand-made move:
/// `sqlite3 -csv … | psql -c '\copy … FROM STDIN'` into the same table and index, one COPY.
/// With `key`, the PostgreSQL store encrypted (the source and `psql \\copy` as they are).
@MainActor func benchmarkPostgresMigration(n: Int, key: StoreKey? = nil) throws {
    let suffix = key == nil ? "" : ", encrypted"
    let workload = Workload(count: n)
    let directory = scratch("pg-migration")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let sqlite = StoreLocation(kind: .sqlite, path: directory + "/source.sqlite")
    let source = try sqlite.open(schema: Workload.schema, durability: .normal)
    try APIBench(store: source, workload: workload).insertAll(from: 0, count: n, batch: 10_000)
    try source.close()
    // (The key stands in for the row's checksum, which the store computes: the same bytes to the server.)
    let select = "SELECT id, name, score, printf('%.17g', ratio), '\\x' || lower(hex(payload)), id FROM \"Item\" ORDER BY id"
    /// `sqlite3 … | psql \copy` into `schema`'s table.
    func psqlCopy(into schema: String) -> () -> Void {
        let pipeline = "sqlite3 -csv '\(sqlite.path)' \"\(select.replacingOccurrences(of: "\"", with: "\\\""))\" | "
            + "psql -q -h '\(postgresHost)' -U postgres -d datastore -v ON_ERROR_STOP=1 "
            + "-c '\\copy \(schema).\"Item\" (id, name, score, ratio, payload, _ds_sum) FROM STDIN WITH (FORMAT csv)'"
        let command = "/bin/bash -o pipefail -c '\(pipeline.replacingOccurrences(of: "'", with: "'\\''"))'"
        return { precondition(system(command) == 0, "\(command) failed") }
    }
    // Each row copies three times each side, in turns, each into an empty schema of its own.
    for (operation, batchSize) in [("SQLite -> PostgreSQL (Migrator.copy at its default batch, no verify) vs sqlite3 piped to psql \\copy", nil),
                                   ("SQLite -> PostgreSQL, --batch-size 1000, vs sqlite3 piped to psql \\copy", 1_000) as (String, PositiveInt?)] {
        let urls = (0..<3).map { postgresURL("bench_migration\($0)") }
        for url in urls { try? PostgresStore.destroy(PostgresLocation(parsing: url)) }
        let rawTables = try (0..<3).map { try RawPostgresBench(host: postgresHost, schema: "bench_psql\($0)", workload: workload) }
        let copies = (0..<3).map { psqlCopy(into: "bench_psql\($0)") }
        let turns = try inTurns(3, api: { part in
            let destination = try StoreLocation(parsing: urls[part]).with(key: key)
            _ = try Migrator.copy(from: sqlite, to: destination,
                                  options: MigrationOptions(batchSize: batchSize, verify: false, checkSource: false))
        }, raw: { part in copies[part]() })
        for (url, rawTable) in zip(urls, rawTables) {
            check(try rawTable.count(), n, "rows psql copied")
            let store = try StoreLocation(parsing: url).with(key: key).open(schema: nil)
            check(try store.read { try $0.count(FetchRequest("Item")) }, n, "items Migrator copied")
            try store.close()
            try PostgresStore.destroy(PostgresLocation(parsing: url))
            rawTable.close()
        }
        record("migration" + suffix, operation, n, operations: 3 * n, api: turns.api, raw: turns.raw, peaks: turns.peaks)
    }
}
