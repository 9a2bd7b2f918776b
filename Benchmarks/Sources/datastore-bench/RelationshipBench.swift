import BenchSupport
import DataStoreAPI
import Foundation
import GRDB
import LMDBStore
import RawSQLite
import SQLiteStore

/// Users with notes: the graph the relationship rows run on.
enum GraphWorkload {
    static let schema = Schema(entities: [
        EntitySchema("User", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("name", .string)],
                     relationships: [.toMany("notes", to: "Note", inverse: "author", deleteRule: .cascade)]),
        EntitySchema("Note", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("title", .string)],
                     relationships: [.toOne("author", to: "User", inverse: "notes", optional: false)]),
    ])
    /// The same entities with the reference as a plain indexed attribute: what the integrity
    /// check's cost is measured against.
    static let plainSchema = Schema(entities: [
        EntitySchema("User", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("name", .string)]),
        EntitySchema("Note", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("title", .string),
                                                            Attribute("author", .int)],
                     indexes: [Index("author", on: ["author"])]),
    ])

    static func user(_ i: Int) -> DataStoreAPI.Record { ["id": .int(Int64(i)), "name": .string("user-\(i)")] }
    static func note(_ i: Int, users: Int) -> DataStoreAPI.Record {
        ["id": .int(Int64(i)), "title": .string("note-\(i)"), "author": .int(Int64(i % users))]
    }

    static func load(_ store: any DataStore, users: Int, notesPerUser: Int) throws {
        try store.writeSync { w in
            for i in 0..<users { try w.insert(user(i), into: "User") }
            for i in 0..<(users * notesPerUser) { try w.insert(note(i, users: users), into: "Note") }
        }
    }
}

struct GRDBUser: Decodable, FetchableRecord, TableRecord {
    static let databaseTableName = "User"
    static let notes = hasMany(GRDBNote.self, key: "notes", using: ForeignKey(["author"]))
    var id: Int64
    var name: String
}

struct GRDBNote: Decodable, FetchableRecord, TableRecord {
    static let databaseTableName = "Note"
    var id: Int64
    var title: String
    var author: Int64
}

struct GRDBUserWithNotes: FetchableRecord {
    var user: GRDBUser
    var notes: [GRDBNote]

    init(row: GRDB.Row) throws {
        user = try GRDBUser(row: row)
        notes = try (row.prefetchedRows["notes"] ?? []).map { try GRDBNote(row: $0) }
    }
}

/// The relationship rows: eager loading against one query per user, GRDB's `including(all:)`
/// and a raw SQL join; a cascade delete against SQLite's own `ON DELETE CASCADE`; bulk inserts
/// with references checked against the same inserts without relationships. With `key`, every
/// store encrypted (the raw sides as they are), without the rows that read the store's file with
/// GRDB or SQL, which an encrypted store's columns do not hold in the clear.
@MainActor func benchmarkRelationships(users: Int, notesPerUser: Int, key: StoreKey? = nil) throws {
    let notes = users * notesPerUser
    let directory = scratch("graph")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let suffix = key == nil ? "" : ", encrypted"

    // Eager loading, SQLite.
    let store = try SQLiteStore(path: directory + "/store.sqlite", schema: GraphWorkload.schema,
                                options: SQLiteOptions(durability: .normal, key: key))
    try GraphWorkload.load(store, users: users, notesPerUser: notesPerUser)
    var loaded = 0
    let eager = try bestOf(3) {
        loaded = try store.read { r in
            try r.fetch(FetchRequest("User"), including: ["notes"]).reduce(0) { $0 + 1 + $1["notes"].count }
        }
    }
    precondition(loaded == users + notes)
    let perUser = try bestOf(3) {
        loaded = try store.read { r in
            try r.fetch(FetchRequest("User")).reduce(0) { count, user in
                count + 1 + (try r.fetch(FetchRequest("Note", filter: Field("author") == user["id"]))).count
            }
        }
    }
    precondition(loaded == users + notes)
    record("SQLite" + suffix, "eager load \(users) users with their notes, against one query per user", users + notes,
           operations: users + notes, api: eager, raw: perUser)
    if key == nil { try compareEagerLoad(directory + "/store.sqlite", eager: eager, users: users, notes: notes) }
    try store.close()

    try cascadeAndBulkRows(directory, users: users, notesPerUser: notesPerUser, key: key)
}

/// Eager loading against GRDB's `including(all:)` and a raw SQL join over the same file.
@MainActor private func compareEagerLoad(_ path: String, eager: Double, users: Int, notes: Int) throws {
    var loaded = 0
    // GRDB's including(all:) over the same file.
    let pool = try DatabasePool(path: path)
    let grdb = try bestOf(3) {
        loaded = try pool.read { db in
            try GRDBUser.including(all: GRDBUser.notes).asRequest(of: GRDBUserWithNotes.self).fetchAll(db)
                .reduce(0) { $0 + 1 + $1.notes.count }
        }
    }
    precondition(loaded == users + notes)
    record("SQLite", "eager load, against GRDB including(all:)", users + notes, operations: users + notes,
           api: eager, raw: grdb)

    // A raw SQL join read into rows, through the C API.
    var handle: OpaquePointer?
    sqlite3_open_v2(path, &handle, SQLITE_OPEN_READONLY, nil)
    let join = bestOf(3) {
        var statement: OpaquePointer?
        sqlite3_prepare_v2(handle, "SELECT u.id, u.name, n.id, n.title, n.author FROM User u LEFT JOIN Note n "
            + "ON n.author = u.id ORDER BY u.id, n.id", -1, &statement, nil)
        var rows: [(Int64, String, Int64, String, Int64)] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            rows.append((sqlite3_column_int64(statement, 0), String(cString: sqlite3_column_text(statement, 1)),
                         sqlite3_column_int64(statement, 2), String(cString: sqlite3_column_text(statement, 3)),
                         sqlite3_column_int64(statement, 4)))
        }
        sqlite3_finalize(statement)
        loaded = rows.count
    }
    precondition(loaded == notes)
    sqlite3_close_v2(handle)
    record("SQLite", "eager load, against a raw SQL join", users + notes, operations: users + notes,
           api: eager, raw: join)
}

