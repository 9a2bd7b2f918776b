@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import LMDBStore
import Testing

/// A writer process commits 1,000 transactions while an observer process follows the feed: it
/// receives every one, in order, with the changes the writer made. The delay between a commit and
/// its delivery is what the README reports.
@Test func anObserverProcessReceivesEveryTransactionOfAWriterProcessInOrder() throws {
    let dir = try TemporaryDirectory()
    let outcome = try CrossProcessFeed.run(kind: "lmdb", path: dir.path("feed.lmdb"), count: 1_000)
    #expect(outcome.received == 1_000, "\(outcome.output)")
    #expect(outcome.inOrder, "\(outcome.output)")
    print("lmdb cross-process feed: \(outcome)")
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
