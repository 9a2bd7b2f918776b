import CSQLite
@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
@_spi(Backend) @testable import SQLiteStore
import Testing

/// Every kind of field, so that a flip lands in an int, a string, a double, bytes, a date, a
/// uuid and a bool.
private let checksumSchema = Schema(entities: [EntitySchema("Item", primaryKey: "id", attributes: [
    Attribute("id", .int), Attribute("name", .string), Attribute("score", .double),
    Attribute("payload", .bytes, optional: true), Attribute("seen", .date, optional: true),
    Attribute("tag", .uuid, optional: true), Attribute("done", .bool), Attribute("note", .string, optional: true),
], indexes: [Index("byName", on: ["name"])])])

private func checksumItem(_ id: Int64) -> Record {
    ["id": .int(id), "name": .string("item \(id) é"), "score": .double(Double(id) / 3),
     "payload": .bytes([0, 1, 2, UInt8(truncatingIfNeeded: id)]),
     "seen": .date(Timestamp(microsecondsSinceEpoch: 1_700_000_000 + id)),
     "tag": .uuid(UUID(uuidString: "5F1C8A52-0B5E-4E0C-9C51-" + String(format: "%012llX", id))!),
     "done": .bool(id % 2 == 0), "note": .null]
}

/// A query's single integer answer, through SQLite's own API.
private func scalar(_ path: String, _ sql: String) throws -> Int64 {
    var db: OpaquePointer?
    try #require(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK)
    defer { sqlite3_close_v2(db) }
    var statement: OpaquePointer?
    try #require(sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK)
    defer { sqlite3_finalize(statement) }
    try #require(sqlite3_step(statement) == SQLITE_ROW)
    return sqlite3_column_int64(statement, 0)
}

/// Runs `sql` on the file through SQLite's own API, as another program would.
private func execute(_ path: String, _ sql: String) throws {
    var db: OpaquePointer?
    try #require(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK)
    defer { sqlite3_close_v2(db) }
    try #require(sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK, "\(sql): \(String(cString: sqlite3_errmsg(db)))")
}

/// The byte ranges of the cells (rowid and record) of a table whose rows all fit on its root
/// page, a leaf of a rowid table, read from the file as SQLite's file format describes it.
private func cells(of table: String, in path: String, file: [UInt8]) throws -> [Range<Int>] {
    let root = Int(try scalar(path, "SELECT rootpage FROM sqlite_master WHERE name = '\(table)'"))
    let pageSize = { $0 == 1 ? 65_536 : $0 }(Int(file[16]) << 8 | Int(file[17]))
    let page = (root - 1) * pageSize
    let header = page + (root == 1 ? 100 : 0)
    try #require(file[header] == 0x0D, "the table's root page is a leaf of a rowid table")
    func varint(_ at: Int) -> (value: Int, length: Int) {
        var value = 0
        for i in 0..<9 {
            let byte = Int(file[at + i])
            if i == 8 { return (value << 8 | byte, 9) }
            value = value << 7 | (byte & 0x7F)
            if byte & 0x80 == 0 { return (value, i + 1) }
        }
        return (value, 9)
    }
    let count = Int(file[header + 3]) << 8 | Int(file[header + 4])
    return (0..<count).map { i in
        let start = page + (Int(file[header + 8 + 2 * i]) << 8 | Int(file[header + 9 + 2 * i]))
        let payload = varint(start)
        let rowid = varint(start + payload.length)
        return start..<(start + payload.length + rowid.length + payload.value)
    }
}

