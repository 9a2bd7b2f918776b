@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import SQLiteStore
import Testing

/// A writer process commits 1,000 transactions while an observer process follows the feed: it
/// receives every one, in order, with the changes the writer made. The delay between a commit and
/// its delivery is what the README reports.
@Test func anObserverProcessReceivesEveryTransactionOfAWriterProcessInOrder() throws {
    let dir = try TemporaryDirectory()
    let outcome = try CrossProcessFeed.run(kind: "sqlite", path: dir.path("feed.sqlite"), count: 1_000)
    #expect(outcome.received == 1_000, "\(outcome.output)")
    #expect(outcome.inOrder, "\(outcome.output)")
    print("sqlite cross-process feed: \(outcome)")
}

/// A write made with the `sqlite3` shell is not in the feed, but a live query notices it.
@Test func aLiveQueryNoticesAWriteMadeWithTheSQLiteShell() async throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("outside.sqlite")
    let store = try SQLiteStore(path: path, schema: Fixtures.schema)
    defer { try? store.close() }
    try store.writeSync { try $0.insert(["key": "a", "value": 1], into: "Keyed") }
    let head = try store.currentChangeToken()
    var results = store.observe(FetchRequest("Keyed", sort: [.ascending("key")])).makeAsyncIterator()
    #expect(try await results.next()?.map(\.["key"]) == ["a"])
    _ = try runCommand("/usr/bin/sqlite3", [path, "INSERT INTO Keyed (key, value) VALUES ('outside', 2)"])
    let next = try await results.next()
    #expect(next?.map(\.["key"]) == ["a", "outside"])
    #expect(try store.currentChangeToken() == head, "the shell's write is not in the feed")
}
