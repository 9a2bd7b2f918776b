#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
@_spi(Backend) @testable import PostgresStore
import Testing

/// A read's `COMMIT` is sent without waiting for its answer, in the pipeline segment of the
/// statements before it; when one of those whose answer nobody waits for fails (a standby
/// cancels a page asked for ahead, for its replay), the server skips the `COMMIT` and the
/// connection goes back to the pool in a failed transaction. The next read on that connection
/// rolls it back and runs, on the primary and on every read after it, rather than failing with
/// `25P02` ("current transaction is aborted").
@Test func aConnectionLeftInAFailedTransactionIsRolledBackByTheNextRead() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    let schema = Schema(entities: [EntitySchema("Note", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("title", .string),
    ])])
    // One read connection, so that every read runs on the connection the last one left.
    let store = try PostgresStore(location: location, schema: schema, readConnections: 1)
    defer { try? store.close() }
    try store.writeSync { writer in
        try writer.insert(contentsOf: (0..<3).map { ["id": .int(Int64($0)), "title": .string("note \($0)")] }, into: "Note")
    }
    for round in 0..<3 {
        // (The engine's read, whose reader is the transaction itself.)
        let seen = try store.postgres.withReader { reader in
            let transaction = try #require(reader as? PostgresTransaction)
            let notes = try transaction.fetch(FetchRequest("Note"), in: schema.entities[0])
            // A statement of the transaction that fails, its answer not waited for.
            try transaction.session.send("SELECT 1 / 0", wanted: false)
            return notes.count
        }
        #expect(seen == 3, "round \(round)")
        let after = try store.read { try $0.fetch(FetchRequest("Note", sort: [.ascending("id")])) }
        #expect(after.map { $0["id"] } == [.int(0), .int(1), .int(2)], "round \(round)")
    }
    // The writes after them are not held up by a transaction left open on the server.
    try store.writeSync { try $0.insert(["id": 3, "title": "note 3"], into: "Note") }
    #expect(try store.read { try $0.count(FetchRequest("Note")) } == 4)
}
#endif