/// Every byte of every row of a small store flipped in turn, in the file: each flip is found by
/// `check` and refused by a fetch of the table and by a visit, with no crash; a point get of the
/// row's key refuses it too, or finds no row when the flip changed the row's key (a fetch then
/// meets the row under its new key and refuses it). Most of these flips leave a well-formed
/// record that SQLite's own checks pass: only the row's checksum tells.
@Test func everyFlippedByteOfARowIsFoundByCheckAndRefusedOnRead() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("store.sqlite")
    let ids: [Int64] = [1, 2, 3]
    do {
        let store = try SQLiteStore(path: path, schema: checksumSchema)
        try store.writeSync { writer in for id in ids { try writer.insert(checksumItem(id), into: "Item") } }
        try store.close()
    }
    try #require(!FileManager.default.fileExists(atPath: path + "-wal"), "the last close checkpointed the WAL")
    #expect(try SQLiteStore.integrityCheck(path: path) == "ok")
    let original = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    let rows = try cells(of: "Item", in: path, file: original)
    #expect(rows.count == 3)
    var (flips, named, sqliteFound) = (0, 0, 0)
    for (number, row) in rows.enumerated() {
        for offset in row {
            var damaged = original
            damaged[offset] ^= 0xFF
            try Data(damaged).write(to: URL(fileURLWithPath: path))
            flips += 1
            let isCorrupt: (any Error) -> Bool = { ($0 as? StoreError)?.code == .corrupt }
            var checkError: (any Error)?
            #expect(performing: { try SQLiteStore.integrityCheck(path: path) }, throws: { error in
                checkError = error
                return isCorrupt(error)
            })
            if let checkError {
                if "\(checkError)".contains("integrity_check found") { sqliteFound += 1 }
                if "\(checkError)".contains("1 damaged record of 3") { named += 1 }
            }
            let store = try SQLiteStore(path: path, schema: nil, options: SQLiteOptions(readOnly: true))
            #expect("byte \(offset - row.lowerBound) of row \(number + 1)",
                    performing: { try store.read { try $0.fetch(FetchRequest("Item")) } }, throws: isCorrupt)
            #expect(performing: { try store.read { try $0.visit(FetchRequest("Item")) { _ in } } }, throws: isCorrupt)
            do {
                let found = try store.read { try $0.get("Item", key: .int(ids[number])) }
                #expect(found == nil, "a damaged row was returned: \(String(describing: found))")
            } catch {
                #expect(isCorrupt(error), "\(error)")
            }
            try store.close()
        }
    }
    #expect(flips == rows.map(\.count).reduce(0, +))
    // Most flips are damage that SQLite's structure checks pass; every one of those is named.
    #expect(named + sqliteFound == flips)
    #expect(named > flips / 2, "\(named) of \(flips) flips named by the rows' checksums")
    // Two damaged rows are both named, in key order.
    var twice = original
    twice[rows[0].upperBound - 12] ^= 0x01
    twice[rows[2].upperBound - 12] ^= 0x01
    try Data(twice).write(to: URL(fileURLWithPath: path))
    #expect(performing: { try SQLiteStore.integrityCheck(path: path) }, throws: { error in
        let text = "\(error)"
        return text.contains("2 damaged records of 3") && text.contains("Item[1]") && text.contains("Item[3]")
            && !text.contains("Item[2]")
    })
    // Rows another program changed (the sqlite3 shell, which cannot compute a sum): the trigger
    // takes the stale sum off, and the rows read with their new values, unchecked; check counts
    // them. A write through the store seals a row again.
    try Data(original).write(to: URL(fileURLWithPath: path))
    try execute(path, "UPDATE Item SET name = 'changed' WHERE id = 2; UPDATE Item SET score = 7.5 WHERE id = 3")
    #expect(try SQLiteStore.integrityCheck(path: path) == "ok; 2 rows written by another program, without a checksum")
    let store = try SQLiteStore(path: path, schema: nil)
    #expect(try store.read { try $0.get("Item", key: 2) }?["name"] == "changed")
    #expect(try store.read { try $0.get("Item", key: 3) }?["score"] == 7.5)
    try store.writeSync { writer in _ = try writer.update("Item", key: 2, set: ["name": "sealed again"]) }
    try store.close()
    #expect(try SQLiteStore.integrityCheck(path: path) == "ok; 1 row written by another program, without a checksum")
}

