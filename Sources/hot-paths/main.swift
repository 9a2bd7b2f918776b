// hot-paths: hot operations of a store, for callgrind to count their instructions
// (Scripts/instruction-counts.sh runs every operation of a backend in one process under `valgrind
// --tool=callgrind --toggle-collect='*runHotPath*'`, with a dump of the counts as each operation
// begins, and compares the count per item with the committed thresholds).
//
//     hot-paths sqlite|lmdb|memory[-encrypted] insert|get|fetch|forEach|visit|query|unindexed|typed-fetch|typed-insert|model-fetch|model-insert[,...] COUNT
//
// A backend with `-encrypted` opens an encrypted store (a raw key): the cost of the sealing.
//
// typed-fetch and typed-insert go through `Codable`; model-fetch and model-insert through the code
// `@StoredModel` generates (``ModelItem``, written out here so that this program does not build
// swift-syntax): the row decoder, the stored fields' reader (LMDB's fetch reads each model from its
// record's fields in place), and the fields handed over one at a time.
//
// query: 100 fetches of one value of the indexed attribute (`score == n`); unindexed: one fetch
// filtered on the double, which no index covers (`ratio < 0.01`).
//
// Each operation runs on a new store, seeded with COUNT items first (for the reads), outside the
// collected function. The items are the benchmark harness's: an int key, a short string, an
// indexed int, a double and 16 bytes. Run with SWIFT_DETERMINISTIC_HASHING=1, so that hashing,
// and with it the count, is the same from run to run.
import DataStoreAPI
import Foundation
import InMemoryStore
import LMDBStore
import SQLiteStore

struct Item: DataObject {
    static let entityName = "Item"
    static let primaryKey = "id"
    var id: Int64
    var name: String
    var score: Int64
    var ratio: Double
    var payload: [UInt8]

    init(_ i: Int) {
        id = Int64(i)
        name = "name-\(i % 1_000)"
        score = Int64(i % 1_000)
        ratio = Double(i % 997) / 997
        payload = (0..<16).map { UInt8(truncatingIfNeeded: i &+ $0) }
    }

    init(id: Int64, name: String, score: Int64, ratio: Double, payload: [UInt8]) {
        (self.id, self.name, self.score, self.ratio, self.payload) = (id, name, score, ratio, payload)
    }

    var record: Record {
        ["id": .int(id), "name": .string(name), "score": .int(score), "ratio": .double(ratio), "payload": .bytes(payload)]
    }
}

/// ``Item`` as `@StoredModel` declares it: what the macro generates, written out.
struct ModelItem: RowCodable {
    static let entityName = "Item"
    static let primaryKey = "id"
    var item: Item

    init(_ item: Item) { self.item = item }

    init(row: borrowing Row) throws {
        item = Item(id: try Int64(row: row, attribute: "id"), name: try String(row: row, attribute: "name"),
                    score: try Int64(row: row, attribute: "score"), ratio: try Double(row: row, attribute: "ratio"),
                    payload: try [UInt8](row: row, attribute: "payload"))
    }

    func record() throws -> Record { item.record }

    static let storedModelLayout: StoredModelLayout? = StoredModelLayout(["id", "name", "score", "ratio", "payload"])

    func writeStoredFields(to fields: inout StoredFieldBuffer) throws {
        try item.id.appendStored(to: &fields)
        try item.name.appendStored(to: &fields)
        try item.score.appendStored(to: &fields)
        try item.ratio.appendStored(to: &fields)
        try item.payload.appendStored(to: &fields)
    }

    static var readsStoredFields: Bool { true }

    /// The fields read back in order where the backend keeps them so (LMDB), as the macro writes it.
    init?(storedFields reader: inout StoredFieldReader) {
        guard let id = StoredModelSupport.readStored(&reader, as: { (model: Self) in model.item.id }),
              let name = StoredModelSupport.readStored(&reader, as: { (model: Self) in model.item.name }),
              let score = StoredModelSupport.readStored(&reader, as: { (model: Self) in model.item.score }),
              let ratio = StoredModelSupport.readStored(&reader, as: { (model: Self) in model.item.ratio }),
              let payload = StoredModelSupport.readStored(&reader, as: { (model: Self) in model.item.payload }),
              reader.isAtEnd else { return nil }
        item = Item(id: id, name: name, score: score, ratio: ratio, payload: payload)
    }

    init(from decoder: any Decoder) throws { item = try Item(from: decoder) }
    func encode(to encoder: any Encoder) throws { try item.encode(to: encoder) }
}

let schema = Schema(entities: [
    EntitySchema("Item", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("name", .string), Attribute("score", .int),
        Attribute("ratio", .double), Attribute("payload", .bytes),
    ], indexes: [Index("byScore", on: ["score"])]),
])

let backends = ["sqlite", "lmdb", "memory"].flatMap { [$0, $0 + "-encrypted"] }
let operations = ["insert", "get", "fetch", "forEach", "visit", "query", "unindexed", "typed-fetch", "typed-insert",
                  "model-fetch", "model-insert", "small", "small-off"]
