#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
@_spi(Backend) @testable import PostgresStore
import Synchronization
import Testing

/// Blocks enqueued without awaiting go to the server one after another on one connection, each
/// `COMMIT` sent with the next block's first statements. These tests make a `COMMIT` fail in the
/// middle of such a run, with a deferred constraint trigger (in a schema of its own) that raises
/// at commit for an item of a given title, and check that the callers learn what happened in
/// the order they enqueued, that the blocks that followed a failed commit ran again after it,
/// and that the feed lists the commits once each, in order.
/// What the enqueued blocks did: how often each ran, and what each caller was told, in order.
private final class Runs: Sendable {
    let runs = Mutex<[Int64: Int]>([:])
    let told = Mutex<[(id: Int64, error: StoreError?)]>([])

    func ran(_ id: Int64) { runs.withLock { $0[id, default: 0] += 1 } }
    func count(_ id: Int64) -> Int { runs.withLock { $0[id] ?? 0 } }
}

/// A store of notes whose `COMMIT` fails, by a trigger run at commit, for a note titled
/// `conflict` (40001, the first time only), `refused` (23514, every time) or `vanish` (the server
/// ends the connection, the first time only).
private func storeFailingAtCommit(_ key: String, retries: Int? = nil) throws
    -> (store: PostgresStore, location: PostgresLocation, helpers: String)
{
    var location = PostgresTestServer.location(key)
    if let retries { location.writeRetries = retries }
    let store = try PostgresStore(location: location, schema: noteSchema)
    let helpers = "\"\(location.schema)_helpers\""
    _ = try PostgresTestServer.psql("""
        DROP SCHEMA IF EXISTS \(helpers) CASCADE;
        CREATE SCHEMA \(helpers);
        CREATE SEQUENCE \(helpers).conflicts;
        CREATE SEQUENCE \(helpers).vanished;
        CREATE FUNCTION \(helpers).fail_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.title = 'conflict' AND nextval('\(helpers).conflicts') = 1 THEN
            RAISE EXCEPTION 'a conflict at commit' USING ERRCODE = '40001';
          ELSIF NEW.title = 'refused' THEN
            RAISE EXCEPTION 'refused at commit' USING ERRCODE = '23514';
          ELSIF NEW.title = 'vanish' AND nextval('\(helpers).vanished') = 1 THEN
            PERFORM pg_terminate_backend(pg_backend_pid());
          END IF;
          RETURN NULL;
        END $$;
        CREATE CONSTRAINT TRIGGER fail_at_commit AFTER INSERT ON "\(location.schema)"."Note"
          DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION \(helpers).fail_at_commit();
        """)
    return (store, location, helpers)
}

/// Runs `body` with such a store, then drops it and the trigger's schema.
private func withStoreFailingAtCommit(_ key: String, retries: Int? = nil, _ body: (PostgresStore) throws -> Void) throws {
    let (store, location, helpers) = try storeFailingAtCommit(key, retries: retries)
    defer {
        try? store.close()
        try? PostgresStore.destroy(location)
        _ = try? PostgresTestServer.psql("DROP SCHEMA IF EXISTS \(helpers) CASCADE")
    }
    try body(store)
}

/// Enqueues one block per title (ids from 1) behind a first block that holds the writer until
/// every one is enqueued, so that each block finds the next one waiting; returns what happened.
private func enqueue(_ titles: [String], on store: PostgresStore) throws -> Runs {
    let runs = Runs()
    let gate = DispatchSemaphore(value: 0)
    store.enqueueWrite { w in
        gate.wait()
        try w.insert(["id": 0, "title": "first"], into: "Note")
    }
    for (index, title) in titles.enumerated() {
        let id = Int64(index + 1)
        store.writeAsync({ w in
            runs.ran(id)
            try w.insert(["id": .int(id), "title": .string(title)], into: "Note")
        }, completion: { (result: Result<Void, any Error>) in
            let error: StoreError? = switch result {
            case .success: nil
            case .failure(let failure): failure as? StoreError ?? StoreError(.io, "not a store error: \(failure)")
            }
            runs.told.withLock { $0.append((id, error)) }
        })
    }
    gate.signal()
    try store.waitForPendingWrites()
    return runs
}

private func feedIDs(_ store: PostgresStore, since token: ChangeToken) throws -> [Int64] {
    try store.changes(since: token, limit: 1_000).flatMap(\.items).compactMap { change -> Int64? in
        if case .int(let id) = change.key { return id }
        return nil
    }
}

private func storedIDs(_ store: PostgresStore) throws -> [Int64] {
    try store.read { try $0.fetch(FetchRequest("Note", sort: [.ascending("id")])) }.compactMap { record -> Int64? in
        if case .int(let id) = record["id"] { return id }
        return nil
    }
}

