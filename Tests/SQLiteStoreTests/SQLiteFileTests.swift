@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
@_spi(Backend) @testable import SQLiteStore
import Testing

let itemSchema = Schema(entities: [
    EntitySchema("Item", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("name", .string), Attribute("score", .int, optional: true),
        Attribute("ratio", .double, optional: true),
    ], indexes: [Index("byName", on: ["name"]), Index("byScore", on: ["score"], unique: true)]),
])

func seed(_ store: any DataStore, _ count: Int) throws {
    try store.writeSync { w in
        for i in 0..<count {
            try w.insert(["id": .int(Int64(i)), "name": .string("name\(i % 10)"), "score": .int(Int64(i)),
                          "ratio": .double(Double(i) / 3)], into: "Item")
        }
    }
}

@Test func theFileIsAnOrdinaryDatabaseTheSQLiteCLIReads() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("app.sqlite")
    let store = try SQLiteStore(path: path, schema: itemSchema)
    try seed(store, 250)
    try store.close()
    #expect(try runCommand("/usr/bin/sqlite3", [path, "PRAGMA integrity_check"]) == "ok\n")
    #expect(try runCommand("/usr/bin/sqlite3", [path, ".tables"]).split(whereSeparator: \.isWhitespace)
        == ["Item", "_ds_feed", "_ds_meta"])
    // The change feed's entries, one row per recorded transaction, numbered from 1.
    #expect(try runCommand("/usr/bin/sqlite3", [path, "SELECT min(seq), count(*) = max(seq) FROM _ds_feed"]) == "1|1\n")
    #expect(try runCommand("/usr/bin/sqlite3", [path, "SELECT count(*), max(score) FROM Item"]) == "250|249\n")
    #expect(try runCommand("/usr/bin/sqlite3", [path, "SELECT name FROM Item WHERE id = 13"]) == "name3\n")
    let indexes = try runCommand("/usr/bin/sqlite3", [path, "SELECT name FROM sqlite_master WHERE type = 'index' ORDER BY name"])
    #expect(indexes.contains("Item.byName") && indexes.contains("Item.byScore"))
    #expect(try runCommand("/usr/bin/sqlite3", [path, "PRAGMA journal_mode"]) == "wal\n")
}

@Test func aQueryOnAnIndexedAttributeUsesTheIndex() throws {
    let dir = try TemporaryDirectory()
    let engine = try SQLiteEngine(path: dir.path("plan.sqlite"), schema: itemSchema)
    let store = try Store(engine: engine)
    try seed(store, 100)
    let equality = try engine.queryPlan(FetchRequest("Item", filter: Field("name") == "name3"))
    #expect(equality.contains { $0.contains("USING INDEX") && $0.contains("Item.byName") }, "\(equality)")
    let range = try engine.queryPlan(FetchRequest("Item", filter: Field("score") > 50 && Field("score") <= 60))
    #expect(range.contains { $0.contains("Item.byScore") }, "\(range)")
    let prefix = try engine.queryPlan(FetchRequest("Item", filter: Field("name").hasPrefix("name1")))
    #expect(prefix.contains { $0.contains("Item.byName") }, "\(prefix)")
    let sorted = try engine.queryPlan(FetchRequest("Item", sort: [.ascending("name")], limit: 5))
    #expect(sorted.contains { $0.contains("Item.byName") }, "\(sorted)")
    try store.close()
}

@Test func readersAreNotBlockedByALongWrite() throws {
    let dir = try TemporaryDirectory()
    let store = try SQLiteStore(path: dir.path("long.sqlite"), schema: itemSchema)
    try seed(store, 10)
    let writing = DispatchSemaphore(value: 0)
    let finish = DispatchSemaphore(value: 0)
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        _ = try? store.writeSync { w in
            try w.insert(["id": 1000, "name": "new"], into: "Item")
            writing.signal()
            finish.wait()
        }
        done.signal()
    }
    writing.wait()
    let started = Date()
    let count = try store.read { try $0.count(FetchRequest("Item")) }
    #expect(count == 10, "the read sees the last committed state")
    #expect(Date().timeIntervalSince(started) < 2, "the read did not wait for the writer")
    finish.signal()
    done.wait()
    #expect(try store.read { try $0.count(FetchRequest("Item")) } == 11)
    try store.close()
}

