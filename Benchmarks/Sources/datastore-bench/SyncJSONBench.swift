import BenchSupport
import DataStoreAPI
import Foundation
import JSONLStore
import LMDBStore
import RawLMDB
import RawSQLite
import SQLiteStore

/// Sync's JSON in and out: an import of `users` users with `notesPerUser` nested notes each, next
/// to a loop that parses the same file with `JSONSerialization`, reads its dates by position and
/// writes the same items through the raw C API in the same batches (1,000 users a transaction, SQLite with its foreign
/// key and index on the note's user, LMDB with the same key encoding and a reverse index); and an
/// export of the users with their notes nested, next to a `JSONEncoder` loop over the same
/// objects read back through the raw C API's equivalent (the items already in memory: the floor
/// of the JSON work). With `key`, the stores encrypted (the raw sides as they are).
@MainActor func benchmarkSyncJSON(users: Int, notesPerUser: Int, key: StoreKey? = nil) throws {
    let suffix = key == nil ? "" : ", encrypted"
    let directory = scratch("syncjson")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let payload = directory + "/users.json"
    FileManager.default.createFile(atPath: payload, contents: nil)
    let handle = FileHandle(forWritingAtPath: payload)!
    var text = "["
    for user in 0..<users {
        text += user == 0 ? "\n" : ",\n"
        text += #"{"id":\#(user),"name":"user \#(user)","email":"user\#(user)@example.com","#
            + #""created_at":"2014-02-14T04:30:10+00:00","notes":["#
        for k in 0..<notesPerUser {
            let id = user * notesPerUser + k
            text += (k == 0 ? "" : ",") + #"{"id":\#(id),"text":"note \#(id) of user \#(user)","#
                + #""created_at":"2014-03-11T19:11:00+00:00"}"#
        }
        text += "]}"
        if text.utf8.count > 1 << 16 {
            try handle.write(contentsOf: Data(text.utf8))
            text = ""
        }
    }
    text += "\n]\n"
    try handle.write(contentsOf: Data(text.utf8))
    try handle.close()
    let items = users * (1 + notesPerUser)
    let schema = Schema(version: 1, entities: [
        EntitySchema("User", primaryKey: "id", attributes: [
            Attribute("id", .int), Attribute("name", .string), Attribute("email", .string),
            Attribute("createdAt", .date),
        ], relationships: [.toMany("notes", to: "Note", inverse: "user", deleteRule: .cascade)]),
        EntitySchema("Note", primaryKey: "id", attributes: [
            Attribute("id", .int), Attribute("text", .string), Attribute("createdAt", .date),
        ], relationships: [.toOne("user", to: "User", inverse: "notes", optional: false)]),
    ])
    let options = JSONImport.Options(batchSize: 1_000)

    let sqlitePath = directory + "/import.sqlite"
    let lmdbPath = directory + "/import.lmdb"
    for (backend, path) in [("SQLite", sqlitePath), ("LMDB", lmdbPath)] {
        let importSeconds = try time {
            let store: any DataStore = backend == "SQLite"
                ? try SQLiteStore(path: path, schema: schema, options: SQLiteOptions(durability: .normal, key: key))
                : try LMDBStore(path: path, schema: schema,
                                options: LMDBOptions(durability: .normal, initialMapSize: 8 << 30, key: key))
            let report = try JSONImport.run(payload, into: store, entity: "User", options: options)
            precondition(report.inserted == users && report.entities["Note"]?.inserted == users * notesPerUser)
            try store.close()
        }
        let rawSeconds = try time {
            if backend == "SQLite" {
                try rawSQLiteSync(payload, directory + "/raw.sqlite")
            } else {
                try rawLMDBSync(payload, directory + "/raw.lmdb")
            }
        }
        record(backend + suffix, "JSON import, \(notesPerUser) nested notes per user (vs JSONSerialization + raw C loop)",
               items, operations: items, api: importSeconds, raw: rawSeconds)
    }

    // Export, nested, against a JSONEncoder loop over the same objects.
    struct PlainNote: Codable { var id: Int; var text: String; var createdAt: String }
    struct PlainUser: Codable {
        var id: Int; var name: String; var email: String; var createdAt: String; var notes: [PlainNote]
    }
    let created = "2014-02-14T04:30:10.000000Z"
    let encodeSeconds = try time {
        let encoder = JSONEncoder()
        FileManager.default.createFile(atPath: directory + "/plain.json", contents: nil)
        let out = FileHandle(forWritingAtPath: directory + "/plain.json")!
        var buffer = Data("[".utf8)
        for user in 0..<users {
            let notes = (0..<notesPerUser).map { k in
                PlainNote(id: user * notesPerUser + k, text: "note \(user * notesPerUser + k) of user \(user)",
                          createdAt: created)
            }
            buffer += try encoder.encode(PlainUser(id: user, name: "user \(user)", email: "user\(user)@example.com",
                                                   createdAt: created, notes: notes))
            buffer.append(0x2C)
            if buffer.count > 1 << 16 {
                try out.write(contentsOf: buffer)
                buffer.removeAll(keepingCapacity: true)
            }
        }
        buffer.append(0x5D)
        try out.write(contentsOf: buffer)
        try out.close()
    }
    for (backend, path) in [("SQLite", sqlitePath), ("LMDB", lmdbPath)] {
        let store: any DataStore = backend == "SQLite"
            ? try SQLiteStore(path: path, schema: schema, options: SQLiteOptions(durability: .normal, key: key))
            : try LMDBStore(path: path, schema: schema,
                            options: LMDBOptions(durability: .normal, initialMapSize: 8 << 30, key: key))
        let exportSeconds = try time {
            let count = try JSONExport.run(from: store, entity: "User", to: directory + "/export-\(backend).json")
            precondition(count == users)
        }
        try store.close()
        record(backend + suffix, "JSON export, notes nested (vs JSONEncoder loop over objects in memory)", items,
               operations: items, api: exportSeconds, raw: encodeSeconds, memory: false)
    }
}

