#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import PostgresStore
import Testing

/// Ends every server connection of the store at `location`, as a server restart or an idle
/// timeout would; returns how many it ended.
@discardableResult
private func endConnections(of location: PostgresLocation) throws -> Int {
    let output = try runCommand("/usr/bin/psql", [
        "-h", PostgresTestServer.host, "-U", "postgres", "-d", "datastore", "-At", "-c",
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            + "WHERE application_name = 'datastore:\(location.schema)'",
    ])
    return Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
}

/// Connections lost between operations (the server restarted) are replaced: the next read and
/// the next write succeed, synchronous and async alike, with nothing lost.
@Test func lostConnectionsAreReplacedBeforeTheNextReadOrWrite() async throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    let store = try PostgresStore(location: location, schema: Fixtures.schema, readConnections: 2)
    defer { try? store.close() }
    try store.writeSync { try $0.insert(["key": "a", "value": 1], into: "Keyed") }
    #expect(try store.read { try $0.count(FetchRequest("Keyed")) } == 1)
    #expect(try endConnections(of: location) >= 2)
    try store.writeSync { try $0.insert(["key": "b", "value": 2], into: "Keyed") }
    #expect(try store.read { try $0.count(FetchRequest("Keyed")) } == 2)
    try endConnections(of: location)
    try await store.writeAsync { try $0.insert(["key": "c", "value": 3], into: "Keyed") }
    #expect(try await store.readAsync { try $0.count(FetchRequest("Keyed")) } == 3)
}

/// A connection lost inside a write block, after the block saw an answer, is not retried (the
/// block ran): the write fails with one line that says what happened and that it may be retried
/// (`unavailable`), nothing of it is stored, and the next write succeeds.
@Test func aConnectionLostDuringAWriteFailsItWithAClearErrorAndTheNextOneWorks() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    let store = try PostgresStore(location: location, schema: Fixtures.schema)
    defer { try? store.close() }
    do {
        try store.writeSync { w in
            try w.insert(["key": "lost", "value": 1], into: "Keyed")
            try endConnections(of: location)
            try w.insert(["key": "lost too", "value": 2], into: "Keyed")
        }
        Issue.record("the write succeeded although its connection was ended")
    } catch let error as StoreError {
        #expect(error.code == .unavailable)
        #expect(error.message.contains("the connection to the server was lost"), "\(error.message)")
        #expect(!error.message.contains("PSQLError") && !error.message.contains("\n"), "\(error.message)")
    }
    try store.writeSync { try $0.insert(["key": "after", "value": 3], into: "Keyed") }
    #expect(try store.read { r in try r.fetch(FetchRequest("Keyed")).map { $0["key"] } } == ["after"])
}

/// A block's first run sends its inserts without waiting: when the connection is then lost
/// before the block's next answer, the transaction is not begun again without them (the block
/// saw them stored); the block runs again on a new connection, and every insert of it is stored.
/// A block that catches the error and goes on stores nothing of that run (its next statements
/// and its commit fail too), and runs again.
@Test(arguments: [false, true])
func aConnectionLostAfterAnInsertSentWithoutWaitingRunsTheBlockAgain(blockCatches: Bool) throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    let store = try PostgresStore(location: location, schema: Fixtures.schema)
    defer { try? store.close() }
    // (The first write of a new store stores the feed's state and the second reads it; from the
    // third on, nothing of a write is answered before its block's first wait.)
    for key in ["warm", "warm too"] { try store.writeSync { try $0.insert(["key": .string(key), "value": 0], into: "Keyed") } }
    var runs = 0
    try store.writeSync { w in
        runs += 1
        try w.insert(["key": "first", "value": 1], into: "Keyed")
        if runs == 1 {
            try endConnections(of: location)
            // (Until the server's backends are gone, so that none runs what comes next.)
            while try runCommand("/usr/bin/psql", ["-h", PostgresTestServer.host, "-U", "postgres", "-d", "datastore",
                                                   "-At", "-c", "SELECT count(*) FROM pg_stat_activity WHERE "
                                                       + "application_name = 'datastore:\(location.schema)'"])
                .trimmingCharacters(in: .whitespacesAndNewlines) != "0" {}
        }
        if blockCatches {
            _ = try? w.get("Keyed", key: "absent")
            try? w.insert(["key": "second", "value": 2], into: "Keyed")
        } else {
            #expect(try w.get("Keyed", key: "absent") == nil)
            try w.insert(["key": "second", "value": 2], into: "Keyed")
        }
    }
    #expect(runs == 2)
    #expect(try store.read { r in try r.fetch(FetchRequest("Keyed")).map { $0["key"] } } == ["first", "second", "warm", "warm too"])
}

/// The read pool's size bounds the connections reads use: 16 concurrent async reads on a pool of
/// 3 open at most 3 read connections (the writer and observers have their own).
@Test func concurrentReadsUseAtMostThePoolsConnections() async throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    let store = try PostgresStore(location: location, schema: Fixtures.schema, readConnections: 3)
    defer { try? store.close() }
    try store.writeSync { try $0.insert(["key": "a", "value": 1], into: "Keyed") }
    let counts = try await withThrowingTaskGroup(of: Int.self) { group in
        for _ in 0..<16 {
            group.addTask {
                try await store.readAsync { r in
                    usleep(50_000)
                    return try r.count(FetchRequest("Keyed"))
                }
            }
        }
        var all: [Int] = []
        for try await count in group { all.append(count) }
        return all
    }
    #expect(counts == Array(repeating: 1, count: 16))
    let open = try runCommand("/usr/bin/psql", [
        "-h", PostgresTestServer.host, "-U", "postgres", "-d", "datastore", "-At", "-c",
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'datastore:\(location.schema)'",
    ])
    // The writer's connection, and at most 3 readers.
    #expect(Int(open.trimmingCharacters(in: .whitespacesAndNewlines)).map { $0 >= 2 && $0 <= 4 } == true, "\(open)")
    #expect(throws: StoreError.self) { try PostgresStore(location: location, schema: nil, readConnections: 0) }
}
#endif