@Test func badFilesGetClearErrorsAndAreNotModified() throws {
    let dir = try TemporaryDirectory()
    let random = dir.path("random.sqlite")
    let bytes = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7919) })
    try bytes.write(to: URL(fileURLWithPath: random))
    #expect(throws: StoreError.self) { try SQLiteStore(path: random, schema: itemSchema) }
    do {
        _ = try SQLiteStore(path: random, schema: nil)
    } catch let error as StoreError {
        #expect(error.code == .notAStore && error.message.contains(random), "\(error)")
    }
    #expect(try Data(contentsOf: URL(fileURLWithPath: random)) == bytes, "the file is untouched")

    let plain = dir.path("plain.sqlite")
    _ = try runCommand("/usr/bin/sqlite3", [plain, "CREATE TABLE users(id INTEGER PRIMARY KEY)"])
    do {
        _ = try SQLiteStore(path: plain, schema: itemSchema)
        Issue.record("a plain SQLite database opened as a store")
    } catch let error as StoreError {
        #expect(error.code == .notAStore && error.message.contains("not a DataStore store"), "\(error)")
    }

    let newer = dir.path("newer.sqlite")
    try SQLiteStore(path: newer, schema: itemSchema).close()
    // The header a newer version would write: format 99, the schema sealed with that format.
    do {
        let engine = try SQLiteEngine(path: newer, schema: nil)
        try engine.withWriter { writer in
            try StoreHeader.write(itemSchema, format: 99) { try writer.setMetadata($1, forKey: $0) }
        }
        try engine.close()
    }
    do {
        _ = try SQLiteStore(path: newer, schema: nil)
        Issue.record("a newer format opened")
    } catch let error as StoreError {
        #expect(error.code == .incompatibleFormat && error.message.contains("99"), "\(error)")
    }

    do {
        _ = try SQLiteStore(path: dir.path("missing-dir/app.sqlite"), schema: itemSchema)
        Issue.record("a store in a missing directory opened")
    } catch let error as StoreError {
        #expect(error.code == .notFound && error.message.contains("missing-dir"), "\(error)")
    }
    do {
        _ = try SQLiteStore(path: dir.path("absent.sqlite"), schema: nil)
        Issue.record("a missing file opened")
    } catch let error as StoreError {
        #expect(error.code == .notFound && error.message.contains("absent.sqlite"), "\(error)")
    }
    #expect(!FileManager.default.fileExists(atPath: dir.path("absent.sqlite")), "opening did not create it")
}

@Test func aReadOnlyDirectoryIsAClearError() throws {
    guard getuid() != 0 else {
        // root ignores directory permissions; check the error on a path under a file instead.
        let dir = try TemporaryDirectory()
        try Data([1]).write(to: URL(fileURLWithPath: dir.path("file")))
        #expect(throws: StoreError.self) { try SQLiteStore(path: dir.path("file/app.sqlite"), schema: itemSchema) }
        return
    }
    let dir = try TemporaryDirectory()
    try FileManager.default.setAttributes([.posixPermissions: 0o555], ofItemAtPath: dir.url.path)
    defer { try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: dir.url.path) }
    do {
        _ = try SQLiteStore(path: dir.path("app.sqlite"), schema: itemSchema)
        Issue.record("a store was created in a read-only directory")
    } catch let error as StoreError {
        #expect(error.code == .readOnly, "\(error)")
    }
}

@Test func aCorruptedPageIsReportedAsCorrupt() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("corrupt.sqlite")
    let store = try SQLiteStore(path: path, schema: itemSchema)
    try seed(store, 2000)
    try store.close()
    var data = try Data(contentsOf: URL(fileURLWithPath: path))
    for offset in stride(from: 4096 * 3, to: min(data.count, 4096 * 6), by: 1) { data[offset] = 0xA5 }
    try data.write(to: URL(fileURLWithPath: path))
    do {
        let reopened = try SQLiteStore(path: path, schema: nil)
        _ = try reopened.read { try $0.fetch(FetchRequest("Item", filter: Field("name") == "name1")) }
        _ = try reopened.read { try $0.fetch(FetchRequest("Item")) }
        Issue.record("reading damaged pages succeeded")
    } catch let error as StoreError {
        #expect(error.code == .corrupt, "\(error)")
    }
}

/// An entity with an attribute of each type, for values planted behind the store's back.
private let thingSchema = Schema(entities: [
    EntitySchema("Thing", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("flag", .bool), Attribute("label", .string),
        Attribute("tag", .uuid, optional: true), Attribute("count", .int), Attribute("ratio", .double),
        Attribute("blob", .bytes), Attribute("when", .date),
    ]),
])

