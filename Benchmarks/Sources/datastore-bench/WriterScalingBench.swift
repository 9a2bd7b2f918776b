import BenchSupport
import DataStoreAPI
import FluentKit
import FluentPostgresDriver
import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresStore
import Synchronization

/// One row of the writers table: one-insert transactions per second at `clients` callers.
struct WriterRow {
    var clients: Int
    var storeThreads: Double
    var storeTasks: Double
    var storeProcesses: Double
    var pgbenchStore: Double
    /// The same statements in one pipeline (one round trip), as the store sends them.
    var pgbenchPipelined: Double
    /// The same pipeline with a pgbench thread per client (`-j N`), as the store's callers each
    /// have one: where pgbench's `-j 2` waits for two connections' answers on one thread.
    var pgbenchPipelinedThreadEach: Double
    var pgbenchPlain: Double
    var fluent: Double
    /// The same `writeSync`s on an encrypted store (`--encryption`).
    var encryptedThreads: Double?
}

/// The entity the pgbench scripts write (Benchmarks/pgbench/setup.sql): `Item(id, name)`.
private let writerSchema = Schema(entities: [
    EntitySchema("Item", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("name", .string)]),
])

/// The Fluent side: the same table.
final class FluentItem: Model, @unchecked Sendable {
    static let schema = "Item"
    @ID(custom: "id", generatedBy: .user) var id: Int64?
    @FieldProperty<FluentItem, String>(key: "name") var name: String

    init() {}

    init(id: Int64) {
        self.id = id
        name = "item"
    }
}

private let writerSeconds = 5.0

