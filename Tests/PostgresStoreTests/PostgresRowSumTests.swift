#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
@_spi(Backend) @testable import PostgresStore
import Testing

private let itemSchema = Schema(version: 1, entities: [
    EntitySchema("Item", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("name", .string), Attribute("data", .bytes), Attribute("n", .int),
        Attribute("x", .double), Attribute("at", .date), Attribute("u", .uuid), Attribute("flag", .bool),
        Attribute("note", .string, optional: true),
    ]),
])

/// A small store of two items, and its table's quoted name.
private func makeStore(_ dir: TemporaryDirectory) throws -> (PostgresLocation, table: String) {
    let location = PostgresTestServer.location(dir.url.path)
    let store = try PostgresStore(location: location, schema: itemSchema)
    defer { try? store.close() }
    try store.writeSync { writer in
        for id in 1...2 {
            try writer.insert(["id": .int(Int64(id)), "name": "hello wörld \(id)", "data": .bytes([0, 1, 0xFE, 0xFF]),
                               "n": .int(Int64(7 * id)), "x": 1.5, "at": .date(Timestamp(microsecondsSinceEpoch: 1_700_000_000_123_456)),
                               "u": .uuid(UUID(uuidString: "6BA7B810-9DAD-11D1-80B4-00C04FD430C\(id)")!), "flag": true],
                              into: "Item")
        }
    }
    return (location, "\"\(location.schema)\".\"Item\"")
}

/// Every byte of a PostgreSQL row's values, changed under the store (with the server's triggers
/// off, as damage below SQL or a restore gone wrong changes them), is damage: a read of the item
/// is refused with `corrupt` naming it, `check` reports it with the other item read, and
/// nothing crashes; the item reads as it was once the byte is put back. Each value's bytes are
/// flipped one at a time, as the server holds them: each of an int's and a date's 8, a double's
/// 8, each byte of the text and the bytes, a uuid's 16, the bool, an optional null given a
/// value, the primary key's 8, and the checksum's own.
@Test func everyChangedByteOfARowIsRefusedOnReadAndReportedByCheck() throws {
    let dir = try TemporaryDirectory()
    let (location, table) = try makeStore(dir)
    defer { try? PostgresStore.destroy(location) }
    var flips: [(label: String, sql: String)] = []
    func xorInt(_ column: String, where condition: String = "id = 1") {
        for byte in 0..<8 {
            flips.append(("\(column) byte \(byte)", "UPDATE \(table) SET \"\(column)\" = \"\(column)\" # (1::int8 << \(8 * byte)) "
                + "WHERE \(condition)"))
        }
    }
    xorInt("n")
    xorInt("at")
    xorInt("_ds_sum")
    xorInt("id", where: "n = 7")
    let name = Array("hello wörld 1".utf8)
    for byte in name.indices {
        let text = "convert_to(name, 'UTF8')"
        flips.append(("name byte \(byte)", "UPDATE \(table) SET name = convert_from(set_byte(\(text), \(byte), "
            + "get_byte(\(text), \(byte)) # 1), 'UTF8') WHERE id = 1"))
    }
    for byte in 0..<4 {
        flips.append(("data byte \(byte)", "UPDATE \(table) SET data = set_byte(data, \(byte), get_byte(data, \(byte)) # 1) "
            + "WHERE id = 1"))
    }
    for byte in 0..<16 {
        let bytes = "uuid_send(u)"
        flips.append(("uuid byte \(byte)", "UPDATE \(table) SET u = encode(set_byte(\(bytes), \(byte), get_byte(\(bytes), "
            + "\(byte)) # 1), 'hex')::uuid WHERE id = 1"))
    }
    flips.append(("flag", "UPDATE \(table) SET flag = NOT flag WHERE id = 1"))
    flips.append(("note", "UPDATE \(table) SET note = CASE WHEN note IS NULL THEN 'x' END WHERE id = 1"))
    // A double's bytes: 1.5 with each of its bytes changed, and back.
    let bits = (1.5).bitPattern
    for byte in 0..<8 {
        let changed = Double(bitPattern: bits ^ (UInt64(1) << (8 * UInt64(byte))))
        flips.append(("x byte \(byte)", "UPDATE \(table) SET x = CASE WHEN x = 1.5 THEN '\(changed)'::float8 ELSE 1.5 END "
            + "WHERE id = 1"))
    }
    #expect(flips.count == 8 * 4 + name.count + 4 + 16 + 2 + 8)

    let store = try PostgresStore(location: location, schema: nil)
    defer { try? store.close() }
    let path = String(location.description.dropFirst("postgres:".count))
    for (label, sql) in flips {
        // Twice: the change, then the same change again, which puts the byte back.
        let change = "SET session_replication_role = replica; " + sql
        try PostgresTestServer.psql(change)
        do {
            let items = try store.read { try $0.fetch(FetchRequest("Item")) }
            Issue.record("\(label): read \(items.count) items")
        } catch let error as StoreError {
            #expect(error.code == .corrupt && error.message.contains("Item[")
                    && error.message.contains("checksum does not match"), "\(label): \(error)")
        }
        do {
            let report = try PostgresBackend().check(at: path)
            Issue.record("\(label): check passed: \(report.description)")
        } catch let error as StoreError {
            #expect(error.code == .corrupt && error.message.contains("1 damaged record of 2"), "\(label): \(error)")
        }
        try PostgresTestServer.psql(change)
    }
    #expect(try store.read { try $0.fetch(FetchRequest("Item")) }.count == 2)
    #expect(try PostgresBackend().check(at: path).itemsChecked == 2)
}