/// A store of format 1 (no checksum column) reads as it did when opened read-only; a writable
/// open adds and fills the column in one transaction; schema steps keep the sums right (a new
/// optional attribute, one with a default, a removed one, a changed type, a renamed one); a row
/// another program inserts without a sum is read as it is, and counted by `check`.
@Test func aStoreWithoutRowChecksumsIsUpgradedAndSchemaStepsKeepTheSums() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("old.sqlite")
    let ids: [Int64] = Array(1...500)
    do {
        let store = try SQLiteStore(path: path, schema: checksumSchema)
        try store.writeSync { writer in for id in ids { try writer.insert(checksumItem(id), into: "Item") } }
        try store.close()
    }
    try execute(path, "DROP TRIGGER \"_ds_sum.Item\"; ALTER TABLE Item DROP COLUMN _ds_sum; "
        + "UPDATE _ds_meta SET value = CAST('1' AS BLOB) WHERE key = 'datastore.format'; "
        // The schema's JSON without its NUL byte and checksum, as format 1 wrote it.
        + "UPDATE _ds_meta SET value = substr(value, 1, length(value) - 5) WHERE key = 'datastore.schema'")
    do {
        let store = try SQLiteStore(path: path, schema: nil, options: SQLiteOptions(readOnly: true))
        #expect(try store.read { try $0.fetch(FetchRequest("Item")) } == ids.map(checksumItem))
        try store.close()
    }
    #expect(try SQLiteStore.integrityCheck(path: path) == "ok")
    var store = try SQLiteStore(path: path, schema: checksumSchema)
    #expect(try store.read { try $0.fetch(FetchRequest("Item")) } == ids.map(checksumItem))
    try store.close()
    #expect(try scalar(path, "SELECT count(*) FROM Item WHERE _ds_sum IS NULL") == 0)
    #expect(try SQLiteStore.integrityCheck(path: path) == "ok")
    // Schema steps, each checked by a full read and a check.
    let steps: [SchemaStep] = [
        .addAttribute(entity: "Item", attribute: Attribute("extra", .string, optional: true)),
        .addAttribute(entity: "Item", attribute: Attribute("rank", .int, default: .int(3))),
        .removeAttribute(entity: "Item", name: "payload"),
        .changeType(entity: "Item", attribute: "done", to: .int),
        .renameAttribute(entity: "Item", from: "name", to: "title"),
    ]
    var schema = checksumSchema
    for (number, step) in steps.enumerated() {
        var upgrades = SchemaUpgrades()
        let version = schema.version + 1
        upgrades.version(version, step)
        let next = try SchemaPlan([.init(version, [step])]).target(from: schema)
        store = try SQLiteStore(path: path, schema: next, upgrades: upgrades)
        #expect(try store.read { try $0.count(FetchRequest("Item")) } == ids.count, "step \(number)")
        #expect(try store.read { try $0.fetch(FetchRequest("Item")) }.count == ids.count, "step \(number)")
        try store.close()
        #expect(try SQLiteStore.integrityCheck(path: path) == "ok", "step \(number)")
        schema = next
    }
    // A row inserted by another program, without a sum: read as it is, counted by check.
    try execute(path, "INSERT INTO Item (id, title, score, done, rank) VALUES (9999, 'outside', 1.0, 1, 3)")
    #expect(try SQLiteStore.integrityCheck(path: path) == "ok; 1 row written by another program, without a checksum")
    store = try SQLiteStore(path: path, schema: nil)
    #expect(try store.read { try $0.get("Item", key: 9999) }?["title"] == "outside")
    try store.close()
}

/// Every byte of a change-feed entry changed in turn, as another program would change it (the
/// entry read, one byte flipped, written back with SQL): each change makes a read of the feed
/// fail naming the transaction (as damage; a damaged version byte as a version this code does
/// not know), and the entries around it still read.
@Test func everyFlippedByteOfAFeedEntryIsDamageNamingTheTransaction() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("feed.sqlite")
    let store = try SQLiteStore(path: path, schema: checksumSchema)
    defer { try? store.close() }
    let start = try store.read { try $0.changeToken() }
    for id in Int64(1)...3 { try store.writeSync { try $0.insert(checksumItem(id), into: "Item") } }
    let all = try store.read { try $0.changes(since: start) }
    #expect(all.count == 3)
    let sequence = all[1].token.sequence
    let length = Int(try scalar(path, "SELECT length(entry) FROM _ds_feed WHERE seq = \(sequence)"))
    #expect(length > 20)
    for offset in 1...length {
        let original = try entryBytes(path, sequence)
        var damaged = original
        damaged[offset - 1] ^= 0xFF
        try setEntry(path, sequence, damaged)
        // A damaged version byte reads as a version this code does not know.
        let code: StoreError.Code = offset == 1 ? .incompatibleFormat : .corrupt
        #expect(performing: { try store.read { try $0.changes(since: start) } }, throws: { error in
            (error as? StoreError)?.code == code && "\(error)".contains("transaction \(sequence)")
        })
        #expect(try store.read { try $0.changes(since: all[1].token) }.map(\.token) == [all[2].token])
        try setEntry(path, sequence, original)
    }
    #expect(try store.read { try $0.changes(since: start) }.map(\.token) == all.map(\.token))
}