/// The users of the payload as `JSONSerialization` gives them.
private func parsedUsers(_ path: String) throws -> [[String: Any]] {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    return try JSONSerialization.jsonObject(with: data) as? [[String: Any]] ?? []
}

/// Microseconds since 1970 of the payload's one date form, `YYYY-MM-DDTHH:MM:SS+00:00`, read
/// by position with `timegm` (as a hand-written loop would, faster than `ISO8601DateFormatter`).
private func micros(_ text: Any?) -> Int64 {
    guard let text = text as? String else { return 0 }
    let bytes = Array(text.utf8)
    guard bytes.count >= 19 else { return 0 }
    func number(_ from: Int, _ count: Int) -> Int32 {
        bytes[from..<from + count].reduce(0) { $0 * 10 + Int32($1 &- 0x30) }
    }
    var parts = tm()
    parts.tm_year = number(0, 4) - 1900
    parts.tm_mon = number(5, 2) - 1
    parts.tm_mday = number(8, 2)
    parts.tm_hour = number(11, 2)
    parts.tm_min = number(14, 2)
    parts.tm_sec = number(17, 2)
    return Int64(timegm(&parts)) * 1_000_000
}

/// The payload parsed by `JSONSerialization`, written with SQLite's C API.
private func rawSQLiteSync(_ payload: String, _ path: String) throws {
    var handle: OpaquePointer?
    sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
    guard let db = handle else { return }
    defer { sqlite3_close_v2(db) }
    sqlite3_exec(db, """
        PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;
        CREATE TABLE "User" ("id" INTEGER PRIMARY KEY, "name" TEXT NOT NULL, "email" TEXT NOT NULL,
            "createdAt" INTEGER NOT NULL);
        CREATE TABLE "Note" ("id" INTEGER PRIMARY KEY, "text" TEXT NOT NULL, "createdAt" INTEGER NOT NULL,
            "user" INTEGER NOT NULL REFERENCES "User" ("id") DEFERRABLE INITIALLY DEFERRED);
        CREATE INDEX "Note.user" ON "Note" ("user");
        """, nil, nil, nil)
    let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
    func prepare(_ sql: String) -> OpaquePointer? {
        var statement: OpaquePointer?
        sqlite3_prepare_v2(db, sql, -1, &statement, nil)
        return statement
    }
    let insertUser = prepare(#"INSERT INTO "User" ("id", "name", "email", "createdAt") VALUES (?, ?, ?, ?)"#)
    let insertNote = prepare(#"INSERT INTO "Note" ("id", "text", "createdAt", "user") VALUES (?, ?, ?, ?)"#)
    defer {
        sqlite3_finalize(insertUser)
        sqlite3_finalize(insertNote)
    }
    func text(_ statement: OpaquePointer?, _ index: Int32, _ value: Any?) {
        var string = value as? String ?? ""
        _ = string.withUTF8 {
            sqlite3_bind_text(statement, index, UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self),
                              Int32($0.count), transient)
        }
    }
    let users = try parsedUsers(payload)
    var index = 0
    while index < users.count {
        sqlite3_exec(db, "BEGIN IMMEDIATE", nil, nil, nil)
        for user in users[index..<min(users.count, index + 1_000)] {
            let id = Int64(user["id"] as? Int ?? 0)
            sqlite3_reset(insertUser)
            sqlite3_bind_int64(insertUser, 1, id)
            text(insertUser, 2, user["name"])
            text(insertUser, 3, user["email"])
            sqlite3_bind_int64(insertUser, 4, micros(user["created_at"]))
            sqlite3_step(insertUser)
            for note in user["notes"] as? [[String: Any]] ?? [] {
                sqlite3_reset(insertNote)
                sqlite3_bind_int64(insertNote, 1, Int64(note["id"] as? Int ?? 0))
                text(insertNote, 2, note["text"])
                sqlite3_bind_int64(insertNote, 3, micros(note["created_at"]))
                sqlite3_bind_int64(insertNote, 4, id)
                sqlite3_step(insertNote)
            }
        }
        sqlite3_exec(db, "COMMIT", nil, nil, nil)
        index += 1_000
    }
}

/// The payload parsed by `JSONSerialization`, written with LMDB's C API: a database per entity
/// and one for the notes by user, keys encoded as LMDBStore encodes them.
private func rawLMDBSync(_ payload: String, _ path: String) throws {
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    var handle: OpaquePointer?
    mdb_env_create(&handle)
    guard let env = handle else { return }
    defer { mdb_env_close(env) }
    mdb_env_set_maxdbs(env, 8)
    mdb_env_set_mapsize(env, 8 << 30)
    mdb_env_open(env, path, UInt32(MDB_NOTLS | MDB_NOMETASYNC), 0o644)
    var userDB: MDB_dbi = 0
    var noteDB: MDB_dbi = 0
    var byUserDB: MDB_dbi = 0
    var txn: OpaquePointer?
    mdb_txn_begin(env, nil, 0, &txn)
    mdb_dbi_open(txn, "e.User", UInt32(MDB_CREATE), &userDB)
    mdb_dbi_open(txn, "e.Note", UInt32(MDB_CREATE), &noteDB)
    mdb_dbi_open(txn, "i.Note.user", UInt32(MDB_CREATE), &byUserDB)
    mdb_txn_commit(txn)
    func put(_ txn: OpaquePointer?, _ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8]) {
        key.withUnsafeBytes { k in
            value.withUnsafeBytes { v in
                var kv = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                var vv = MDB_val(mv_size: v.count, mv_data: UnsafeMutableRawPointer(mutating: v.baseAddress))
                _ = mdb_put(txn, dbi, &kv, &vv, 0)
            }
        }
    }
    func record(_ fields: [Any?]) -> [UInt8] {
        var out: [UInt8] = [1]
        for field in fields {
            if let string = field as? String {
                out.append(5)
                out += withUnsafeBytes(of: UInt32(string.utf8.count).littleEndian, Array.init)
                out += string.utf8
            } else if let number = field as? Int64 {
                out.append(3)
                out += withUnsafeBytes(of: number.littleEndian, Array.init)
            }
        }
        return out
    }
    let users = try parsedUsers(payload)
    var index = 0
    while index < users.count {
        mdb_txn_begin(env, nil, 0, &txn)
        for user in users[index..<min(users.count, index + 1_000)] {
            let id = Int64(user["id"] as? Int ?? 0)
            let key = RawLMDBBench.key(id)
            put(txn, userDB, key, record([id, user["name"], user["email"], micros(user["created_at"])]))
            for note in user["notes"] as? [[String: Any]] ?? [] {
                let noteID = Int64(note["id"] as? Int ?? 0)
                let noteKey = RawLMDBBench.key(noteID)
                put(txn, noteDB, noteKey, record([noteID, note["text"], micros(note["created_at"]), id]))
                put(txn, byUserDB, key + noteKey.dropFirst(), [])
            }
        }
        mdb_txn_commit(txn)
        index += 1_000
    }
}
