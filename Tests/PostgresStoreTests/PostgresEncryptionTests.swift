#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
@_spi(Backend) import PostgresStore
import Testing

/// An encrypted PostgreSQL store: the client seals every value that no index covers, so the
/// server's tables (read through `pg_dump`, as anyone with access to the server could) never
/// hold one, and filters on sealed attributes are answered by the store.

private let ledgerSchema = Schema(entities: [
    EntitySchema("Entry", primaryKey: "id", attributes: [
        Attribute("id", .int),
        Attribute("account", .string),
        Attribute("memo", .string),
        Attribute("amount", .double),
        Attribute("receipt", .bytes, optional: true),
    ], indexes: [Index("byAccount", on: ["account"])]),
])

private let key = try! StoreKey(rawKey: (0..<32).map { UInt8(99 &+ $0) })

@Test func thePostgreSQLTablesOfAnEncryptedStoreHoldNoValueThatIsNotIndexed() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.path("ledger"))
    try? PostgresStore.destroy(location)
    defer { try? PostgresStore.destroy(location) }
    let store = try PostgresStore(location: location, schema: ledgerSchema, key: key)
    try store.writeSync { writer in
        for i in 1...50 {
            try writer.insert(["id": .int(Int64(i)), "account": .string("acct-\(i % 4)"),
                               "memo": .string("payment to Ximena Fortescue-Dalrymple #\(i)"), "amount": 1234.5,
                               "receipt": .bytes(Array("RECEIPT-SCAN-\(i)".utf8))], into: "Entry")
        }
        try writer.setMetadata(Array("last memo: Fortescue-Dalrymple".utf8), forKey: "app.last")
    }
    _ = try store.writeSync { try $0.update("Entry", key: 7, set: ["memo": "refund from Fortescue-Dalrymple"]) }

    let dump = try runCommand("/usr/bin/pg_dump", ["-h", PostgresTestServer.host, "-U", "postgres", "-d", "datastore",
                                                   "--data-only", "--schema", location.schema])
    #expect(dump.contains("acct-1"), "the dump holds the store's rows (and the indexed attribute in the clear)")
    for secret in ["Fortescue", "Ximena", "RECEIPT-SCAN", "1234.5"] {
        #expect(!dump.contains(secret), "\(secret) is in the server's tables")
    }
    // The bytes of a value as PostgreSQL prints a bytea (hex), too.
    let hex = Array("Fortescue".utf8).map { String(format: "%02x", $0) }.joined()
    #expect(!dump.contains(hex))

    // Filters on sealed attributes and sorts by them are answered over the opened values.
    let refunds = try store.read { try $0.fetch(FetchRequest("Entry", filter: .hasPrefix("memo", "refund"))) }
    #expect(refunds.map { $0["id"] } == [.int(7)])
    let sorted = try store.read {
        try $0.fetch(FetchRequest("Entry", filter: .compare("account", .equal, "acct-3"),
                                  sort: [SortKey("memo", ascending: false)], limit: 2))
    }
    #expect(sorted.map { $0["id"] } == [.int(7), .int(47)])
    try store.close()

    // A wrong key is wrongKey; no key says the store is encrypted.
    let wrong = #expect(throws: StoreError.self) {
        try PostgresStore(location: location, schema: ledgerSchema, key: StoreKey(rawKey: [UInt8](repeating: 1, count: 32)))
    }
    #expect(wrong?.code == .wrongKey)
    let none = #expect(throws: StoreError.self) { try PostgresStore(location: location, schema: ledgerSchema) }
    #expect(none?.code == .wrongKey)
    // Dropping it needs no key (its header names its tables), and leaves nothing.
    try PostgresStore.destroy(location)
    #expect(try runCommand("/usr/bin/psql", ["-h", PostgresTestServer.host, "-U", "postgres", "-d", "datastore", "-At",
                                             "-c", "SELECT count(*) FROM pg_namespace WHERE nspname = '\(location.schema)'"])
        .trimmingCharacters(in: .whitespacesAndNewlines) == "0")
}

/// Every byte of one item's sealed values changed in turn in the server's table (as a byte
/// damaged on its disk, or changed by anyone with access to the server): each change is refused
/// by the client naming the item, the other item still reads, and the original bytes read again.
/// (Damage to a plain store's pages is the server's to find: `initdb --data-checksums`.)
@Test func everyChangedByteOfASealedValueOnTheServerIsRefused() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.path("flips"))
    try? PostgresStore.destroy(location)
    defer { try? PostgresStore.destroy(location) }
    let store = try PostgresStore(location: location, schema: ledgerSchema, key: key)
    defer { try? store.close() }
    try store.writeSync { writer in
        for i in 1...2 {
            try writer.insert(["id": .int(Int64(i)), "account": "acct", "memo": .string("memo \(i)"), "amount": 1.5,
                               "receipt": .bytes([1, 2, 3])], into: "Entry")
        }
    }
    let table = "\"\(location.schema)\".\"Entry\""
    let psql = PostgresTestServer.psql
    let length = try #require(Int(try psql("SELECT length(_ds_sealed) FROM \(table) WHERE id = 1")))
    #expect(length > 29)
    func flip(_ index: Int) -> String {
        "UPDATE \(table) SET _ds_sealed = set_byte(_ds_sealed, \(index), get_byte(_ds_sealed, \(index)) # 1) WHERE id = 1;"
    }
    var refused = 0
    for index in 0..<length {
        // The previous byte put back and this one changed, in one transaction.
        _ = try psql("BEGIN;" + (index > 0 ? flip(index - 1) : "") + flip(index) + "COMMIT;")
        let error = #expect(throws: StoreError.self) { try store.read { try $0.get("Entry", key: 1) } }
        if error?.code == .corrupt, error?.message.contains("Entry[1]") == true { refused += 1 }
        #expect(try store.read { try $0.get("Entry", key: 2) }?["memo"] == "memo 2")
    }
    #expect(refused == length)
    _ = try psql(flip(length - 1))
    #expect(try store.read { try $0.get("Entry", key: 1) }?["memo"] == "memo 1")
}
#endif