/// Item `i` of `thingSchema` (item 1 has no tag).
private func thing(_ i: Int) -> Record {
    ["id": .int(Int64(i)), "flag": .bool(i % 2 == 0), "label": .string("thing \(i) é"),
     "tag": i == 1 ? .null : .uuid(UUID(uuid: (UInt8(i), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))),
     "count": .int(Int64(i * 7)), "ratio": .double(Double(i) / 4), "blob": .bytes([UInt8(i), 0, 255]),
     "when": .date(Timestamp(microsecondsSinceEpoch: Int64(i) * 1_000_003))]
}

/// A store of items 0 to 4 of `thingSchema` in `dir`; its path.
private func thingStore(in dir: TemporaryDirectory) throws -> String {
    let path = dir.path("base.sqlite")
    let store = try SQLiteStore(path: path, schema: thingSchema)
    try store.writeSync { w in
        for i in 0..<5 { try w.insert(thing(i), into: "Thing") }
    }
    try store.close()
    return path
}

/// Values planted in item 3 that its attribute's type cannot hold, each with the end of the
/// error that names it.
private let thingDamages: [(sql: String, named: String)] = [
    ("UPDATE Thing SET flag = 7 WHERE id = 3", "Thing[3].flag holds 7, which is not a bool (0 or 1)"),
    ("UPDATE Thing SET label = CAST(X'C328' AS TEXT) WHERE id = 3", "Thing[3].label holds text that is not valid UTF-8"),
    ("UPDATE Thing SET tag = X'0102' WHERE id = 3", "Thing[3].tag is not a 16-byte uuid"),
    ("UPDATE Thing SET count = 'seven' WHERE id = 3", "Thing[3].count holds a SQLite TEXT value, not int"),
    ("UPDATE Thing SET ratio = X'00' WHERE id = 3", "Thing[3].ratio holds a SQLite BLOB value, not double"),
    ("UPDATE Thing SET blob = 2.5 WHERE id = 3", "Thing[3].blob holds a SQLite REAL value, not bytes"),
    ("UPDATE Thing SET \"when\" = 'noon' WHERE id = 3", "Thing[3].when holds a SQLite TEXT value, not date"),
]

/// A schema step that rewrites the table (a change of type, an attribute whose default is a
/// double) is copied by SQLite itself (`SQLiteTableCopy`), each row checked as a read checks it,
/// the attributes the step does not touch included: a value planted behind the store's back fails
/// the migration with the error a read gives, naming the item, and the store stays at its old
/// version with every item as it was. A value the conversion refuses, or a null where the
/// attribute becomes required, fails naming the item as on every backend; the copy itself
/// converts and carries every value exactly (`-0.0` keeps its sign).
@Test func aSchemaStepCopiedBySQLiteFindsWhatAReadFindsAndChangesNothing() throws {
    let dir = try TemporaryDirectory()
    let base = try thingStore(in: dir)
    let steps: [SchemaStep] = [
        .changeType(entity: "Thing", attribute: "count", to: .double),
        .changeType(entity: "Thing", attribute: "flag", to: .int),
        .addAttribute(entity: "Thing", attribute: Attribute("weight", .double, default: .double(-0.0))),
    ]
    func migrate(_ path: String, _ step: SchemaStep) throws -> SQLiteStore {
        var upgrades = SchemaUpgrades()
        upgrades.version(2, step)
        return try SQLiteStore(path: path, schema: try SchemaPlan([.init(2, [step])]).target(from: thingSchema),
                               upgrades: upgrades)
    }
    for (n, damage) in thingDamages.enumerated() {
        for (m, step) in steps.enumerated() {
            let path = dir.path("damaged-\(n)-\(m).sqlite")
            try FileManager.default.copyItem(atPath: base, toPath: path)
            _ = try runCommand("/usr/bin/sqlite3", [path, damage.sql])
            #expect("\(step) over \(damage.sql)", performing: { try migrate(path, step) }, throws: { error in
                (error as? StoreError)?.code == .corrupt && (error as? StoreError)?.message.hasSuffix(damage.named) == true
            })
            let reopened = try SQLiteStore(path: path, schema: thingSchema)
            #expect(reopened.schema.version == thingSchema.version)
            #expect(try reopened.read { try $0.count(FetchRequest("Thing")) } == 5)
            for i in [0, 1, 2, 4] {
                #expect(try reopened.read { try $0.get("Thing", key: .int(Int64(i))) } == thing(i))
            }
            try reopened.close()
        }
    }
    let refused: [(SchemaStep, String)] = [
        (.changeType(entity: "Thing", attribute: "label", to: .int),
         "Thing[0].label holds \"thing 0 é\", which does not convert to int"),
        (.changeType(entity: "Thing", attribute: "tag", to: .bytes, optional: false),
         "Thing[1].tag is null, but the attribute becomes required"),
    ]
    for (m, (step, named)) in refused.enumerated() {
        let path = dir.path("refused-\(m).sqlite")
        try FileManager.default.copyItem(atPath: base, toPath: path)
        #expect("\(step)", performing: { try migrate(path, step) }, throws: { error in
            (error as? StoreError)?.code == .invalidValue && "\(error)".contains(named)
        })
        let reopened = try SQLiteStore(path: path, schema: thingSchema)
        #expect(reopened.schema.version == thingSchema.version)
        #expect(try reopened.read { try $0.fetch(FetchRequest("Thing")) } == (0..<5).map(thing))
        try reopened.close()
    }
    for (m, step) in steps.enumerated() {
        let path = dir.path("clean-\(m).sqlite")
        try FileManager.default.copyItem(atPath: base, toPath: path)
        let migrated = try migrate(path, step)
        let items = try migrated.read { try $0.fetch(FetchRequest("Thing")) }
        try migrated.close()
        #expect(items.count == 5)
        for (i, item) in items.enumerated() {
            var expected = thing(i)
            switch m {
            case 0: expected["count"] = .double(Double(i * 7))
            case 1: expected["flag"] = .int(i % 2 == 0 ? 1 : 0)
            default:
                expected["weight"] = .double(-0.0)
                guard case .double(let weight) = item["weight"] else {
                    Issue.record("item \(i) has no double weight: \(item)")
                    continue
                }
                #expect(weight.sign == .minus)
            }
            #expect(item == expected, "\(step)")
        }
    }
}

