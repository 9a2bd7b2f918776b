import BenchSupport
import DataStoreAPI
import DataStoreModels
import Foundation
import GRDB
import RawSQLite
import SQLiteStore

/// The record both sides store through their Codable layers.
struct Track: Codable, FetchableRecord, PersistableRecord, DataObject {
    static let databaseTableName = "Track"
    static let entityName = "Track"
    static let primaryKey = "id"
    var id: Int64
    var title: String
    var plays: Int64
    var rating: Double
    var artwork: Data

    static func make(_ i: Int) -> Track {
        Track(id: Int64(i), title: "track-\(i % 1_000)", plays: Int64(i % 5_000), rating: Double(i % 97) / 97,
              artwork: Data((0..<16).map { UInt8(truncatingIfNeeded: i &+ $0) }))
    }
}

/// The same record declared with the model macro: read from the row and written to its record by
/// the code the macro generates, not `Codable`.
@StoredModel("Track")
struct GeneratedTrack {
    var id: Int64
    var title: String
    var plays: Int64
    var rating: Double
    var artwork: Data

    init(_ track: Track) {
        (id, title, plays, rating, artwork) = (track.id, track.title, track.plays, track.rating, track.artwork)
    }
}

/// The typed work written by hand against SQLite's C API, in the same run: each track's fields
/// bound from the struct, and each fetched track filled field by field from the statement.
struct HandWrittenTracks {
    let db: OpaquePointer

    init(path: String) {
        var handle: OpaquePointer?
        sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        db = handle!
        sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; CREATE TABLE IF NOT EXISTS \"Track\" "
            + "(\"id\" INTEGER PRIMARY KEY NOT NULL, \"title\" TEXT NOT NULL, \"plays\" INTEGER NOT NULL, "
            + "\"rating\" REAL NOT NULL, \"artwork\" BLOB NOT NULL)", nil, nil, nil)
    }

    func close() { sqlite3_close_v2(db) }

    private func prepare(_ sql: String) -> OpaquePointer {
        var statement: OpaquePointer?
        sqlite3_prepare_v3(db, sql, -1, 0, &statement, nil)
        return statement!
    }

    func insert(_ tracks: [Track]) {
        let statement = prepare("INSERT INTO \"Track\" VALUES (?, ?, ?, ?, ?)")
        defer { sqlite3_finalize(statement) }
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        sqlite3_exec(db, "BEGIN IMMEDIATE", nil, nil, nil)
        for track in tracks {
            sqlite3_bind_int64(statement, 1, track.id)
            var title = track.title
            title.withUTF8 { sqlite3_bind_text(statement, 2, UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self),
                                               Int32($0.count), transient) }
            sqlite3_bind_int64(statement, 3, track.plays)
            sqlite3_bind_double(statement, 4, track.rating)
            track.artwork.withUnsafeBytes { sqlite3_bind_blob(statement, 5, $0.baseAddress, Int32($0.count), transient) }
            sqlite3_step(statement)
            sqlite3_reset(statement)
        }
        sqlite3_exec(db, "COMMIT", nil, nil, nil)
    }

    func fetchAll() -> [Track] {
        let statement = prepare("SELECT \"id\", \"title\", \"plays\", \"rating\", \"artwork\" FROM \"Track\" ORDER BY \"id\"")
        defer { sqlite3_finalize(statement) }
        sqlite3_exec(db, "BEGIN", nil, nil, nil)
        defer { sqlite3_exec(db, "COMMIT", nil, nil, nil) }
        var tracks: [Track] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            let title = String(decoding: UnsafeRawBufferPointer(start: sqlite3_column_text(statement, 1),
                                                                count: Int(sqlite3_column_bytes(statement, 1))), as: UTF8.self)
            let artwork = Data(UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, 4),
                                                      count: Int(sqlite3_column_bytes(statement, 4))))
            tracks.append(Track(id: sqlite3_column_int64(statement, 0), title: title, plays: sqlite3_column_int64(statement, 2),
                                rating: sqlite3_column_double(statement, 3), artwork: artwork))
        }
        return tracks
    }
}

