// crash-writer: a test tool. Opens a store and commits numbered transactions until killed,
// printing each number once its writeSync has returned (acknowledged). It continues from the
// counter an earlier run left. Each transaction
// inserts ten items and moves a counter, so a partial commit would be visible.
//
//     crash-writer sqlite|lmdb PATH COUNT
//     crash-writer sqlite|lmdb PATH hold-read    (prints "reading" inside a read block, then waits to be killed)
import DataStoreAPI
import Foundation
import LMDBStore
import SQLiteStore

let schema = Schema(entities: [
    EntitySchema("Entry", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("batch", .int), Attribute("text", .string),
    ], indexes: [Index("byBatch", on: ["batch"])]),
    EntitySchema("Counter", primaryKey: "name", attributes: [Attribute("name", .string), Attribute("value", .int)]),
])

let arguments = CommandLine.arguments
let holdRead = arguments.count == 4 && arguments[3] == "hold-read"
guard arguments.count == 4, let count = holdRead ? 0 : Int(arguments[3]) else {
    FileHandle.standardError.write(Data("usage: crash-writer sqlite|lmdb PATH COUNT|hold-read\n".utf8))
    exit(2)
}
do {
    let store: any DataStore
    switch arguments[1] {
    case "sqlite": store = try SQLiteStore(path: arguments[2], schema: schema, options: SQLiteOptions(durability: .normal))
    case "lmdb":
        store = try LMDBStore(path: arguments[2], schema: schema,
                              options: LMDBOptions(durability: .normal, initialMapSize: 256 << 10))
    default:
        FileHandle.standardError.write(Data("unknown kind \(arguments[1])\n".utf8))
        exit(2)
    }
    if holdRead {
        try store.read { _ in
            FileHandle.standardOutput.write(Data("reading\n".utf8))
            while true { sleep(60) }
        }
    }
    let start = try store.read { r -> Int in
        if case .int(let done)? = try r.get("Counter", key: "committed")?["value"] { return Int(done) + 1 }
        return 1
    }
    for batch in start..<(start + count) {
        try store.writeSync { w in
            for i in 0..<10 {
                try w.insert(["id": .int(Int64(batch * 10 + i)), "batch": .int(Int64(batch)),
                              "text": .string(String(repeating: "x", count: 200))], into: "Entry")
            }
            try w.save(["name": "committed", "value": .int(Int64(batch))], into: "Counter")
        }
        FileHandle.standardOutput.write(Data("\(batch)\n".utf8))
    }
    try store.close()
} catch {
    FileHandle.standardError.write(Data("crash-writer: \(error)\n".utf8))
    exit(1)
}
