import BenchSupport
import DataStoreAPI
import Foundation
import GRDB
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

/// Inserts and fetches `count` tracks through GRDB (DatabasePool, WAL, synchronous=NORMAL)
/// and through SQLiteStore's typed layer; returns the seconds of each.
func grdbComparison(count: Int) throws -> (grdbInsert: Double, storeInsert: Double, grdbFetch: Double, storeFetch: Double) {
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
    return (grdbInsert, storeInsert, grdbFetch, storeFetch)
}
