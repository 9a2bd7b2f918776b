#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import PostgresStore
import Synchronization
import Testing

/// Two `writeSync` blocks of two threads on one store: the first waits inside its transaction
/// for the second to be inside its own. On a pool of writer connections the
/// second begins while the first waits, and both commit; with `write_connections=1` the second
/// waits for the first to end (the first gives up waiting after half a second), as on the
/// embedded stores.
@Test(arguments: [16, 1])
func writeBlocksOfTwoThreadsRunAtOnceOnAPoolAndOneAfterTheOtherOnOneConnection(connections: Int) throws {
    let dir = try TemporaryDirectory()
    let base = PostgresTestServer.location(dir.url.path)
    let location = try PostgresLocation(parsing: base.description + "&write_connections=\(connections)")
    #expect(location.writeConnections == connections)
    defer { try? PostgresStore.destroy(location) }
    let store = try PostgresStore(location: location, schema: Fixtures.schema)
    defer { try? store.close() }

    let firstInside = DispatchSemaphore(value: 0)
    let secondInside = DispatchSemaphore(value: 0)
    let firstDone = DispatchSemaphore(value: 0)
    let overlapped = Atomic(false)
    let firstOutcome = Mutex<String?>(nil)
    // (Either block may run twice: the two transactions can conflict, as serializable ones on
    // the same index pages do, and the store runs the loser again. Only the first run waits.)
    let firstRuns = Atomic(0)
    let first = Thread {
        do {
            try store.writeSync { w in
                try w.save(["key": "first", "value": 1], into: "Keyed")
                guard firstRuns.add(1, ordering: .relaxed).newValue == 1 else { return }
                firstInside.signal()
                let wait: DispatchTime = .now() + (connections > 1 ? .seconds(30) : .milliseconds(500))
                if secondInside.wait(timeout: wait) == .success { overlapped.store(true, ordering: .relaxed) }
            }
        } catch {
            firstOutcome.withLock { $0 = "\(error)" }
        }
        firstDone.signal()
    }
    first.start()
    firstInside.wait()
    let secondRuns = Atomic(0)
    try store.writeSync { w in
        try w.save(["key": "second", "value": 2], into: "Keyed")
        if secondRuns.add(1, ordering: .relaxed).newValue == 1 { secondInside.signal() }
    }
    firstDone.wait()
    #expect(firstOutcome.withLock { $0 } == nil)
    #expect(overlapped.load(ordering: .relaxed) == (connections > 1))
    let stored = try store.read { r in try ["first", "second"].map { try r.get("Keyed", key: .string($0))?["value"] } }
    #expect(stored == [.int(1), .int(2)])
}

/// Awaited `writeAsync` blocks of two tasks run at once on a pool; blocks enqueued without
/// awaiting still run one after another in the order given, and an awaited block given after
/// them sees them all.
@Test func awaitedAsyncWritesRunAtOnceAndEnqueuedOnesKeepTheirOrder() async throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    let store = try PostgresStore(location: location, schema: Fixtures.schema)
    defer { try? store.close() }

    try await store.writeAsync { try $0.save(["key": "log", "value": 0, "note": ""], into: "Keyed") }
    for n in 1...40 {
        store.enqueueWrite { w in
            guard case .string(let note)? = try w.get("Keyed", key: "log")?["note"] else { return }
            try w.save(["key": "log", "value": Value.int(Int64(n)), "note": .string(note + "\(n),")], into: "Keyed")
        }
    }
    let seen = try await store.writeAsync { w in try w.get("Keyed", key: "log")?["note"] }
    #expect(seen == .string((1...40).map { "\($0)," }.joined()))

    let firstInside = DispatchSemaphore(value: 0)
    let secondInside = DispatchSemaphore(value: 0)
    let overlapped = Atomic(false)
    let firstRuns = Atomic(0)
    let secondRuns = Atomic(0)
    async let first: Void = store.writeAsync { w in
        try w.save(["key": "a", "value": 1], into: "Keyed")
        guard firstRuns.add(1, ordering: .relaxed).newValue == 1 else { return }
        firstInside.signal()
        if secondInside.wait(timeout: .now() + .seconds(30)) == .success { overlapped.store(true, ordering: .relaxed) }
    }
    await Task.detached { firstInside.wait() }.value
    try await store.writeAsync { w in
        try w.save(["key": "b", "value": 2], into: "Keyed")
        if secondRuns.add(1, ordering: .relaxed).newValue == 1 { secondInside.signal() }
    }
    try await first
    let didOverlap = overlapped.load(ordering: .relaxed)
    #expect(didOverlap, "the second awaited block did not run while the first was inside its transaction")
    try store.waitForPendingWrites()
    #expect(try store.read { try $0.count(FetchRequest("Keyed")) } == 3)
}

/// `write_connections` takes 1 to 1,000, and a location keeps it when written out.
@Test func writeConnectionsIsALocationParameter() throws {
    let location = try PostgresLocation(parsing: "postgres://app@db/app?schema=s&write_connections=4")
    #expect(location.writeConnections == 4)
    #expect(location.description.contains("write_connections=4"))
    #expect(try PostgresLocation(parsing: location.description).writeConnections == 4)
    let plain = try PostgresLocation(parsing: "postgres://app@db/app?schema=s")
    #expect(plain.writeConnections == nil && !plain.description.contains("write_connections"))
    #expect(PostgresLocation.defaultWriteConnections >= 4)
    for bad in ["0", "1001", "many", ""] {
        #expect {
            _ = try PostgresLocation(parsing: "postgres://app@db/app?schema=s&write_connections=\(bad)")
        } throws: { error in
            (error as? StoreError)?.code == .invalidArgument
                && (error as? StoreError)?.message == "write_connections='\(bad)' is not a number of connections (1 to 1000)"
        }
    }
}
#endif
