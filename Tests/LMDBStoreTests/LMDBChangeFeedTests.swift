@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import LMDBStore
import Testing

/// A writer process commits 1,000 transactions while an observer process follows the feed: it
/// receives every one, in order, with the changes the writer made. The delay between a commit and
/// its delivery is what the README reports.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func anObserverProcessReceivesEveryTransactionOfAWriterProcessInOrder() throws {
    let dir = try TemporaryDirectory()
    let outcome = try CrossProcessFeed.run(kind: "lmdb", path: dir.path("feed.lmdb"), count: 1_000)
    #expect(outcome.received == 1_000, "\(outcome.output)")
    #expect(outcome.inOrder, "\(outcome.output)")
    print("lmdb cross-process feed: \(outcome)")
}

/// Another process's commits reach an observer from the kernel's report of a write to the
/// store's file, with no polling: every transaction arrives, in order, and sooner than by
/// polling every 5 ms (the figures are printed; the README reports them).
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func lmdbCommitsReachAnObserverProcessByNotificationAndByPolling() throws {
    let dir = try TemporaryDirectory()
    let (notified, polled) = try CrossProcessFeed.notificationsAndPolling(kind: "lmdb") { dir.path("\($0).lmdb") }
    #expect(notified.received == 200 && notified.inOrder && notified.notified, "\(notified.output)")
    #expect(polled.received == 200 && polled.inOrder && !polled.notified, "\(polled.output)")
    print("lmdb commit to another process's observer: notified: \(notified); polling: \(polled)")
}

/// A write made with `mdb_load` (an earlier dump of the entity loaded back) is not in the feed,
/// but a live query notices it.
@Test func aLiveQueryNoticesAWriteMadeWithMDBLoad() async throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("outside.lmdb")
    let store = try LMDBStore(path: path, schema: Fixtures.schema)
    defer { try? store.close() }
    try store.writeSync { w in
        try w.insert(["key": "a", "value": 1], into: "Keyed")
        try w.insert(["key": "b", "value": 2], into: "Keyed")
    }
    let dump = dir.path("keyed.dump")
    _ = try runCommand("/usr/bin/mdb_dump", ["-s", "e.Keyed", "-f", dump, path])
    try store.writeSync { try $0.delete("Keyed", key: "b") }
    let head = try store.currentChangeToken()
    var results = store.observe(FetchRequest("Keyed", sort: [.ascending("key")])).makeAsyncIterator()
    #expect(try await results.next()?.map(\.["key"]) == ["a"])
    _ = try runCommand("/usr/bin/mdb_load", ["-s", "e.Keyed", "-f", dump, path])
    let next = try await results.next()
    #expect(next?.map(\.["key"]) == ["a", "b"])
    #expect(try store.currentChangeToken() == head, "mdb_load's write is not in the feed")
}

/// The feed's bounds are the first and last entry keys in `_ds_meta`: a store that holds entries
/// past the retention's batch, written by a recorded transaction each, keeps the bound exact;
/// a damaged entry key (loaded with `mdb_load`) is a `corrupt` error naming it, for readers and
/// writers alike, and the items stored before stay readable.
@Test func aDamagedFeedEntryKeyIsACorruptErrorThatNamesIt() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("feedkeys.lmdb")
    var store = try LMDBStore(path: path, schema: Fixtures.schema)
    try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(retainedTransactions: 3)) }
    for i in 1...5 { try store.writeSync { try $0.insert(["key": .string("k\(i)")], into: "Keyed") } }
    let head = try store.currentChangeToken()
    #expect(head.sequence == 5)
    #expect(try store.changes(since: ChangeToken(store: head.store, sequence: 2), limit: 10).map(\.sequence) == [3, 4, 5])
    try store.close()
    let bad = dir.path("bad.txt")
    try "datastore.feed.00000000000000zz\nx\n".write(toFile: bad, atomically: true, encoding: .utf8)
    _ = try runCommand("/usr/bin/mdb_load", ["-T", "-s", "_ds_meta", "-f", bad, path])
    store = try LMDBStore(path: path, schema: Fixtures.schema)
    defer { try? store.close() }
    expectFeedRefused(store, since: ChangeToken(store: head.store, sequence: 4), .corrupt,
                      naming: "datastore.feed.00000000000000zz", items: 5)
}

/// Reading the feed from `token` and writing one item both fail with `code`, naming `naming`;
/// the store's `items` stay readable.
func expectFeedRefused(_ store: any DataStore, since token: ChangeToken, _ code: StoreError.Code, naming: String,
                       items: Int, sourceLocation: SourceLocation = #_sourceLocation) {
    for attempt in ["reading the feed", "writing"] {
        do {
            if attempt == "writing" {
                try store.writeSync { try $0.insert(["key": "refused"], into: "Keyed") }
            } else {
                _ = try store.changes(since: token, limit: 10)
            }
            Issue.record("\(attempt) should fail with \(code)", sourceLocation: sourceLocation)
        } catch let error as StoreError {
            #expect(error.code == code, "\(attempt): \(error)", sourceLocation: sourceLocation)
            #expect(error.message.contains(naming), "\(attempt): \(error)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("\(attempt): \(error)", sourceLocation: sourceLocation)
        }
    }
    #expect((try? store.read { try $0.count(FetchRequest("Keyed")) }) == items, sourceLocation: sourceLocation)
}

/// A state an earlier version left on LMDB: version 1, with a `next` that stopped at the first
/// commit (LMDB wrote the state at every commit then, and the entries' keys are what count now).
/// The next recorded commit numbers on from the entries and rewrites the state as version 3;
/// the version checks themselves are a conformance case.
@Test func aVersion1StateWithAStaleNextNumbersOnFromTheEntries() throws {
    let dir = try TemporaryDirectory()
    let store = try LMDBStore(path: dir.path("version.lmdb"), schema: Fixtures.schema)
    defer { try? store.close() }
    for i in 1...3 { try store.writeSync { try $0.insert(["key": .string("k\(i)")], into: "Keyed") } }
    let first = try store.currentChangeToken()
    func stateBytes() throws -> [UInt8]? { try store.engine.withReader { try $0.metadata(forKey: "datastore.feed") } }
    guard var bytes = try stateBytes() else {
        Issue.record("no feed state")
        return
    }
    bytes[0] = 1
    bytes.removeLast(4)  // version 1 had no checksum
    withUnsafeBytes(of: UInt64(2).littleEndian) { bytes.replaceSubrange(17..<25, with: $0) }
    try store.engine.withWriter { try $0.setMetadata(bytes, forKey: "datastore.feed") }
    try store.writeSync { try $0.insert(["key": "k4"], into: "Keyed") }
    #expect(try stateBytes()?.first == 3, "the state is rewritten as version 3")
    #expect(try store.currentChangeToken().sequence == 4)
    #expect(try store.changes(since: ChangeToken(store: first.store, sequence: 1), limit: 10).map(\.sequence) == [2, 3, 4])
}
