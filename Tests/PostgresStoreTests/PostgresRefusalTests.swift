#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import PostgresStore
import StoreMigration
import Synchronization
import Testing

/// Runs `sql` on the test server as the superuser.
private func psql(_ sql: String) throws -> String {
    try runCommand("/usr/bin/psql", ["-h", PostgresTestServer.host, "-U", "postgres", "-d", "datastore", "-At",
                                     "-c", sql]).trimmingCharacters(in: .whitespacesAndNewlines)
}

/// A write refused as read-only (SQLSTATE 25006: a standby, or a primary fenced with
/// `default_transaction_read_only`) is `unavailable` and rolled back on its connection: every
/// next write is `unavailable` too, never `io` (which says a commit's outcome is unknown), until
/// the server takes writes again, when the next write succeeds.
@Test func writesRefusedAsReadOnlyAreUnavailableUntilTheServerTakesWritesAgain() throws {
    let dir = try TemporaryDirectory()
    let owner = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(owner) }
    try PostgresStore(location: owner, schema: Fixtures.schema).close()
    let role = "ro_\(owner.schema)"
    _ = try psql("DROP ROLE IF EXISTS \(role); CREATE ROLE \(role) LOGIN SUPERUSER; "
        + "ALTER ROLE \(role) SET default_transaction_read_only = on")
    defer { _ = try? psql("DROP ROLE IF EXISTS \(role)") }
    let fenced = try PostgresLocation(parsing: "postgres://\(role)@/datastore?schema=\(owner.schema)"
        + "&host=\(PostgresTestServer.host)")
    let store = try PostgresStore(location: fenced, schema: Fixtures.schema)
    defer { try? store.close() }
    for attempt in 0..<5 {
        do {
            try store.writeSync { try $0.insert(["key": "k\(attempt)", "value": 1], into: "Keyed") }
            Issue.record("write \(attempt) was stored by a read-only server")
        } catch let error as StoreError {
            #expect(error.code == .unavailable, "write \(attempt): \(error)")
            #expect(error.message.contains("no longer accepts writes") && !error.message.contains("25P02"),
                    "write \(attempt): \(error.message)")
        }
    }
    _ = try psql("ALTER ROLE \(role) RESET default_transaction_read_only")
    try store.writeSync { try $0.insert(["key": "after", "value": 2], into: "Keyed") }
    #expect(try store.read { try $0.fetch(FetchRequest("Keyed")) }.map { $0["key"] } == ["after"])
}

/// A server whose processes are stopped (SIGSTOP) keeps its connections open: a write waiting
/// for it fails within the location's `answer_timeout`, and once the processes run again the
/// next write reconnects and succeeds.
@Test func aStoppedServerFailsAWriteWithinTheAnswerTimeout() throws {
    let dir = try TemporaryDirectory()
    let plain = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(plain) }
    var location = plain
    location.answerTimeout = .seconds(2)
    #expect(location.description.contains("answer_timeout=2"))
    #expect(try PostgresLocation(parsing: location.description).answerTimeout == .seconds(2))
    let store = try PostgresStore(location: location, schema: Fixtures.schema)
    defer { try? store.close() }
    try store.writeSync { try $0.insert(["key": "before", "value": 1], into: "Keyed") }
    let pids = try psql("SELECT pid FROM pg_stat_activity WHERE application_name = 'datastore:\(plain.schema)'")
        .split(separator: "\n").compactMap { Int32($0) }
    try #require(!pids.isEmpty)
    // The block has its first answer, then the server's processes stop: the next statement waits
    // for an answer that does not come (the postmaster keeps running, for the other tests).
    var failure: StoreError?
    var took = Duration.zero
    do {
        try store.writeSync { w in
            _ = try w.get("Keyed", key: "before")
            for pid in pids { kill(pid, SIGSTOP) }
            let started = ContinuousClock.now
            defer { took = ContinuousClock.now - started }
            try w.insert(["key": "during", "value": 2], into: "Keyed")
            _ = try w.get("Keyed", key: "during")
        }
    } catch let error as StoreError {
        failure = error
    }
    for pid in pids { kill(pid, SIGCONT) }
    let error = try #require(failure, "a write to a stopped server succeeded")
    #expect(error.code == .unavailable || error.code == .io, "\(error)")
    #expect(error.message.contains("answer_timeout"), "\(error.message)")
    #expect(took < .seconds(5), "the write failed after \(took)")
    try store.writeSync { try $0.insert(["key": "after", "value": 3], into: "Keyed") }
    let keys = try store.read { try $0.fetch(FetchRequest("Keyed")) }.map { $0["key"] }
    #expect(keys.contains("before") && keys.contains("after"), "\(keys)")
}

