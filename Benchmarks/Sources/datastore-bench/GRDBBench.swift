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
/// The fastest of `runs` inserts, each into a new database that `insert` makes (given the run's
/// number) before it times its insert: one insert of 100,000 records takes a fraction of a
/// second, which varies by half from one run to the next on this machine. Every side's insert
/// is timed so.
func fastestInsert(_ runs: Int = 3, _ insert: (Int) throws -> Double) rethrows -> Double {
    var best = Double.infinity
    for run in 0..<runs { best = min(best, try insert(run)) }
    return best
}

/// ``fastestInsert(_:_:)`` into new SQLite stores of `model`'s entity at `path`-run.sqlite (the
/// change feed off with `feedOff`, encrypted with `key`); the last run's store, open.
func fastestStoreInsert<Model: DataObject>(_ path: String, _ model: Model.Type, feedOff: Bool = false, key: StoreKey? = nil,
                                           _ insert: (WriteAccessor) throws -> Void) throws -> (Double, SQLiteStore) {
    var store: SQLiteStore?
    let seconds = try fastestInsert { run in
        let (seconds, fresh) = try timedStoreInsert(path + "-\(run).sqlite", Model.self, feedOff: feedOff, key: key,
                                               replacing: &store, insert)
        store = fresh
        return seconds
    }
    return (seconds, store!)
}

/// One timed insert into a new SQLite store of `model`'s entity at `path`, after closing the
/// store it replaces; the seconds, and the store, open.
func timedStoreInsert<Model: DataObject>(_ path: String, _ model: Model.Type, feedOff: Bool = false, key: StoreKey? = nil,
                                    replacing previous: inout SQLiteStore?,
                                    _ insert: (WriteAccessor) throws -> Void) throws -> (Double, SQLiteStore) {
    try previous?.close()
    previous = nil
    let fresh = try SQLiteStore(path: path, schema: Schema(entities: [try Model.entitySchema()]),
                                options: SQLiteOptions(durability: .normal, key: key))
    if feedOff { try fresh.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: false)) } }
    return (try time { try fresh.writeSync(insert) }, fresh)
}

/// The fastest of `runs` rounds of each side, the sides run in turn within each round (given the
/// round's number), so that no side has all its runs in one stretch of the machine's load.
func fastestInTurn(_ runs: Int, _ sides: [(Int) throws -> Double]) throws -> [Double] {
    var best = Array(repeating: Double.infinity, count: sides.count)
    for run in 0..<runs {
        for (i, side) in sides.enumerated() { best[i] = min(best[i], try side(run)) }
    }
    return best
}

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
    let storeDirectory = scratch("typed")
    defer { try? FileManager.default.removeItem(atPath: storeDirectory) }
    let generatedTracks = tracks.map(GeneratedTrack.init)
    // Every side runs in turn (GRDB, the typed layer through Codable, the generated code, the
    // generated code with the change feed off, the hand-written loop): each round inserts into a
    // new database on every side, then the fetches alternate, and each side's best is kept. The
    // machine's speed drifts by more than the differences measured; this way a slow stretch
    // falls on every side.
    var pool: DatabasePool?
    var store: SQLiteStore?
    var generatedStore: SQLiteStore?
    var quiet: SQLiteStore?
    var hand: HandWrittenTracks?
    defer { hand?.close() }
    func insertGenerated(_ name: String, feedOff: Bool, replacing previous: inout SQLiteStore?) throws -> Double {
        let (seconds, fresh) = try timedStoreInsert(storeDirectory + "/\(name).sqlite", GeneratedTrack.self,
                                                    feedOff: feedOff, replacing: &previous) { w in
            for track in generatedTracks { try w.insert(track) }
        }
        previous = fresh
        return seconds
    }
    let inserts = try fastestInTurn(3, [
        { run in
            pool = nil
            let fresh = try DatabasePool(path: grdbDirectory + "/grdb-\(run).sqlite", configuration: configuration)
            try fresh.write { db in
                try db.create(table: "Track") { t in
                    t.primaryKey("id", .integer)
                    t.column("title", .text).notNull()
                    t.column("plays", .integer).notNull()
                    t.column("rating", .double).notNull()
                    t.column("artwork", .blob).notNull()
                }
            }
            pool = fresh
            return try time { try fresh.write { db in for track in tracks { try track.insert(db) } } }
        },
        { run in
            let (seconds, fresh) = try timedStoreInsert(storeDirectory + "/store-\(run).sqlite", Track.self,
                                                        replacing: &store) { w in
                for track in tracks { try w.insert(track) }
            }
            store = fresh
            return seconds
        },
        { run in try insertGenerated("generated-\(run)", feedOff: false, replacing: &generatedStore) },
        // The same insert with the change feed off: what the feed's bookkeeping costs a bulk insert.
        { run in try insertGenerated("quiet-\(run)", feedOff: true, replacing: &quiet) },
        { run in
            hand?.close()
            let fresh = HandWrittenTracks(path: storeDirectory + "/hand-\(run).sqlite")
            hand = fresh
            return time { fresh.insert(tracks) }
        },
    ])
    let (grdbInsert, storeInsert, generatedInsert, quietInsert, handInsert) =
        (inserts[0], inserts[1], inserts[2], inserts[3], inserts[4])
    try quiet?.close()
    var fetched = [0, 0, 0, 0]
    let fetches = try fastestInTurn(5, [
        { _ in try time { fetched[0] = try pool!.read { db in try Track.fetchAll(db) }.count } },
        { _ in try time { fetched[1] = try store!.read { try $0.fetch(Track.self) }.count } },
        { _ in try time { fetched[2] = try generatedStore!.read { try $0.fetch(GeneratedTrack.self) }.count } },
        { _ in time { fetched[3] = hand!.fetchAll().count } },
    ])
    let (grdbFetch, storeFetch, generatedFetch, handFetch) = (fetches[0], fetches[1], fetches[2], fetches[3])
    precondition(fetched == [count, count, count, count])
    pool = nil
    try store?.close()
    try generatedStore?.close()
    var encrypted: (insert: Double, fetch: Double)?
    if let key {
        let (insert, sealed) = try fastestStoreInsert(storeDirectory + "/encrypted", GeneratedTrack.self, key: key) { w in
            for track in generatedTracks { try w.insert(track) }
        }
        let fetch = try bestOf(5) { fetched[2] = try sealed.read { try $0.fetch(GeneratedTrack.self) }.count }
        precondition(fetched[2] == count)
        try sealed.close()
        encrypted = (insert, fetch)
    }

    return (grdbInsert, storeInsert, grdbFetch, storeFetch, handInsert, handFetch, generatedInsert, generatedFetch,
            quietInsert, encrypted)
}