/// A row changed with `psql` (the server's triggers on) loses its checksum, as a row another
/// program inserts has none: it reads as it is, `check` counts it, and the store's next write
/// of the item gives it a sum again. The store's own updates keep theirs.
@Test func aRowChangedWithPsqlReadsUncheckedUntilTheStoreWritesIt() throws {
    let dir = try TemporaryDirectory()
    let (location, table) = try makeStore(dir)
    defer { try? PostgresStore.destroy(location) }
    let path = String(location.description.dropFirst("postgres:".count))
    let store = try PostgresStore(location: location, schema: nil)
    defer { try? store.close() }
    let unsealed = "SELECT count(*) FROM \(table) WHERE \"_ds_sum\" IS NULL"
    try store.writeSync { _ = try $0.update("Item", key: 1, set: ["n": 8]) }
    #expect(try PostgresTestServer.psql(unsealed) == "0")

    try PostgresTestServer.psql("UPDATE \(table) SET name = 'edited' WHERE id = 2")
    #expect(try PostgresTestServer.psql(unsealed) == "1")
    #expect(try store.read { try $0.get("Item", key: 2) }?["name"] == "edited")
    let report = try PostgresBackend().check(at: path)
    #expect(report.description.contains("1 row written by another program, without a checksum"), "\(report.description)")
    // An update through SQL that changes nothing keeps the sum.
    try PostgresTestServer.psql("UPDATE \(table) SET name = name WHERE id = 1")
    #expect(try PostgresTestServer.psql(unsealed) == "1")

    try store.writeSync { _ = try $0.update("Item", key: 2, set: ["n": 15]) }
    #expect(try PostgresTestServer.psql(unsealed) == "0")
    #expect(try PostgresBackend().check(at: path).description.contains("without a checksum") == false)
}
#endif

