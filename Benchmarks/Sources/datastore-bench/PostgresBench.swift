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
    let store = try open("bench_api")
    let rawBulk = try raw("bench_raw")
    record(name, "bulk insert, one writeSync (insert(contentsOf:), COPY)", n, operations: n,
           api: try time { try store.writeSync { w in try w.insert(contentsOf: (0..<n).map(workload.record), into: "Item") } },
           raw: try time { try rawBulk.copyAll(from: 0, count: n, batch: n) })
    let batched = try open("bench_api_batched")
    let rawBatched = try raw("bench_raw_batched")
    record(name, "batched inserts (1,000 per writeSync, COPY)", n, operations: n,
           api: try time {
               for start in stride(from: 0, to: n, by: 1_000) {
                   try batched.writeSync { w in
                       try w.insert(contentsOf: (start..<min(n, start + 1_000)).map(workload.record), into: "Item")
                   }
               }
           },
           raw: try time { try rawBatched.copyAll(from: 0, count: n, batch: 1_000) })
    try batched.close()
    try PostgresStore.destroy(batched.location)
    rawBatched.close()
    let api = APIBench(store: store, workload: workload)
    let keys = Array(workload.lookups.prefix(20_000))
    var (a, b) = (0, 0)
    record(name, "point get by key", n, operations: keys.count,
           api: try time { a = try api.pointGets(keys) }, raw: try time { b = try rawBulk.pointGets(keys) })
    check(a, b, "point gets")
    record(name, "full ordered scan", n, operations: n,
           api: try time { a = try api.scan() }, raw: try time { b = try rawBulk.scan() })
    check(a, b, "scan")
    record(name, "query on indexed attribute (100 x ==)", n, operations: Workload.queriedScores,
           api: try time { a = try api.indexedQueries() }, raw: try time { b = try rawBulk.indexedQueries() })
    check(a, b, "indexed query")
    record(name, "query on non-indexed attribute", n, operations: 1,
           api: try time { a = try api.unindexedQuery() }, raw: try time { b = try rawBulk.unindexedQuery() })
    check(a, b, "unindexed query")
    record(name, "10,000 small writeSync", n, operations: Workload.smallTransactions,
           api: try time { try api.smallTransactions(from: n) },
           raw: try time { try rawBulk.smallTransactions(from: n) })
    record(name, "10,000 small writeSync vs a pipelined loop", n, operations: Workload.smallTransactions,
           api: try time { try api.smallTransactions(from: n + Workload.smallTransactions) },
           raw: try time { try rawBulk.smallTransactions(from: n + Workload.smallTransactions, pipelined: true) })
    record(name, "10,000 writeAsync", n, operations: Workload.smallTransactions,
           api: try time { try api.asyncWrites(from: n + 2 * Workload.smallTransactions) },
           raw: try time { try rawBulk.smallTransactions(from: n + 2 * Workload.smallTransactions) })
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
    let url = postgresURL("bench_migration")
    try? PostgresStore.destroy(PostgresLocation(parsing: url))
    let destination = try StoreLocation(parsing: url).with(key: key)
    let rawTable = try RawPostgresBench(host: postgresHost, schema: "bench_psql", workload: workload)
    // (The key stands in for the row's checksum, which the store computes: the same bytes to the server.)
    let select = "SELECT id, name, score, printf('%.17g', ratio), '\\x' || lower(hex(payload)), id FROM \"Item\" ORDER BY id"
    let pipeline = "sqlite3 -csv '\(sqlite.path)' \"\(select.replacingOccurrences(of: "\"", with: "\\\""))\" | "
        + "psql -q -h '\(postgresHost)' -U postgres -d datastore -v ON_ERROR_STOP=1 "
        + "-c '\\copy bench_psql.\"Item\" (id, name, score, ratio, payload, _ds_sum) FROM STDIN WITH (FORMAT csv)'"
    let command = "/bin/bash -o pipefail -c '\(pipeline.replacingOccurrences(of: "'", with: "'\\''"))'"
    let psqlCopy = { precondition(system(command) == 0, "\(command) failed") }
    record("migration" + suffix, "SQLite -> PostgreSQL (Migrator.copy at its default batch, no verify) vs sqlite3 piped to psql \\copy", n, operations: n,
           api: try time {
               _ = try Migrator.copy(from: sqlite, to: destination,
                                     options: MigrationOptions(verify: false, checkSource: false))
           },
           raw: time(psqlCopy))
    check(try rawTable.count(), n, "rows psql copied")
    let store = try destination.open(schema: nil)
    check(try store.read { try $0.count(FetchRequest("Item")) }, n, "items Migrator copied")
    try store.close()
    try PostgresStore.destroy(PostgresLocation(parsing: url))
    // The same with batches (and checkpoints) of 1,000 items, every other kind's default: `--batch-size 1000`.
    try rawTable.query("TRUNCATE bench_psql.\"Item\"")
    record("migration" + suffix, "SQLite -> PostgreSQL, --batch-size 1000, vs sqlite3 piped to psql \\copy", n, operations: n,
           api: try time {
               _ = try Migrator.copy(from: sqlite, to: destination,
                                     options: MigrationOptions(batchSize: 1_000, verify: false, checkSource: false))
           },
           raw: time(psqlCopy))
    try PostgresStore.destroy(PostgresLocation(parsing: url))
    rawTable.close()
}