/// The cascade-delete and bulk-insert rows, on SQLite and LMDB (encrypted with `key`).
@MainActor private func cascadeAndBulkRows(_ directory: String, users: Int, notesPerUser: Int, key: StoreKey?) throws {
    let notes = users * notesPerUser
    let suffix = key == nil ? "" : ", encrypted"
    // Cascade delete of every user: the users and all their notes, one transaction.
    for backend in ["SQLite", "LMDB"] {
        let path = directory + "/cascade-\(backend)"
        let graph: any DataStore = backend == "SQLite"
            ? try SQLiteStore(path: path + ".sqlite", schema: GraphWorkload.schema,
                              options: SQLiteOptions(durability: .normal, key: key))
            : try LMDBStore(path: path + ".lmdb", schema: GraphWorkload.schema,
                            options: LMDBOptions(durability: .normal, initialMapSize: 4 << 30, key: key))
        try GraphWorkload.load(graph, users: users, notesPerUser: notesPerUser)
        var deleted = 0
        let cascade = try time { deleted = try graph.writeSync { try $0.deleteAll("User") } }
        let left = try graph.read { try $0.count(FetchRequest("Note")) }
        precondition(deleted == users && left == 0)
        try graph.close()
        let raw = rawCascade(directory + "/raw-cascade-\(backend).sqlite", users: users, notesPerUser: notesPerUser)
        record(backend + suffix, "cascade delete of \(users + notes) items, against SQLite's ON DELETE CASCADE",
               users + notes, operations: users + notes, api: cascade, raw: raw)
    }

    // Bulk inserts with references checked, against the same inserts without relationships.
    for backend in ["SQLite", "LMDB"] {
        func open(_ name: String, _ schema: Schema) throws -> any DataStore {
            backend == "SQLite"
                ? try SQLiteStore(path: directory + "/\(name).sqlite", schema: schema,
                                  options: SQLiteOptions(durability: .normal, key: key))
                : try LMDBStore(path: directory + "/\(name).lmdb", schema: schema,
                                options: LMDBOptions(durability: .normal, initialMapSize: 4 << 30, key: key))
        }
        var seconds: [Double] = []
        for (name, schema) in [("checked-\(backend)", GraphWorkload.schema), ("plain-\(backend)", GraphWorkload.plainSchema)] {
            let graph = try open(name, schema)
            try graph.writeSync { w in for i in 0..<users { try w.insert(GraphWorkload.user(i), into: "User") } }
            let batch = (0..<notes).map { GraphWorkload.note($0, users: users) }
            seconds.append(try time { try graph.writeSync { try $0.insert(contentsOf: batch, into: "Note") } })
            try graph.close()
        }
        record(backend + suffix, "bulk insert of \(notes) notes with references checked, against no relationships", notes,
               operations: notes, api: seconds[0], raw: seconds[1], memory: false)
    }
}

/// Deletes every user of a raw SQLite graph whose notes cascade (`ON DELETE CASCADE`,
/// `PRAGMA foreign_keys` on), in one transaction; the seconds it took.
private func rawCascade(_ path: String, users: Int, notesPerUser: Int) -> Double {
    var db: OpaquePointer?
    sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil)
    defer { sqlite3_close_v2(db) }
    sqlite3_exec(db, """
        PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;
        CREATE TABLE User (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
        CREATE TABLE Note (id INTEGER PRIMARY KEY, title TEXT NOT NULL,
                           author INTEGER NOT NULL REFERENCES User ON DELETE CASCADE);
        CREATE INDEX noteAuthor ON Note (author);
        BEGIN;
        """, nil, nil, nil)
    var user: OpaquePointer?
    sqlite3_prepare_v2(db, "INSERT INTO User VALUES (?, ?)", -1, &user, nil)
    let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
    for i in 0..<users {
        sqlite3_reset(user)
        sqlite3_bind_int64(user, 1, Int64(i))
        sqlite3_bind_text(user, 2, "user-\(i)", -1, transient)
        sqlite3_step(user)
    }
    sqlite3_finalize(user)
    var note: OpaquePointer?
    sqlite3_prepare_v2(db, "INSERT INTO Note VALUES (?, ?, ?)", -1, &note, nil)
    for i in 0..<(users * notesPerUser) {
        sqlite3_reset(note)
        sqlite3_bind_int64(note, 1, Int64(i))
        sqlite3_bind_text(note, 2, "note-\(i)", -1, transient)
        sqlite3_bind_int64(note, 3, Int64(i % users))
        sqlite3_step(note)
    }
    sqlite3_finalize(note)
    sqlite3_exec(db, "COMMIT", nil, nil, nil)
    return time { sqlite3_exec(db, "BEGIN; DELETE FROM User; COMMIT;", nil, nil, nil) }
}
