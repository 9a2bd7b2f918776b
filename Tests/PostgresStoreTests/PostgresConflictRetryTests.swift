#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import PostgresStore
import Synchronization
import Testing

/// Another program's psql session holding a transaction open, fed statements one at a time.
final class OpenPsql: @unchecked Sendable {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let lock = NSLock()
    private var text = ""

    init() throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        process.arguments = ["-h", PostgresTestServer.host, "-U", "postgres", "-d", "datastore", "-X"]
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        try process.run()
        output.fileHandleForReading.readabilityHandler = { [self] handle in
            let data = handle.availableData
            lock.withLock { text += String(decoding: data, as: UTF8.self) }
        }
    }

    func send(_ sql: String) {
        input.fileHandleForWriting.write(Data((sql + "\n").utf8))
    }

    /// Waits until psql has printed `text` `count` times (a statement's command tag).
    func wait(for text: String, count: Int = 1) {
        let deadline = Date().addingTimeInterval(30)
        while transcript.components(separatedBy: text).count - 1 < count, Date() < deadline {
            usleep(2_000)
        }
    }

    var transcript: String { lock.withLock { self.text } }

    func finish() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
        output.fileHandleForReading.readabilityHandler = nil
    }
}

/// Waits until a server session whose query contains `text` waits for a lock.
private func waitUntilBlocked(onQueryContaining text: String) throws {
    let deadline = Date().addingTimeInterval(30)
    while Date() < deadline {
        let count = try runCommand("/usr/bin/psql", [
            "-h", PostgresTestServer.host, "-U", "postgres", "-d", "datastore", "-At", "-c",
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%\(text)%' "
                + "AND query NOT LIKE '%pg_stat_activity%'",
        ]).trimmingCharacters(in: .whitespacesAndNewlines)
        if count != "0" { return }
        usleep(5_000)
    }
    Issue.record("no session blocked on a query containing \(text)")
}

/// A write block whose transaction deadlocks with another program's transaction: on the first
/// run, the block takes item a, the other session (which holds b) waits for a, and the block then
/// waits for b. PostgreSQL aborts the block's transaction (40P01; the other session waits longer
/// before it checks); the store runs the block again, which waits for the other session to
/// commit and then succeeds. With `write_retries=0` the write fails with `conflict` instead.
@Test(arguments: [10, 0])
func aWriteBlockThatDeadlocksIsRunAgain(_ retries: Int) throws {
    let dir = try TemporaryDirectory()
    let base = PostgresTestServer.location(dir.url.path)
    let location = try PostgresLocation(parsing: base.description + "&write_retries=\(retries)")
    #expect(location.writeRetries == retries)
    defer { try? PostgresStore.destroy(location) }
    let store = try PostgresStore(location: location, schema: Fixtures.schema)
    defer { try? store.close() }
    try store.writeSync { w in
        try w.insert(["key": "a", "value": 0], into: "Keyed")
        try w.insert(["key": "b", "value": 0], into: "Keyed")
    }
    let start = try store.read { try $0.changeToken() }
    let table = "\"\(location.schema)\".\"Keyed\""
    let other = try OpenPsql()
    other.send("SET deadlock_timeout = '60s'; BEGIN; UPDATE \(table) SET value = 100 WHERE key = 'b';")
    other.wait(for: "UPDATE 1")
    // Once the other session's update of a goes through (the block's transaction was rolled
    // back), it commits.
    let committer = Thread {
        other.wait(for: "UPDATE 1", count: 2)
        other.send("UPDATE \(table) SET value = value + 1 WHERE key = 'b'; COMMIT;")
        other.wait(for: "COMMIT")
    }
    let runs = Atomic(0)
    let outcome = Result {
        try store.writeSync { w in
            let run = runs.add(1, ordering: .relaxed).newValue
            _ = try w.update("Keyed", key: "a", set: ["value": 1])
            if run == 1 {
                other.send("UPDATE \(table) SET value = 200 WHERE key = 'a';")
                try waitUntilBlocked(onQueryContaining: "value = 200")
                committer.start()
            }
            _ = try w.update("Keyed", key: "b", set: ["value": 1])
        }
    }
    other.wait(for: "COMMIT")
    other.finish()
    let values = try store.read { r in try ["a", "b"].map { try r.get("Keyed", key: .string($0))?["value"] } }
    let commits = try store.read { try $0.changes(since: start) }
    if retries > 0 {
        #expect(throws: Never.self) { try outcome.get() }
        // At least twice: under load, the second run may take a's lock before the other
        // session wakes up to it, and deadlock once more (another retry).
        #expect(runs.load(ordering: .relaxed) >= 2, "the block ran again after the deadlock")
        #expect(values == [1, 1], "the second run committed after the other session: \(values)")
        #expect(commits.count == 1, "the feed holds the committed run only: \(commits)")
    } else {
        #expect(runs.load(ordering: .relaxed) == 1)
        #expect {
            try outcome.get()
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.code == .conflict && error.cause?.sqlState == "40P01"
        }
        #expect(values == [200, 101], "the other session's transaction alone committed: \(values)")
        #expect(commits.isEmpty)
    }
    #expect(!other.transcript.contains("ERROR"), "the other session was not the one aborted: \(other.transcript)")
}
#endif
