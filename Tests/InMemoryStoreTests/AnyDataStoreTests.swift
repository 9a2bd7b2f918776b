import DataStoreAPI
import DataStoreTestSupport
import Foundation
import InMemoryStore
import Testing

/// What the README shows on a store works on `any DataStore`, also one that is not a store of
/// this package: live queries, the change feed, async reads and the schema history.
@Test func observationsFeedsAndAsyncReadsWorkOnAnyDataStore() async throws {
    let store: any DataStore = ForwardingStore(try InMemoryStore(schema: Schema(entities: [
        EntitySchema("Note", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("stars", .int)]),
    ])))
    let token = try store.currentChangeToken()
    var observed = store.observe(FetchRequest("Note", filter: Field("stars") >= 4)).makeAsyncIterator()
    #expect(try await observed.next() == [], "the first delivery: no results yet")
    try store.writeSync { try $0.insert(["id": 1, "stars": 5], into: "Note") }
    #expect(try await observed.next()?.map { $0["id"] } == [1], "a delivery after the commit")
    var feed = store.changes(since: token).makeAsyncIterator()
    #expect(try await feed.next()?.items.map(\.key) == [1])
    #expect(try await store.readAsync { try $0.count(FetchRequest("Note")) } == 1)
    #expect(try store.schemaHistory().isEmpty)
    try store.close()
}