private func entryBytes(_ path: String, _ sequence: UInt64) throws -> [UInt8] {
    var db: OpaquePointer?
    try #require(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK)
    defer { sqlite3_close_v2(db) }
    var statement: OpaquePointer?
    try #require(sqlite3_prepare_v2(db, "SELECT entry FROM _ds_feed WHERE seq = \(sequence)", -1, &statement, nil)
        == SQLITE_OK)
    defer { sqlite3_finalize(statement) }
    try #require(sqlite3_step(statement) == SQLITE_ROW)
    let count = Int(sqlite3_column_bytes(statement, 0))
    return Array(UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, 0), count: count))
}

private func setEntry(_ path: String, _ sequence: UInt64, _ bytes: [UInt8]) throws {
    try execute(path, "UPDATE _ds_feed SET entry = X'" + bytes.map { String(format: "%02x", $0) }.joined()
        + "' WHERE seq = \(sequence)")
}

/// Every pattern of nulls among a row's optional fields (before a text or a blob, between
/// numbers, trailing), with sums written by the insert and, after a schema step, by SQLite's own
/// function: each row visited reads back as it was stored, none is taken for damage; one byte
/// changed in each kind of field is.
@Test func everyPatternOfNullsReadsBackThroughAVisit() throws {
    let entity = EntitySchema("Mixed", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("a", .int, optional: true), Attribute("text", .string, optional: true),
        Attribute("b", .double, optional: true), Attribute("blob", .bytes, optional: true),
        Attribute("tag", .uuid, optional: true), Attribute("c", .bool, optional: true),
    ])
    let optional = ["a", "text", "b", "blob", "tag", "c"]
    func item(_ mask: Int) -> Record {
        let values: [String: Value] = [
            "a": .int(Int64(mask) - 40), "text": .string("t\(mask) é"), "b": .double(Double(mask) / 7),
            "blob": .bytes((0..<mask).map { UInt8(truncatingIfNeeded: $0 &* 37) }),
            "tag": .uuid(UUID(uuidString: "5F1C8A52-0B5E-4E0C-9C51-" + String(format: "%012llX", mask))!),
            "c": .bool(mask % 3 == 0),
        ]
        var record: Record = ["id": .int(Int64(mask))]
        for (bit, name) in optional.enumerated() { record[name] = mask & (1 << bit) != 0 ? values[name]! : .null }
        return record
    }
    let masks = Array(0..<(1 << optional.count))
    let dir = try TemporaryDirectory()
    let path = dir.path("nulls.sqlite")
    func visited(_ store: SQLiteStore) throws -> [Record] {
        var rows: [Record] = []
        try store.read { try $0.visit(FetchRequest("Mixed")) { rows.append($0.record()) } }
        return rows
    }
    var schema = Schema(entities: [entity])
    do {
        let store = try SQLiteStore(path: path, schema: schema)
        try store.writeSync { writer in for mask in masks { try writer.insert(item(mask), into: "Mixed") } }
        #expect(try visited(store) == masks.map(item))
        try store.close()
    }
    #expect(try scalar(path, "SELECT count(*) FROM Mixed WHERE _ds_sum IS NULL") == 0)
    // A step that writes every row's sum again with the SQL function.
    let step = SchemaStep.addAttribute(entity: "Mixed", attribute: Attribute("rank", .int, default: .int(5)))
    var upgrades = SchemaUpgrades()
    upgrades.version(schema.version + 1, step)
    schema = try SchemaPlan([.init(schema.version + 1, [step])]).target(from: schema)
    let store = try SQLiteStore(path: path, schema: schema, upgrades: upgrades)
    #expect(try visited(store) == masks.map { mask in
        var record = item(mask)
        record["rank"] = .int(5)
        return record
    })
    try store.close()
    // One value changed behind the store's back, keeping the row's sum (the trigger is dropped
    // first): the visit refuses the row, in each kind of field.
    try execute(path, "DROP TRIGGER \"_ds_sum.Mixed\"")
    let changes = ["a = a + 1", "text = 'x' || text", "b = b + 1", "blob = X'00' || blob", "tag = randomblob(16)",
                   "c = 1 - c"]
    for (bit, change) in changes.enumerated() {
        // A row whose changed field is not null, with a null before or after it.
        let mask = 63 & ~(1 << ((bit + 1) % changes.count))
        try execute(path, "UPDATE Mixed SET \(change) WHERE id = \(mask)")
        let damaged = try SQLiteStore(path: path, schema: nil, options: SQLiteOptions(readOnly: true))
        #expect("\(change)", performing: { try visited(damaged) }, throws: { ($0 as? StoreError)?.code == .corrupt })
        try damaged.close()
        try execute(path, "UPDATE Mixed SET _ds_sum = NULL WHERE id = \(mask)")
    }
}

