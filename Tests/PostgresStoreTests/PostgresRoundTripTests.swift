#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
@_spi(Backend) import PostgresStore
import Testing

/// A one-insert `writeSync` is one round trip to the server (the transaction's first
/// statements, the insert, sent without waiting, the feed's entry with the notification, and
/// `COMMIT`), with the change feed on; a taken key still throws `keyExists` from the `insert`
/// call itself, and the transaction goes on after it: the insert of the taken key fails at the
/// server, which rolls the transaction back, and the block runs again, its inserts checked.
@Test func aOneInsertWriteIsOneRoundTripAndATakenKeyThrowsFromTheInsert() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    let schema = Schema(entities: [EntitySchema("Note", primaryKey: "id",
                                                attributes: [Attribute("id", .int), Attribute("text", .string)])])
    let store = try PostgresStore(location: location, schema: schema)
    defer { try? store.close() }
    // (The first write of a new store stores the feed's state, and the second reads it.)
    try store.writeSync { try $0.insert(["id": 0, "text": "warm"], into: "Note") }
    try store.writeSync { try $0.insert(["id": -1, "text": "warm"], into: "Note") }
    var trips: [Int] = []
    for i in 1...20 {
        let before = store.writerRoundTrips
        try store.writeSync { try $0.insert(["id": .int(Int64(i)), "text": "note \(i)"], into: "Note") }
        trips.append(store.writerRoundTrips - before)
    }
    #expect(trips.allSatisfy { $0 == 1 }, "round trips per one-insert writeSync: \(trips)")
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
    // The first run and its rollback, then the run that checks: two inserts and the commit.
    #expect(store.writerRoundTrips - before == 5, "round trips: \(store.writerRoundTrips - before)")
    #expect(try store.read { try $0.fetch(FetchRequest("Note")).count } == 23)

    // A loop of inserts in one transaction: the first run sends them all without waiting and
    // fails at the taken key; in the run that checks, from the third insert on a key past every
    // stored one goes without waiting, and a taken key throws from its own call, the loop going on.
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
    #expect(store.writerRoundTrips - loopStart <= 7, "round trips of 103 inserts: \(store.writerRoundTrips - loopStart)")

    // A taken key inserted without waiting, then a batch by COPY in the same block: the taken
    // key is found before the COPY, and the block's next run throws `keyExists` from the call;
    // the batch after it is stored when the block catches it.
    let caughtBeforeBatch = try store.writeSync { writer -> Bool in
        var caught = false
        do {
            try writer.insert(["id": 4, "text": "taken"], into: "Note")
        } catch let error as StoreError where error.code == .keyExists {
            caught = true
        }
        try writer.insert(contentsOf: (1_000..<1_100).map { ["id": .int(Int64($0)), "text": "batch"] }, into: "Note")
        return caught
    }
    #expect(caughtBeforeBatch)
    #expect(try store.read { try $0.count(FetchRequest("Note")) } == 23 + 101 + 100)
}
#endif