/// No secret libpq parameter is taken in a location (it would show in every command's first
/// line, in reports and in a follow record): each is refused without repeating its value.
@Test(arguments: ["password=hunter2-secret", "sslpassword=hunter2-secret"])
func aSecretInALocationIsRefusedWithoutShowingIt(_ parameter: String) throws {
    let dir = try TemporaryDirectory()
    let base = PostgresTestServer.location(dir.url.path)
    let texts = [
        "postgres://postgres@/datastore?schema=\(base.schema)&host=\(PostgresTestServer.host)&\(parameter)",
        "host=\(PostgresTestServer.host) dbname=datastore schema=\(base.schema) \(parameter)",
    ] + (parameter.hasPrefix("password") ? ["postgres://postgres:hunter2-secret@/datastore?schema=x"] : [])
    for text in texts {
        #expect { try PostgresLocation(parsing: text) } throws: { error in
            let message = "\(error)"
            return message.contains("must not hold") && !message.contains("hunter2")
        }
        let report = dir.path("report.json")
        let copy = try runCommand(CrashRecovery.executable(named: "migrate-store").path,
                                  ["copy", "--from", "postgres:" + text, "--to", "lmdb:" + dir.path("out.lmdb"),
                                   "--report", report], allowingFailure: true)
        #expect(!copy.contains("hunter2"), "\(copy)")
        #expect(!((try? String(contentsOfFile: report, encoding: .utf8)) ?? "").contains("hunter2"))
        let inspect = try runCommand(CrashRecovery.executable(named: "migrate-store").path,
                                     ["inspect", "postgres:" + text], allowingFailure: true)
        #expect(!inspect.contains("hunter2") && inspect.contains("must not hold"), "\(inspect)")
    }
}

