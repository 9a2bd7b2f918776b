// profile-store: one operation of the harness's workload on one backend, small enough for valgrind
// to read (the harness binary's debug information makes it give up). The store is seeded first
// (with the change feed off, as the raw side records nothing); callgrind counts only the operation
// when given `--toggle-collect=*runOperation*`:
//
//     valgrind --tool=callgrind --toggle-collect='*runOperation*' \
//         .build/release/profile-store lmdb scan 20000
//
// Operations: insert (one writeSync of COUNT items; insert-feed with the change feed on), scan (one full fetch), foreach (one full
// visit), get (COUNT point gets),
// query (100 indexed equality fetches), unindexed (one filtered fetch), typed (one typed fetch);
// copy (Migrator.copy of the seeded store into the other backend), verify and checksum
// (Migrator.verify of the seeded store against such a copy, item by item and by range checksum).
import DataStoreAPI
import Foundation
import LMDBStore
import SQLiteStore
import StoreMigration

let arguments = CommandLine.arguments
guard arguments.count >= 3, ["lmdb", "sqlite"].contains(arguments[1]) else {
    FileHandle.standardError.write(Data("usage: profile-store lmdb|sqlite insert|insert-feed|scan|foreach|get|query|unindexed|typed|copy|verify|checksum [COUNT]\n".utf8))
    exit(2)
}
let backend = arguments[1]
let operation = arguments[2]
let count = arguments.count > 3 ? Int(arguments[3]) ?? 20_000 : 20_000
let schema = Schema(entities: [
    EntitySchema("Item", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("name", .string), Attribute("score", .int),
        Attribute("ratio", .double), Attribute("payload", .bytes),
    ], indexes: [Index("byScore", on: ["score"])]),
])

struct Item: DataObject {
    static let entityName = "Item"
    static let primaryKey = "id"
    var id: Int64
    var name: String
    var score: Int64
    var ratio: Double
    var payload: [UInt8]
}

func record(_ i: Int) -> Record {
    ["id": .int(Int64(i)), "name": .string("name-\(i % 1_000)"), "score": .int(Int64(i % 1_000)),
     "ratio": .double(Double(i % 997) / 997), "payload": .bytes((0..<16).map { UInt8(truncatingIfNeeded: i &+ $0) })]
}

/// In a function of its own: a closure in top-level code that reads its globals checks the main
/// actor's isolation at every access (11% of the instructions, before).
func insertAll(_ store: any DataStore, count: Int) throws {
    try store.writeSync { w in
        for i in 0..<count { try w.insert(record(i), into: "Item") }
    }
}

@inline(never)
func runOperation(_ store: any DataStore, _ operation: String, count: Int) throws -> Int {
    switch operation {
    case "insert":
        try insertAll(store, count: count)
        return count
    case "scan":
        return try store.read { try $0.fetch(FetchRequest("Item")).count }
    case "get":
        return try store.read { r in
            var found = 0
            var state: UInt64 = 0x2545_F491_4F6C_DD1D
            for _ in 0..<count {
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                if try r.get("Item", key: .int(Int64(state % UInt64(count)))) != nil { found += 1 }
            }
            return found
        }
    case "foreach":
        return try store.read { r in
            var count = 0
            try r.forEach(FetchRequest("Item")) { _ in count += 1 }
            return count
        }
    case "query":
        return try store.read { r in
            try (0..<100).reduce(0) { $0 + (try r.fetch(FetchRequest("Item", filter: Field("score") == .int(Int64($1))))).count }
        }
    case "unindexed":
        return try store.read { try $0.fetch(FetchRequest("Item", filter: Field("ratio") < .double(0.01))).count }
    case "typed":
        return try store.read { try $0.fetch(Item.self).count }
    default:
        throw StoreError(.invalidArgument, "unknown operation '\(operation)'")
    }
}

/// A migration between the two backends (copy, verify or checksum), without the source's
/// integrity check, as the harness's rows run it.
@inline(never)
func runOperationMigration(_ operation: String, from source: StoreLocation, to destination: StoreLocation) throws -> Int {
    switch operation {
    case "copy":
        return try Migrator.copy(from: source, to: destination,
                                 options: MigrationOptions(batchSize: 1_000, verify: false, checkSource: false)).entities.reduce(0) { $0 + $1.itemsWritten }
    default:
        let report = try Migrator.verify(from: source, to: destination,
                                         options: MigrationOptions(checkSource: false, checksum: operation == "checksum"))
        return report.differences
    }
}

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("profile-\(UUID().uuidString)").path
defer { try? FileManager.default.removeItem(atPath: directory) }
do {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    if ["copy", "verify", "checksum"].contains(operation) {
        let lmdb = StoreLocation(kind: .lmdb, path: directory + "/store.lmdb")
        let sqlite = StoreLocation(kind: .sqlite, path: directory + "/store.sqlite")
        let (source, destination) = backend == "lmdb" ? (lmdb, sqlite) : (sqlite, lmdb)
        let store = try source.open(schema: schema, durability: .normal)
        try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: false)) }
        try insertAll(store, count: count)
        try store.close()
        if operation != "copy" {
            _ = try Migrator.copy(from: source, to: destination, options: MigrationOptions(verify: false, checkSource: false))
        }
        let result = try runOperationMigration(operation, from: source, to: destination)
        print("\(backend) \(operation) \(count): \(result)")
        exit(0)
    }
    let store: any DataStore = backend == "lmdb"
        ? try LMDBStore(path: directory, schema: schema, options: LMDBOptions(durability: .normal, initialMapSize: 1 << 30))
        : try SQLiteStore(path: directory + "/store.sqlite", schema: schema)
    // `insert-feed`: the insert with the change feed on, as a store opens by default.
    if operation != "insert-feed" {
        try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: false)) }
    }
    if !operation.hasPrefix("insert") { try insertAll(store, count: count) }
    let result = try runOperation(store, operation == "insert-feed" ? "insert" : operation, count: count)
    print("\(backend) \(operation) \(count): \(result)")
    try store.close()
} catch {
    FileHandle.standardError.write(Data("profile-store: \(error)\n".utf8))
    exit(1)
}
