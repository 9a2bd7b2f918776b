#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
@_spi(Backend) import PostgresStore
import Testing

/// A one-insert `writeSync` is two round trips to the server (the transaction's first
/// statements go with the insert, the feed's entry and the notification with `COMMIT`), with
/// the change feed on; a taken key still throws `keyExists` from the `insert` call itself, and
/// the transaction goes on after it.
@Test func aOneInsertWriteIsTwoRoundTripsAndATakenKeyThrowsFromTheInsert() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    let schema = Schema(entities: [EntitySchema("Note", primaryKey: "id",
                                                attributes: [Attribute("id", .int), Attribute("text", .string)])])
    let store = try PostgresStore(location: location, schema: schema)
    defer { try? store.close() }
    try store.writeSync { try $0.insert(["id": 0, "text": "warm"], into: "Note") }
    var trips: [Int] = []
    for i in 1...20 {
        let before = store.writerRoundTrips
        try store.writeSync { try $0.insert(["id": .int(Int64(i)), "text": "note \(i)"], into: "Note") }
        trips.append(store.writerRoundTrips - before)
    }
    #expect(trips.allSatisfy { $0 == 2 }, "round trips per one-insert writeSync: \(trips)")
    let before = store.writerRoundTrips
    let thrownByInsert = try store.writeSync { writer -> Bool in
        do {
            try writer.insert(["id": 3, "text": "again"], into: "Note")
            return false
        } catch let error as StoreError where error.code == .keyExists {
            try writer.insert(["id": 100, "text": "after the refusal"], into: "Note")
            return true
        }
    }
    #expect(thrownByInsert)
    #expect(store.writerRoundTrips - before == 3, "two inserts and the commit")
    #expect(try store.read { try $0.fetch(FetchRequest("Note")).count } == 22)

    // A loop of inserts in one transaction: from the third, a key past every stored one goes
    // without waiting; a taken key still throws from its own call, and the loop goes on.
    let loopStart = store.writerRoundTrips
    let refused = try store.writeSync { writer -> [Int64] in
        var refused: [Int64] = []
        for id in Array(200..<300) + [5, 250, 300] {
            do {
                try writer.insert(["id": .int(Int64(id)), "text": "loop \(id)"], into: "Note")
            } catch let error as StoreError where error.code == .keyExists {
                refused.append(Int64(id))
            }
        }
        return refused
    }
    #expect(refused == [5, 250], "\(refused)")
    #expect(store.writerRoundTrips - loopStart <= 5, "round trips of 103 inserts: \(store.writerRoundTrips - loopStart)")
    #expect(try store.read { try $0.count(FetchRequest("Note")) } == 22 + 101)
}
#endif
