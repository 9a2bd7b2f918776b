// profile-lmdb-insert: one bulk insert of N items into a fresh LMDB store in one writeSync, the
// harness's workload, with the change feed off; small enough for valgrind to read (the harness
// binary's debug information makes it give up):
//
//     valgrind --tool=callgrind .build/release/profile-lmdb-insert 20000
import DataStoreAPI
import Foundation
import LMDBStore

let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 20_000 : 20_000
let schema = Schema(entities: [
    EntitySchema("Item", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("name", .string), Attribute("score", .int),
        Attribute("ratio", .double), Attribute("payload", .bytes),
    ], indexes: [Index("byScore", on: ["score"])]),
])
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("profile-\(UUID().uuidString)").path
defer { try? FileManager.default.removeItem(atPath: directory) }
/// In a function of its own: a closure in top-level code that reads its globals checks the main
/// actor's isolation at every access (11% of the instructions, before).
func insertAll(_ store: LMDBStore, count: Int) throws {
    try store.writeSync { w in
        for i in 0..<count {
            try w.insert(["id": .int(Int64(i)), "name": .string("name-\(i % 1_000)"), "score": .int(Int64(i % 1_000)),
                          "ratio": .double(Double(i % 997) / 997),
                          "payload": .bytes((0..<16).map { UInt8(truncatingIfNeeded: i &+ $0) })], into: "Item")
        }
    }
}

do {
    let store = try LMDBStore(path: directory, schema: schema,
                              options: LMDBOptions(durability: .normal, initialMapSize: 1 << 30))
    try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: false)) }
    try insertAll(store, count: count)
    try store.close()
} catch {
    FileHandle.standardError.write(Data("profile-lmdb-insert: \(error)\n".utf8))
    exit(1)
}