/// The fields an insert of a model writes (``StoredFieldBuffer``, whose appends are inlined into
/// the code `@StoredModel` generates, into a buffer that starts small and grows) are byte for
/// byte a compact record's (``FieldWriter``), and their sum, taken in one call, equals the sum of
/// the same values as a record (``SQLiteRowSum/sum(_:)``): handed over as values and in the typed
/// forms, on rows of every kind of value, nulls among and after them, and texts and blobs whose
/// lengths take one to three bytes.
@Test func aModelsFieldBufferSumsAsTheRecordIsSummedAsItGrows() throws {
    var rng = SystemRandomNumberGenerator()
    let lengths = [0, 1, 7, 8, 9, 63, 64, 100, 116, 117, 118, 127, 128, 129, 200, 300, 1_000, 16_384, 20_000]
    func value() -> Value {
        switch Int.random(in: 0..<9, using: &rng) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .int(Int64.random(in: .min ... .max, using: &rng))
        case 3: return .double(Double.random(in: -1e9...1e9, using: &rng))
        case 4: return .date(Timestamp(microsecondsSinceEpoch: Int64.random(in: .min ... .max, using: &rng)))
        case 5: return .uuid(UUID())
        case 6: return .string(String(repeating: "é", count: lengths.randomElement(using: &rng)! / 2))
        default: return .bytes((0..<lengths.randomElement(using: &rng)!).map { _ in UInt8.random(in: 0...255, using: &rng) })
        }
    }
    for round in 0..<2_000 {
        var values = (0..<Int.random(in: 0...14, using: &rng)).map { _ in value() }
        if round % 5 == 0 { values += [.null, .null] }
        // Each value as a ``Value``, and in the typed forms an insert of a model uses, into
        // buffers that start small enough to grow.
        let capacity = Int.random(in: 1...64, using: &rng)
        var plain = StoredFieldBuffer(base: StoredFieldBuffer.allocate(capacity: capacity), capacity: capacity)
        var typed = StoredFieldBuffer(base: StoredFieldBuffer.allocate(capacity: capacity), capacity: capacity)
        defer {
            plain.base.deallocate()
            typed.base.deallocate()
        }
        for value in values {
            try plain.append(value)
            switch value {
            case .int(let i): try typed.appendInt(i)
            case .double(let d): try typed.appendDouble(d)
            case .string(let s): try typed.appendString(s)
            case .bytes(let b): try b.withUnsafeBytes { try typed.appendBytes($0) }
            default: try typed.append(value)
            }
        }
        var expected: [UInt8] = []
        var expectedEnd = 0
        for value in values {
            var field = [UInt8](repeating: 0, count: FieldWriter.size(of: value))
            _ = field.withUnsafeMutableBytes { FieldWriter.write(value, at: $0.baseAddress!) }
            expected += field
            if value != .null { expectedEnd = expected.count }
        }
        for buffer in [plain, typed] {
            #expect(Array(UnsafeRawBufferPointer(start: buffer.base, count: buffer.used)) == expected, "\(values)")
            #expect(buffer.count == values.count && buffer.end == expectedEnd && !buffer.oversized)
        }
        #expect(plain.sum == SQLiteRowSum.sum(RecordValues(values)), "\(values)")
        #expect(typed.sum == plain.sum, "\(values)")
    }
}