/// A primary fenced while the store's connections are open (`default_transaction_read_only`
/// turned on and reloaded, as a failover manager fences one), under two writer and two reader
/// threads: every failed operation is `unavailable`, never `io` (which says a commit's outcome is
/// unknown) and never 25P02 (a connection handed on inside an aborted transaction); once the
/// fence is lifted, writes succeed again.
@Test func aFenceThatBeginsUnderWritersAndReadersGivesOnlyUnavailable() throws {
    let host = TestPostgresServer.startOwn("fence")
    func admin(_ sql: String) throws {
        _ = try runCommand("/usr/bin/psql", ["-h", host, "-U", "postgres", "-d", "datastore", "-At", "-c", sql])
    }
    // Two hosts (the same server twice, as a failover manager's primary and standby would be
    // named) with target_session_attrs=read-write: a reconnection under the fence finds no
    // server that takes writes.
    let location = try PostgresLocation(parsing: "postgres://postgres@/datastore?schema=fence&host=\(host),\(host)"
        + "&port=5432,5432&target_session_attrs=read-write&connect_timeout=2")
    let store = try PostgresStore(location: location, schema: Fixtures.schema)
    defer { try? store.close() }
    let tally = FenceTally()
    let finished = DispatchGroup()
    func run(_ body: @escaping @Sendable () -> Void) {
        finished.enter()
        Thread.detachNewThread {
            body()
            finished.leave()
        }
    }
    for writer in 0..<2 {
        run {
            var n = 0
            while !tally.stop.load(ordering: .relaxed) {
                n += 1
                do {
                    try store.writeSync { try $0.insert(["key": .string("w\(writer)-\(n)"), "value": .int(Int64(n))], into: "Keyed") }
                    tally.counts.withLock { $0.written += 1 }
                } catch let error as StoreError where error.code == .unavailable && !error.message.contains("25P02") {
                    tally.counts.withLock { $0.unavailable += 1 }
                } catch {
                    tally.counts.withLock { $0.other.append("write: \(error)") }
                }
            }
        }
    }
    for _ in 0..<2 {
        run {
            while !tally.stop.load(ordering: .relaxed) {
                do {
                    _ = try store.read { try $0.count(FetchRequest("Keyed")) }
                    tally.counts.withLock { $0.read += 1 }
                } catch let error as StoreError where error.code == .unavailable && !error.message.contains("25P02") {
                    tally.counts.withLock { $0.unavailable += 1 }
                } catch {
                    tally.counts.withLock { $0.other.append("read: \(error)") }
                }
            }
        }
    }
    /// Waits (up to a minute) until `condition` holds of the counts.
    func wait(_ what: String, _ condition: @escaping ((written: Int, read: Int, unavailable: Int, other: [String])) -> Bool)
        throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while !tally.counts.withLock({ condition($0) }) {
            guard ContinuousClock.now < deadline else {
                throw StoreError(.busy, "never \(what): \(tally.counts.withLock { $0 })")
            }
            Thread.sleep(forTimeInterval: 0.01)
        }
    }
    defer {
        tally.stop.store(true, ordering: .relaxed)
        finished.wait()
        try? admin("ALTER SYSTEM RESET default_transaction_read_only")
        try? admin("SELECT pg_reload_conf()")
    }
    try wait("written before the fence") { $0.written >= 50 && $0.read >= 50 }
    try admin("ALTER SYSTEM SET default_transaction_read_only = on")
    try admin("SELECT pg_reload_conf()")
    try wait("refused under the fence") { $0.unavailable >= 40 }
    let fenced = tally.counts.withLock { $0 }
    try admin("ALTER SYSTEM RESET default_transaction_read_only")
    try admin("SELECT pg_reload_conf()")
    try wait("written after the fence") { $0.written >= fenced.written + 50 }
    tally.stop.store(true, ordering: .relaxed)
    finished.wait()
    let final = tally.counts.withLock { $0 }
    #expect(final.other.count == 0, "\(final.other.count) operations failed otherwise, the first: \(final.other.first ?? "")")
    #expect(final.unavailable >= 40)
}

/// What the threads of the fence test did.
private final class FenceTally: Sendable {
    let counts = Mutex((written: 0, read: 0, unavailable: 0, other: [String]()))
    let stop = Atomic(false)
}
/// An answer timeout past a day is refused naming it (a Duration of its milliseconds overflowed
/// before), and a location a caller set to any duration prints without an overflow.
@Test func timeoutsPastWhatTheLocationCountsAreRefusedOrPrinted() throws {
    #expect(performing: { _ = try PostgresLocation(parsing: "postgres://db/app?schema=s&answer_timeout=1e16") },
            throws: { ($0 as? StoreError)?.code == .invalidArgument && "\($0)".contains("answer_timeout='1e16'") })
    var location = try PostgresLocation(parsing: "postgres://db/app?schema=s")
    location.answerTimeout = .seconds(Int64.max)
    location.standbyWait = .seconds(10_000_000_000_000_000)
    location.maxStandbyLag = .milliseconds(250)
    let printed = location.description
    #expect(printed.contains("answer_timeout=9.223372036854776e+18"), "\(printed)")
    #expect(printed.contains("standby_wait=10000000000000000") && printed.contains("max_standby_lag=0.25"), "\(printed)")
}

#endif