/// One-insert write transactions from N callers (1, 4, 16, 64), on one server with
/// `synchronous_commit = off` (the harness starts its own server so; a server of `PGHOST` is
/// taken as it is): a store's `writeSync` from N threads of one process (its writer pool, 16
/// connections by default: twice the cores, at least 4), its awaited `writeAsync` from N tasks, N processes with a store
/// each, pgbench with N clients running the statements the store sends, one at a time
/// (`Benchmarks/pgbench/store-write.sql`) and in one pipeline, as the store sends them
/// (`store-write-pipelined.sql`; on pgbench's two threads, `-j 2`, and again on a thread per
/// client, as the store's callers are), and a plain `BEGIN; INSERT; COMMIT`, and Fluent with
/// N tasks on its own pool (as many connections as the store's). Each for 5 s. Then one
/// connection: 10,000 one-insert `writeSync`s on a store with `write_connections=1` against
/// libpq's three-round-trip loop. With `key`, the threads' row again on an encrypted store.
@MainActor func benchmarkPostgresWriterScaling(clients: [Int], key: StoreKey? = nil) throws {
    if ProcessInfo.processInfo.environment["PGHOST"] == nil { setenv("PG_OPTIONS", "-c synchronous_commit=off", 1) }
    let host = postgresHost
    let benchmarks = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    let scripts = benchmarks.appendingPathComponent("pgbench").path
    let psql = ["-h", host, "-U", "postgres", "-d", "datastore", "-X", "-q"]
    try run("/usr/bin/psql", psql + ["-f", scripts + "/setup.sql"])

    let url = postgresURL("bench_writers") + (ProcessInfo.processInfo.environment["BENCH_PG_PARAMETERS"].map { "&" + $0 } ?? "")
    try? PostgresStore.destroy(PostgresLocation(parsing: url))
    let store = try PostgresStore(url: url, schema: writerSchema, durability: .normal)
    defer { try? PostgresStore.destroy(store.location) }
    let encryptedURL = postgresURL("bench_writers_encrypted")
    try? PostgresStore.destroy(PostgresLocation(parsing: encryptedURL))
    let encrypted = try key.map { try PostgresStore(url: encryptedURL, schema: writerSchema, durability: .normal, key: $0) }
    defer { if let encrypted { try? PostgresStore.destroy(encrypted.location) } }
    var rows: [WriterRow] = []
    var base = 0
    func nextBase() -> Int {
        base += 100_000_000
        return base
    }
    for n in clients {
        let threads = try storeThreads(store, n, base: nextBase())
        let tasks = try storeTasks(store, n, base: nextBase())
        let processes = try storeProcesses(url, n, base: nextBase())
        let pgbenchStore = try pgbench(host, scripts + "/store-write.sql", clients: n)
        let pgbenchPipelined = try pgbench(host, scripts + "/store-write-pipelined.sql", clients: n)
        let pgbenchThreadEach = try pgbench(host, scripts + "/store-write-pipelined.sql", clients: n, threads: n)
        let pgbenchPlain = try pgbench(host, scripts + "/plain-write.sql", clients: n)
        let fluent = try fluentWriters(host: host, clients: n, base: nextBase())
        let encryptedThreads = try encrypted.map { try storeThreads($0, n, base: nextBase()) }
        let row = WriterRow(clients: n, storeThreads: threads, storeTasks: tasks, storeProcesses: processes,
                            pgbenchStore: pgbenchStore, pgbenchPipelined: pgbenchPipelined,
                            pgbenchPipelinedThreadEach: pgbenchThreadEach, pgbenchPlain: pgbenchPlain,
                            fluent: fluent,
                            encryptedThreads: encryptedThreads)
        FileHandle.standardError.write(Data("writers \(n): \(row)\n".utf8))
        rows.append(row)
    }
    try store.close()
    try encrypted?.close()

    // One connection against libpq's three-round-trip loop, with the harness's usual record.
    let workload = Workload(count: 0)
    let single = postgresURL("bench_writer_one") + "&write_connections=1"
    try? PostgresStore.destroy(PostgresLocation(parsing: single))
    let one = try PostgresStore(url: single, schema: Workload.schema, durability: .normal)
    defer { try? PostgresStore.destroy(one.location) }
    let raw = try RawPostgresBench(host: host, schema: "bench_writer_raw", workload: workload)
    defer { raw.close() }
    let api = APIBench(store: one, workload: workload)
    // Fifty parts of 200 each side, in turns (as the PostgreSQL table's small transactions).
    let (apiBase, rawBase) = (nextBase(), nextBase())
    let part = Workload.smallTransactions / 50
    let turns = try inTurns(50, api: { try api.smallTransactions(from: apiBase + $0 * part, count: part) },
                            raw: { try raw.smallTransactions(from: rawBase + $0 * part, count: part) })
    let (apiSeconds, rawSeconds) = (turns.api, turns.raw)
    try one.close()

    print("")
    print("| callers | store writeSync, N threads | store writeAsync, N tasks | store, N processes | pgbench store-write.sql "
        + "| threads / pgbench | processes / pgbench | pgbench store-write-pipelined.sql | threads / pipelined "
        + "| processes / pipelined | pgbench pipelined, a thread a client | threads / it | processes / it "
        + "| pgbench plain-write.sql | Fluent, N tasks | tasks / Fluent |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows {
        print(String(format: "| %d | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f | %.0f | %.2f | %.2f | %.0f | %.2f | %.2f | %.0f | %.0f | %.2f |",
                     row.clients, row.storeThreads, row.storeTasks, row.storeProcesses, row.pgbenchStore,
                     row.storeThreads / row.pgbenchStore, row.storeProcesses / row.pgbenchStore, row.pgbenchPipelined,
                     row.storeThreads / row.pgbenchPipelined, row.storeProcesses / row.pgbenchPipelined,
                     row.pgbenchPipelinedThreadEach, row.storeThreads / row.pgbenchPipelinedThreadEach,
                     row.storeProcesses / row.pgbenchPipelinedThreadEach,
                     row.pgbenchPlain, row.fluent, row.storeTasks / row.fluent))
    }
    if key != nil {
        print("")
        print("| callers | store writeSync, N threads | encrypted | encrypted / plain |")
        print("| ---: | ---: | ---: | ---: |")
        for row in rows {
            let encrypted = row.encryptedThreads ?? 0
            print(String(format: "| %d | %.0f | %.0f | %.2f |", row.clients, row.storeThreads, encrypted,
                         encrypted / row.storeThreads))
        }
    }
    let count = Double(Workload.smallTransactions)
    print("")
    print("| one connection | store writeSync/s | libpq BEGIN; INSERT; COMMIT (three round trips)/s | store / libpq |")
    print("| --- | ---: | ---: | ---: |")
    print(String(format: "| 10,000 one-insert transactions, fifty parts of 200 in turns | %.0f | %.0f | %.2f |", count / apiSeconds,
                 count / rawSeconds, rawSeconds / apiSeconds))
}

