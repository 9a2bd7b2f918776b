import DataStoreAPI
import Foundation
import LMDBStore
import SQLiteStore

/// The schema upgrade the crash tests kill: version 1 `Entry(id, batch: int, text)` to version
/// 2, where every item is rewritten on every backend (a double default, a type change), an
/// attribute is renamed and an index is added.
enum UpgradeFixture {
    static let v1 = Schema(version: 1, entities: [
        EntitySchema("Entry", primaryKey: "id", attributes: [
            Attribute("id", .int), Attribute("batch", .int), Attribute("text", .string),
        ], indexes: [Index("byBatch", on: ["batch"])]),
    ])

    static let v2 = Schema(version: 2, entities: [
        EntitySchema("Entry", primaryKey: "id", attributes: [
            Attribute("id", .int), Attribute("batch", .string), Attribute("body", .string),
            Attribute("weight", .double, default: .double(1.5)),
        ], indexes: [Index("byBatch", on: ["batch"]), Index("byBody", on: ["body"])]),
    ])

    static func upgrades(progress: (@Sendable (SchemaUpgradeProgress) -> Void)?) -> SchemaUpgrades {
        var upgrades = SchemaUpgrades(progress: progress)
        upgrades.version(2,
                           .addAttribute(entity: "Entry", attribute: Attribute("weight", .double, default: .double(1.5))),
                           .changeType(entity: "Entry", attribute: "batch", to: .string),
                           .renameAttribute(entity: "Entry", from: "text", to: "body"),
                           .addIndex(entity: "Entry", index: Index("byBody", on: ["body"])))
        return upgrades
    }

    static func open(_ kind: String, _ path: String, _ schema: Schema, _ upgrades: SchemaUpgrades) throws
        -> any DataStore
    {
        kind == "sqlite"
            ? try SQLiteStore(path: path, schema: schema, upgrades: upgrades)
            : try LMDBStore(path: path, schema: schema, upgrades: upgrades,
                            options: LMDBOptions(initialMapSize: 1 << 20))
    }

    static func main(_ arguments: [String]) -> Int32 {
        let (kind, path, mode) = (arguments[1], arguments[2], arguments[3])
        do {
            if mode == "seed-v1" {
                let count = arguments.count > 4 ? Int(arguments[4]) ?? 0 : 0
                let store = try open(kind, path, v1, SchemaUpgrades())
                try store.writeSync { w in
                    for id in 0..<count {
                        try w.insert(["id": .int(Int64(id)), "batch": .int(Int64(id / 10)),
                                      "text": .string("entry \(id)")], into: "Entry")
                    }
                }
                try store.close()
            } else {
                let output = FileHandle.standardOutput
                let store = try open(kind, path, v2, upgrades { progress in
                    output.write(Data("progress \(progress.items)\n".utf8))
                })
                try store.close()
                output.write(Data("done\n".utf8))
            }
            return 0
        } catch {
            FileHandle.standardError.write(Data("crash-writer: \(error)\n".utf8))
            return 1
        }
    }
}