let arguments = CommandLine.arguments
let chosen = arguments.count == 4 ? arguments[2].split(separator: ",").map(String.init) : []
guard arguments.count == 4, backends.contains(arguments[1]), !chosen.isEmpty, chosen.allSatisfy(operations.contains),
      let count = Int(arguments[3]), count > 0 else {
    FileHandle.standardError.write(Data(("usage: hot-paths \(backends.joined(separator: "|")) "
        + "\(operations.joined(separator: "|"))[,...] COUNT\n").utf8))
    exit(2)
}
let backend = arguments[1]

/// Hands a value to code the optimizer cannot see into.
@inline(never) func consume<T>(_ value: T) { withExtendedLifetime(value) {} }

/// The operation callgrind counts: callgrind's --toggle-collect switches counting on when a
/// function whose name matches is entered and off when it returns, and again for every nested
/// function that matches (the closures of a function carry its name), so the operation's closures
/// are in ``operate(_:_:_:_:)``, whose name does not match.
@inline(never)
func runHotPath(_ store: any DataStore, _ operation: String, _ items: [Item], _ models: [ModelItem],
                _ records: [Record]) throws -> Int {
    try operate(store, operation, items, models, records)
}

@inline(never)
func operate(_ store: any DataStore, _ operation: String, _ items: [Item], _ models: [ModelItem],
             _ records: [Record]) throws -> Int {
    switch operation {
    case "insert":
        try store.writeSync { w in for record in records { try w.insert(record, into: "Item") } }
        return records.count
    case "typed-insert":
        try store.writeSync { w in for item in items { try w.insert(item) } }
        return items.count
    case "model-insert":
        try store.writeSync { w in for model in models { try w.insert(model) } }
        return models.count
    case "model-fetch":
        return try store.read { try $0.fetch(ModelItem.self) }.count
    case "small", "small-off":
        // One insert a transaction (the store's change feed on, as it opens, or off): what a
        // commit costs besides the backend's own work.
        for record in records { try store.writeSync { try $0.insert(record, into: "Item") } }
        return records.count
    case "get":
        return try store.read { r in
            try items.reduce(0) { $0 + (try r.get("Item", key: .int($1.id)) == nil ? 0 : 1) }
        }
    case "fetch":
        return try store.read { try $0.fetch(FetchRequest("Item")).count }
    case "forEach":
        return try store.read { r in
            var visited = 0
            try r.forEach(FetchRequest("Item")) { record in
                consume(record)
                visited += 1
            }
            return visited
        }
    case "query":
        return try store.read { r in
            try (0..<100).reduce(0) { $0 + (try r.fetch(FetchRequest("Item", filter: Field("score") == .int(Int64($1))))).count }
        }
    case "unindexed":
        return try store.read { try $0.fetch(FetchRequest("Item", filter: Field("ratio") < 0.01)).count }
    case "visit":
        return try store.read { r in
            var total: Int64 = 0
            try r.visit(FetchRequest("Item")) { row in
                total &+= try row.int("id") &+ row.int("score") &+ Int64(row.double("ratio"))
                    &+ Int64(row.withUTF8("name") { $0.count }) &+ Int64(row.withBytes("payload") { $0.count })
            }
            return Int(truncatingIfNeeded: total)
        }
    default:
        return try store.read { try $0.fetch(Item.self) }.count
    }
}

let directory = NSTemporaryDirectory() + "hot-paths-\(getpid())"
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }
let key = backend.hasSuffix("-encrypted") ? try StoreKey(rawKey: (0..<32).map { UInt8($0) }) : nil
let items = (0..<count).map(Item.init)
let records = items.map(\.record)
let models = items.map(ModelItem.init)
// Each operation on a store of its own, in the order given (one process for several saves
// callgrind's start, about 2.4 s of each run here; a dump as `runHotPath` is entered leaves each
// operation's count in a file of its own).
for (index, operation) in chosen.enumerated() {
    let path = directory + "/\(index)"
    let store: any DataStore
    switch backend.split(separator: "-").first {
    case "sqlite": store = try SQLiteStore(path: path + ".sqlite", schema: schema,
                                           options: SQLiteOptions(durability: .normal, key: key))
    case "lmdb": store = try LMDBStore(path: path + ".lmdb", schema: schema,
                                       options: LMDBOptions(durability: .normal, initialMapSize: 1 << 30, key: key))
    default: store = try InMemoryStore(schema: schema, key: key)
    }
    if operation == "small-off" {
        try store.writeSync { try $0.setChangeFeedSettings(ChangeFeedSettings(isEnabled: false)) }
    }
    if !operation.hasSuffix("insert") && !operation.hasPrefix("small") {
        try store.writeSync { w in for record in records { try w.insert(record, into: "Item") } }
    }
    let result = try runHotPath(store, operation, items, models, records)
    try store.close()
    print("\(backend) \(operation) \(count): \(result)")
}