/// One-insert `writeSync`s per second from `n` threads on one store.
private func storeThreads(_ store: PostgresStore, _ n: Int, base: Int) throws -> Double {
    let counts = Mutex([Int](repeating: 0, count: n))
    let failures = Mutex<[String]>([])
    let end = Date().addingTimeInterval(writerSeconds)
    let threads = (0..<n).map { index in
        Thread {
            var i = base + index * 1_000_000
            var done = 0
            while Date() < end {
                do {
                    try store.writeSync { try $0.insert(["id": .int(Int64(i)), "name": "item"], into: "Item") }
                    done += 1
                } catch {
                    failures.withLock { $0.append("\(error)") }
                    return
                }
                i += 1
            }
            counts.withLock { $0[index] = done }
        }
    }
    for thread in threads { thread.start() }
    while threads.contains(where: { !$0.isFinished }) { usleep(20_000) }
    if let failure = failures.withLock({ $0.first }) { throw BenchError("a writer failed: \(failure)") }
    return Double(counts.withLock { $0.reduce(0, +) }) / writerSeconds
}

/// One-insert awaited `writeAsync`s per second from `n` tasks on one store.
private func storeTasks(_ store: PostgresStore, _ n: Int, base: Int) throws -> Double {
    try blocking {
        let end = ContinuousClock.now + .milliseconds(Int64(writerSeconds * 1_000))
        return try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<n {
                group.addTask {
                    var i = base + index * 1_000_000
                    var done = 0
                    while ContinuousClock.now < end {
                        let key = Int64(i)
                        try await store.writeAsync { try $0.insert(["id": .int(key), "name": "item"], into: "Item") }
                        done += 1
                        i += 1
                    }
                    return done
                }
            }
            return Double(try await group.reduce(0, +)) / writerSeconds
        }
    }
}

/// One-insert `writeSync`s per second from `n` processes, a store and a thread each
/// (`datastore-bench --writer-child`), started together.
private func storeProcesses(_ url: String, _ n: Int, base: Int) throws -> Double {
    var children: [(Process, Pipe, FileHandle)] = []
    for index in 0..<n {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = ["--writer-child", "\(url),\(writerSeconds),\(base + index * 1_000_000)"]
        let output = Pipe(), input = Pipe()
        process.standardOutput = output
        process.standardInput = input
        try process.run()
        children.append((process, input, output.fileHandleForReading))
    }
    for (_, _, output) in children {
        guard readLine(output) == "ready" else { throw BenchError("a writer process did not open its store") }
    }
    for (_, input, _) in children { input.fileHandleForWriting.write(Data("go\n".utf8)) }
    var total = 0
    for (process, _, output) in children {
        let line = readLine(output) ?? ""
        process.waitUntilExit()
        guard line.hasPrefix("done "), let count = Int(line.dropFirst(5)) else {
            throw BenchError("a writer process failed: \(line)")
        }
        total += count
    }
    return Double(total) / writerSeconds
}

/// A line of `handle`'s output, read byte by byte (nothing past it is taken).
private func readLine(_ handle: FileHandle) -> String? {
    var bytes: [UInt8] = []
    while true {
        guard let byte = try? handle.read(upToCount: 1), let first = byte.first else {
            return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
        }
        if first == 0x0A { return String(decoding: bytes, as: UTF8.self) }
        bytes.append(first)
    }
}