#if Postgres
/// A store of format 3 (rows without checksums), as the last version left it. A source's open
/// reads it as it is and writes nothing, and `check` says its rows have no sums yet. The app's
/// next open (here with a schema version that adds an entity, a step that makes a table) adds
/// the column, the trigger and the sum of each of its 2,500 rows (string keys: three pages of
/// the upgrade), then runs its step; every row then reads checked, and a changed byte is refused.
@Test func aStoreOfFormat3GetsItsRowSumsFromTheAppsNextOpen() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path)
    defer { try? PostgresStore.destroy(location) }
    let tag = EntitySchema("Tag", primaryKey: "name", attributes: [
        Attribute("name", .string), Attribute("uses", .int), Attribute("seen", .uuid, optional: true),
    ])
    let first = Schema(version: 1, entities: [tag])
    let stored: Schema
    do {
        let store = try PostgresStore(location: location, schema: first)
        defer { try? store.close() }
        try store.writeSync { writer in
            try writer.insert(contentsOf: (0..<2_500).map { ["name": .string("tag \($0)"), "uses": .int(Int64($0))] },
                              into: "Tag")
        }
        stored = store.schema
    }
    // Back to format 3: no column, trigger or function, the header of that format with its sum.
    let s = "\"\(location.schema)\""
    var header: [(String, [UInt8])] = []
    try StoreHeader.write(stored, format: 3) { header.append(($0, $1)) }
    let updates = header.map { key, value in
        "UPDATE \(s)._ds_meta SET value = decode('" + value.map { String(format: "%02x", $0) }.joined()
            + "', 'hex') WHERE key = '\(key)';"
    }
    try PostgresTestServer.psql("BEGIN; DROP TRIGGER \"_ds_sum\" ON \(s).\"Tag\"; ALTER TABLE \(s).\"Tag\" DROP COLUMN "
        + "\"_ds_sum\"; DROP FUNCTION \(s)._ds_unsum(); " + updates.joined() + " COMMIT;")
    let format = "SELECT convert_from(value, 'UTF8') FROM \(s)._ds_meta WHERE key = 'datastore.format'"
    let path = String(location.description.dropFirst("postgres:".count))

    do {
        let source = try PostgresStore(location: location, schema: nil)
        defer { try? source.close() }
        #expect(try source.read { try $0.count(FetchRequest("Tag")) } == 2_500)
    }
    let before = try PostgresBackend().check(at: path)
    #expect(before.description.contains("no row checksums yet") && before.itemsChecked == 2_500, "\(before.description)")
    #expect(try PostgresTestServer.psql(format) == "3")

    var second = first
    second.version = 2
    second.entities.append(EntitySchema("Note", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("text", .string)]))
    do {
        var upgrades = SchemaUpgrades()
        upgrades.version(2, .addEntity(second.entities[1]))
        let store = try PostgresStore(location: location, schema: second, upgrades: upgrades)
        defer { try? store.close() }
        try store.writeSync { try $0.insert(["id": 1, "text": "noted"], into: "Note") }
        #expect(try store.read { try $0.count(FetchRequest("Tag")) } == 2_500)
    }
    #expect(try PostgresTestServer.psql(format) == "4")
    #expect(try PostgresTestServer.psql("SELECT count(*) FROM \(s).\"Tag\" WHERE \"_ds_sum\" IS NULL") == "0")
    #expect(try PostgresTestServer.psql("SELECT count(*) FROM \(s).\"Note\" WHERE \"_ds_sum\" IS NOT NULL") == "1")
    let after = try PostgresBackend().check(at: path)
    #expect(after.itemsChecked == 2_501 && !after.description.contains("without a checksum")
            && !after.description.contains("no row checksums"), "\(after.description)")

    try PostgresTestServer.psql("SET session_replication_role = replica; UPDATE \(s).\"Tag\" SET uses = uses # 256 "
        + "WHERE name = 'tag 1234'")
    let store = try PostgresStore(location: location, schema: nil)
    defer { try? store.close() }
    #expect {
        try store.read { try $0.fetch(FetchRequest("Tag")) }
    } throws: { error in
        (error as? StoreError)?.code == .corrupt && "\(error)".contains("Tag[tag 1234]")
    }
}
#endif