@Test func anEnqueuedBlockWhoseCommitConflictsRunsAgainBeforeTheBlocksAfterIt() throws {
    let dir = try TemporaryDirectory()
    try withStoreFailingAtCommit(dir.url.path) { store in
        let start = try store.currentChangeToken()
        let runs = try enqueue(["a", "b", "conflict", "c", "d", "refused", "e", "f"], on: store)
        let told = runs.told.withLock { $0 }
        #expect(told.map(\.id) == Array(1...8), "callers are told in the order they enqueued")
        for (id, error) in told where id != 6 {
            #expect(error == nil, "block \(id): \(String(describing: error))")
        }
        let refusal = try #require(told.first { $0.id == 6 }?.error)
        #expect(refusal.message.contains("refused at commit"), "\(refusal)")
        // The conflicted commit's block ran again, and so did the block sent after it before its
        // COMMIT was answered; the same for the refused one, which did not run again.
        #expect(runs.count(3) == 2)
        #expect(runs.count(4) == 2)
        #expect(runs.count(6) == 1)
        #expect(runs.count(7) == 2)
        for id: Int64 in [1, 2, 5, 8] { #expect(runs.count(id) == 1, "block \(id)") }
        let committed: [Int64] = [0, 1, 2, 3, 4, 5, 7, 8]
        #expect(try storedIDs(store) == committed)
        #expect(try feedIDs(store, since: start) == committed, "each commit once, in order")
    }
}

@Test func anEnqueuedBlockWhoseConnectionEndsAtCommitLeavesTheBlocksAfterItToCommit() throws {
    let dir = try TemporaryDirectory()
    try withStoreFailingAtCommit(dir.url.path) { store in
        let start = try store.currentChangeToken()
        let runs = try enqueue(["a", "vanish", "b", "c"], on: store)
        let told = runs.told.withLock { $0 }
        #expect(told.map(\.id) == [1, 2, 3, 4])
        // Whether the transaction whose connection ended committed is the server's to say: the
        // caller is told so, or that it committed.
        let vanished = told.first { $0.id == 2 }?.error
        if let vanished {
            #expect(vanished.code == .io && vanished.message.contains("unknown"), "\(vanished)")
        }
        for (id, error) in told where id != 2 {
            #expect(error == nil, "block \(id): \(String(describing: error))")
        }
        let stored = try storedIDs(store)
        #expect(stored == [0, 1, 3, 4] || stored == [0, 1, 2, 3, 4], "\(stored)")
        #expect(try feedIDs(store, since: start) == stored)
        try store.writeSync { try $0.insert(["id": 5, "title": "after"], into: "Note") }
        #expect(try storedIDs(store).last == 5)
    }
}

/// A store that fails a conflicted block rather than running it again (`write_retries=0`) sends
/// its enqueued blocks one commit at a time: no block runs twice.
@Test func withoutRetriesEnqueuedBlocksAreNotSentAheadOfACommit() throws {
    let dir = try TemporaryDirectory()
    try withStoreFailingAtCommit(dir.url.path, retries: 0) { store in
        let runs = try enqueue(["a", "conflict", "b"], on: store)
        let told = runs.told.withLock { $0 }
        #expect(told.map(\.id) == [1, 2, 3])
        #expect(told.first { $0.id == 2 }?.error?.code == .conflict)
        for id: Int64 in 1...3 { #expect(runs.count(id) == 1, "block \(id)") }
        #expect(try storedIDs(store) == [0, 1, 3])
    }
}

/// `waitForPendingWrites()` returns after the callers of every block enqueued before it were
/// told, also when a block enqueued after the wait began lets the one before it leave its
/// `COMMIT` unanswered (the wait comes between them in the queue when its thread is first to
/// give it; either order must hold).
@Test func waitingForPendingWritesWaitsForACommitInFlight() throws {
    let dir = try TemporaryDirectory()
    try withStoreFailingAtCommit(dir.url.path) { store in
        for round in 0..<5 {
            let told = Mutex(false)
            let gate = DispatchSemaphore(value: 0)
            store.enqueueWrite { _ in gate.wait() }
            let id = Int64(round * 10)
            store.writeAsync({ w in
                try w.insert(["id": .int(id + 1), "title": round == 0 ? "conflict" : "a"], into: "Note")
            }, completion: { (_: Result<Void, any Error>) in told.withLock { $0 = true } })
            let waiting = DispatchSemaphore(value: 0)
            let toldWhenWaitEnded = Mutex<Bool?>(nil)
            let waiter = Thread {
                waiting.signal()
                try? store.waitForPendingWrites()
                toldWhenWaitEnded.withLock { $0 = told.withLock { $0 } }
                waiting.signal()
            }
            waiter.start()
            waiting.wait()
            store.enqueueWrite { w in try w.insert(["id": .int(id + 2), "title": "b"], into: "Note") }
            gate.signal()
            waiting.wait()
            #expect(toldWhenWaitEnded.withLock { $0 } == true, "round \(round)")
            try store.waitForPendingWrites()
        }
        #expect(try storedIDs(store).count == 10)
    }
}
#endif