/// A value written into the file behind the store's back that its attribute's type cannot hold
/// is a `corrupt` error naming the item, the attribute and what is wrong, on each of the read
/// paths that decode rows (a point get, a fetch that keeps its records, a visit that refills
/// one), never a coerced value; the items before it read.
@Test func aStoredValueItsTypeCannotHoldIsNamedOnEveryReadPath() throws {
    let dir = try TemporaryDirectory()
    let base = try thingStore(in: dir)
    for (n, damage) in thingDamages.enumerated() {
        let path = dir.path("damaged-\(n).sqlite")
        try FileManager.default.copyItem(atPath: base, toPath: path)
        _ = try runCommand("/usr/bin/sqlite3", [path, damage.sql])
        let damaged = try SQLiteStore(path: path, schema: nil)
        let paths: [(String, () throws -> Void)] = [
            ("get", { _ = try damaged.read { try $0.get("Thing", key: .int(3)) } }),
            ("fetch", { _ = try damaged.read { try $0.fetch(FetchRequest("Thing")) } }),
            ("forEach", { try damaged.read { r in try r.forEach(FetchRequest("Thing")) { _ in } } }),
        ]
        for (name, read) in paths {
            do {
                try read()
                Issue.record("\(name) read \(damage.sql) without an error")
            } catch let error as StoreError {
                #expect(error.code == .corrupt, "\(name), \(damage.sql): \(error)")
                #expect(error.message.hasSuffix(damage.named), "\(name), \(damage.sql): \(error.message)")
            }
        }
        #expect(try damaged.read { try $0.get("Thing", key: .int(2)) }?["label"] == .string("thing 2 é"))
        var visited: [Value] = []
        try? damaged.read { r in try r.forEach(FetchRequest("Thing")) { visited.append($0["id"]) } }
        #expect(visited == [.int(0), .int(1), .int(2)], "\(damage.sql)")
        try damaged.close()
    }
}

/// SQLite's out of memory (SQLITE_NOMEM) with memory to spare is what a damaged page or record
/// that claims a huge size gives: it is reported as damage (migrate-store's exit 2, bad input),
/// as SQLITE_CORRUPT is; without memory to spare it stays an I/O failure (exit 3). A damaged file
/// of the damaged-store corpus (DATASTORE_CORPUS_SEED=14306635990209794336,
/// overwritten-100-at-178897) gave it to `check`, `copy` and `verify`.
@Test func anAllocationSQLiteCannotMakeWithMemoryToSpareIsDamage() throws {
    let dir = try TemporaryDirectory()
    let connection = try SQLiteConnection(path: dir.url.path + "/store.sqlite", create: true)
    let error = connection.error(7, "cannot run a query")  // SQLITE_NOMEM
    let spare = try #require(SQLiteConnection.availableMemory()) >= SQLiteConnection.spareMemory
    #expect(error.code == (spare ? .corrupt : .io), "\(error)")
    #expect(error.message.hasSuffix(spare ? "the database file is damaged" : "out of memory"), "\(error)")
}