/// Inserts and fetches `count` tracks through GRDB (DatabasePool, WAL, synchronous=NORMAL),
/// through SQLiteStore's typed layer and by hand through SQLite's C API; returns the seconds of each.
/// With `key`, the generated model's insert and fetch on an encrypted store too.
/// The seconds of each side of the typed layer's table.
typealias TypedComparison = (grdbInsert: Double, storeInsert: Double, grdbFetch: Double, storeFetch: Double,
                             handInsert: Double, handFetch: Double, generatedInsert: Double, generatedFetch: Double,
                             generatedInsertFeedOff: Double, encrypted: (insert: Double, fetch: Double)?)

func grdbComparison(count: Int, key: StoreKey?) throws -> TypedComparison {
    let tracks = (0..<count).map(Track.make)
    let grdbDirectory = scratch("grdb")
    defer { try? FileManager.default.removeItem(atPath: grdbDirectory) }
    var configuration = Configuration()
    configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous=NORMAL") }
    let pool = try DatabasePool(path: grdbDirectory + "/grdb.sqlite", configuration: configuration)
    try pool.write { db in
        try db.create(table: "Track") { t in
            t.primaryKey("id", .integer)
            t.column("title", .text).notNull()
            t.column("plays", .integer).notNull()
            t.column("rating", .double).notNull()
            t.column("artwork", .blob).notNull()
        }
    }
    let grdbInsert = try time { try pool.write { db in for track in tracks { try track.insert(db) } } }
    var fetched = 0
    let grdbFetch = try bestOf(5) { fetched = try pool.read { db in try Track.fetchAll(db) }.count }
    precondition(fetched == count)

    let storeDirectory = scratch("typed")
    defer { try? FileManager.default.removeItem(atPath: storeDirectory) }
    let store = try SQLiteStore(path: storeDirectory + "/store.sqlite",
                                schema: Schema(entities: [try Track.entitySchema()]),
                                options: SQLiteOptions(durability: .normal))
    let storeInsert = try time { try store.writeSync { w in for track in tracks { try w.insert(track) } } }
    let storeFetch = try bestOf(5) { fetched = try store.read { try $0.fetch(Track.self) }.count }
    precondition(fetched == count)
    try store.close()

    let generatedTracks = tracks.map(GeneratedTrack.init)
    let generatedStore = try SQLiteStore(path: storeDirectory + "/generated.sqlite",
                                         schema: Schema(entities: [try GeneratedTrack.entitySchema()]),
                                         options: SQLiteOptions(durability: .normal))
    let generatedInsert = try time {
        try generatedStore.writeSync { w in for track in generatedTracks { try w.insert(track) } }
    }
    let generatedFetch = try bestOf(5) { fetched = try generatedStore.read { try $0.fetch(GeneratedTrack.self) }.count }
    precondition(fetched == count)
    try generatedStore.close()
    // The same insert with the change feed off: what the feed's bookkeeping costs a bulk insert.
    let quiet = try SQLiteStore(path: storeDirectory + "/quiet.sqlite",
                                schema: Schema(entities: [try GeneratedTrack.entitySchema()]),
                                options: SQLiteOptions(durability: .normal))
    try quiet.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: false)) }
    let quietInsert = try time { try quiet.writeSync { w in for track in generatedTracks { try w.insert(track) } } }
    try quiet.close()
    var encrypted: (insert: Double, fetch: Double)?
    if let key {
        let sealed = try SQLiteStore(path: storeDirectory + "/encrypted.sqlite",
                                     schema: Schema(entities: [try GeneratedTrack.entitySchema()]),
                                     options: SQLiteOptions(durability: .normal, key: key))
        let insert = try time { try sealed.writeSync { w in for track in generatedTracks { try w.insert(track) } } }
        let fetch = try bestOf(5) { fetched = try sealed.read { try $0.fetch(GeneratedTrack.self) }.count }
        precondition(fetched == count)
        try sealed.close()
        encrypted = (insert, fetch)
    }

    let hand = HandWrittenTracks(path: storeDirectory + "/hand.sqlite")
    defer { hand.close() }
    let handInsert = time { hand.insert(tracks) }
    let handFetch = bestOf(5) { fetched = hand.fetchAll().count }
    precondition(fetched == count)
    return (grdbInsert, storeInsert, grdbFetch, storeFetch, handInsert, handFetch, generatedInsert, generatedFetch,
            quietInsert, encrypted)
}
