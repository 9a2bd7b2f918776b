#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import PostgresStore
import StoreMigration
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
#endif