/// The child side of ``storeProcesses(_:_:base:)``: `URL,SECONDS,FIRST-KEY`.
func runWriterChild(_ argument: String) -> Never {
    let parts = argument.split(separator: ",").map(String.init)
    do {
        guard parts.count == 3, let seconds = Double(parts[1]), var i = Int(parts[2]) else {
            throw BenchError("--writer-child URL,SECONDS,FIRST-KEY")
        }
        let store = try PostgresStore(url: parts[0], schema: writerSchema, durability: .normal)
        print("ready")
        fflush(nil)
        _ = Swift.readLine()
        let end = Date().addingTimeInterval(seconds)
        var done = 0
        while Date() < end {
            try store.writeSync { try $0.insert(["id": .int(Int64(i)), "name": "item"], into: "Item") }
            done += 1
            i += 1
        }
        try store.close()
        print("done \(done)")
        fflush(nil)
        exit(0)
    } catch {
        print("error \(error)")
        exit(1)
    }
}

/// pgbench's transactions per second with `clients` clients running `script` for 5 s, on
/// `threads` threads (`-j`; at most as many as clients).
private func pgbench(_ host: String, _ script: String, clients: Int, threads: Int = 2) throws -> Double {
    let output = try run("/usr/bin/pgbench", ["-h", host, "-U", "postgres", "-n", "-M", "prepared",
                                              "-j", "\(min(threads, clients))",
                                              "-c", "\(clients)", "-T", "\(Int(writerSeconds))", "-f", script,
                                              "datastore"])
    guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("tps = ") }),
          let tps = Double(line.dropFirst(6).prefix { $0 != " " }) else {
        throw BenchError("pgbench printed no tps: \(output)")
    }
    return tps
}

/// Runs a program to its end; its standard output, or an error with both outputs.
@discardableResult
private func run(_ path: String, _ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let output = Pipe(), errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    let problems = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw BenchError("\(path) \(arguments): \(problems)") }
    return text
}

/// Fluent's one-insert transactions per second from `clients` tasks, on a pool of as many
/// connections as the store's writer pool (at most 16), spread over the event loops.
private func fluentWriters(host: String, clients: Int, base: Int) throws -> Double {
    try blocking {
        let group = MultiThreadedEventLoopGroup.singleton
        let databases = Databases(threadPool: NIOThreadPool.singleton, on: group)
        var quiet = Logger(label: "fluent-writers")
        quiet.logLevel = .error
        let logger = quiet
        var configuration = SQLPostgresConfiguration(unixDomainSocketPath: host + "/.s.PGSQL.5432",
                                                     username: "postgres", password: nil, database: "datastore")
        configuration.searchPath = ["bench_fluent_writers"]
        let loops = max(1, System.coreCount)
        let connections = min(clients, 16)
        databases.use(.postgres(configuration: configuration,
                                maxConnectionsPerEventLoop: max(1, (connections + loops - 1) / loops)), as: .psql)
        let setup = databases.database(.psql, logger: logger, on: group.any())! as! any SQLDatabase
        try await setup.raw("DROP SCHEMA IF EXISTS bench_fluent_writers CASCADE").run()
        try await setup.raw("CREATE SCHEMA bench_fluent_writers").run()
        try await setup.raw("CREATE TABLE bench_fluent_writers.\"Item\" (id bigint NOT NULL, name text COLLATE \"C\" "
            + "NOT NULL, PRIMARY KEY (id))").run()
        let end = ContinuousClock.now + .milliseconds(Int64(writerSeconds * 1_000))
        let total = try await withThrowingTaskGroup(of: Int.self) { tasks in
            for index in 0..<clients {
                tasks.addTask {
                    let db = databases.database(.psql, logger: logger, on: group.any())!
                    var i = base + index * 1_000_000
                    var done = 0
                    while ContinuousClock.now < end {
                        let item = FluentItem(id: Int64(i))
                        try await db.transaction { try await item.create(on: $0) }
                        done += 1
                        i += 1
                    }
                    return done
                }
            }
            return try await tasks.reduce(0, +)
        }
        try await setup.raw("DROP SCHEMA bench_fluent_writers CASCADE").run()
        await databases.shutdownAsync()
        return Double(total) / writerSeconds
    }
}
