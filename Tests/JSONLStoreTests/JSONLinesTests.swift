@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import InMemoryStore
@_spi(Backend) import JSONLStore
import LMDBStore
import SQLiteStore
import StoreMigration
import Testing

/// The stores a round trip goes through.
enum Kind: String, CaseIterable, Sendable {
    case memory, sqlite, lmdb

    func open(_ dir: TemporaryDirectory, _ name: String, _ schema: Schema) throws -> any DataStore {
        switch self {
        case .memory: return try InMemoryStore(schema: schema)
        case .sqlite: return try SQLiteStore(path: dir.path(name + ".sqlite"), schema: schema)
        case .lmdb: return try LMDBStore(path: dir.path(name + ".lmdb"), schema: schema)
        }
    }
}

/// Every item of every entity, in key order, with doubles compared bit for bit.
func contents(_ store: any DataStore) throws -> [String] {
    try store.read { r in
        try r.schema.entities.flatMap { entity in
            try r.scan(entity.name, after: nil, limit: .max).map { record in
                entity.name + ":" + entity.attributes.map { attribute -> String in
                    if case .double(let d) = record[attribute.name] { return "d\(d.bitPattern)" }
                    return "\(record[attribute.name])"
                }.joined(separator: "|")
            }
        }
    }
}

func edgeStore(_ kind: Kind, _ dir: TemporaryDirectory, _ name: String) throws -> any DataStore {
    let store = try kind.open(dir, name, EdgeDomain.schema)
    try store.writeSync { w in
        for (entity, records) in EdgeDomain.items(150, seed: 11) {
            for record in records { try w.insert(record, into: entity) }
        }
    }
    return store
}

/// A load is one transaction: an item whose key the store already holds, past the first batches,
/// fails the load with `keyExists` and leaves the store as it was, and the progress reported the
/// batches before it.
@Test(arguments: Kind.allCases)
func aLoadThatFailsMidwayLeavesTheStoreAsItWas(_ kind: Kind) throws {
    let dir = try TemporaryDirectory()
    let source = try edgeStore(kind, dir, "source")
    defer { try? source.close() }
    let path = dir.path("edge.jsonl")
    try JSONLines.export(source, to: path)
    let destination = try kind.open(dir, "destination", EdgeDomain.schema)
    defer { try? destination.close() }
    // The last EdgeUUID item, the last entity of the file, is there already.
    let taken = try #require(try source.read { try $0.fetch(FetchRequest("EdgeUUID")) }.last)
    try destination.writeSync { try $0.insert(taken, into: "EdgeUUID") }
    let before = try contents(destination)
    var reported = 0
    let error = #expect(throws: StoreError.self) {
        try JSONLines.load(path, into: destination, batchSize: 50, progress: { reported = $0.items })
    }
    #expect(error?.code == .keyExists, "\(String(describing: error))")
    #expect(reported >= 300, "progress reached \(reported) items before the failure")
    #expect(try contents(destination) == before)
}

/// store -> jsonl -> store gives the same items on every backend, plain and gzip-compressed, and
/// the file of the same store is the same bytes every time.
@Test(arguments: Kind.allCases)
func aStoreOfEdgeValuesRoundTripsThroughJSONLines(_ kind: Kind) throws {
    let dir = try TemporaryDirectory()
    let source = try edgeStore(kind, dir, "source")
    defer { try? source.close() }
    for file in ["edge.jsonl", "edge.jsonl.gz"] {
        let path = dir.path(file)
        let exported = try JSONLines.export(source, to: path)
        #expect(exported == 450)
        #expect(try JSONLines.check(path) == ["EdgeInt": 150, "EdgeText": 150, "EdgeUUID": 150])
        let copy = try kind.open(dir, "copy-\(file)", EdgeDomain.schema)
        defer { try? copy.close() }
        #expect(try JSONLines.load(path, into: copy) == 450)
        #expect(try contents(copy) == contents(source))
    }
    let again = dir.path("again.jsonl")
    try JSONLines.export(source, to: again)
    #expect(FileManager.default.contents(atPath: again) == FileManager.default.contents(atPath: dir.path("edge.jsonl")),
            "the same store gives the same bytes")
    #expect(!FileManager.default.fileExists(atPath: again + ".migrating"))
    #expect(!FileManager.default.fileExists(atPath: again + ".migrating.checkpoint"))
}

/// 200 damaged files (truncated at line boundaries and inside lines, plain and gzip; bytes that
/// are not UTF-8; values of the wrong type; keys out of order or twice; unknown entities): each
/// load fails with one line naming the file, and the destination stays empty; each copy from
/// `jsonl:FILE` fails the same way and leaves no destination.
@Test func damagedFilesGiveOneLineErrorsAndLoadNothing() throws {
    let dir = try TemporaryDirectory()
    let source = try edgeStore(.memory, dir, "source")
    let path = dir.path("good.jsonl")
    try JSONLines.export(source, to: path)
    let good = Array(FileManager.default.contents(atPath: path)!)
    let lines = good.split(separator: 0x0A, omittingEmptySubsequences: false).map(Array.init)
    var damaged: [(String, [UInt8])] = []
    var rng = SplitMix64(seed: 21)
    // Truncations: at line ends without the newline, and inside lines.
    for _ in 0..<60 {
        let cut = 1 + Int(rng.next() % UInt64(good.count - 2))
        if good[cut - 1] != 0x0A { damaged.append(("cut at byte \(cut)", Array(good[..<cut]))) }
    }
    // A byte that is not UTF-8 (0xFF), in a string, a number or the structure. (Another
    // character inside a string would be a different, valid file.)
    for _ in 0..<40 {
        var bytes = good
        let at = lines[0].count + 1 + Int(rng.next() % UInt64(good.count - lines[0].count - 2))
        guard bytes[at] != 0x0A else { continue }
        bytes[at] = 0xFF
        damaged.append(("byte \(at) replaced", bytes))
    }
    // Wrong types, unknown entities and attributes.
    for i in 0..<50 {
        var text = lines
        let line = 1 + Int(rng.next() % UInt64(lines.count - 2))
        var object = try #require(try JSONSerialization.jsonObject(with: Data(text[line])) as? [String: Any])
        var item = try #require(object["item"] as? [String: Any])
        switch i % 5 {
        case 0: item["n"] = "seven"
        case 1: item["d"] = true
        case 2: item["b"] = 12
        case 3: object["entity"] = "Nope"
        default: item["zz"] = 1
        }
        object["item"] = item
        text[line] = Array(try JSONSerialization.data(withJSONObject: object))
        damaged.append(("line \(line + 1) edited (\(i % 5))", Array(text.joined(separator: [0x0A]))))
    }
    for i in 0..<30 {
        var text = lines
        let line = 2 + Int(rng.next() % UInt64(lines.count - 3))
        if i % 2 == 0 { text.swapAt(line, line - 1) } else { text.insert(text[line], at: line) }
        damaged.append((i % 2 == 0 ? "lines \(line) and \(line + 1) swapped" : "line \(line + 1) twice",
                        Array(text.joined(separator: [0x0A]))))
    }
    // Gzip-compressed copies cut short.
    let gz = dir.path("good.jsonl.gz")
    try JSONLines.export(source, to: gz)
    let compressed = Array(FileManager.default.contents(atPath: gz)!)
    while damaged.count < 200 {
        let cut = 10 + Int(rng.next() % UInt64(compressed.count - 11))
        damaged.append(("gzip cut at byte \(cut)", Array(compressed[..<cut])))
    }
    #expect(damaged.count >= 200)
    var failures: [String] = []
    for (n, (what, bytes)) in damaged.enumerated() {
        let file = dir.path("damaged-\(n)" + (what.hasPrefix("gzip") ? ".jsonl.gz" : ".jsonl"))
        _ = FileManager.default.createFile(atPath: file, contents: Data(bytes))
        let destination = try InMemoryStore(schema: EdgeDomain.schema)
        do {
            try JSONLines.load(file, into: destination)
            failures.append("\(what): loaded")
        } catch let error as StoreError {
            if error.message.contains("\n") || !error.message.contains(file) {
                failures.append("\(what): \(error.message)")
            }
            if !what.hasPrefix("gzip") && !error.message.contains("line ") {
                failures.append("\(what): no line named: \(error.message)")
            }
        } catch {
            failures.append("\(what): \(error)")
        }
        if try contents(destination) != [] { failures.append("\(what): the destination is not empty") }
        let copy = StoreLocation(kind: .sqlite, path: dir.path("copy-\(n).sqlite"))
        do {
            _ = try Migrator.copy(from: StoreLocation(kind: .jsonl, path: file), to: copy)
            failures.append("\(what): copied")
        } catch let error as StoreError {
            if error.message.contains("\n") || !error.message.contains(file)
                || (!what.hasPrefix("gzip") && !error.message.contains("line "))
            {
                failures.append("\(what): copy: \(error.message)")
            }
        }
        if copy.exists || FileManager.default.fileExists(atPath: copy.path + ".migrating") {
            failures.append("\(what): the copy left a destination")
        }
    }
    #expect(failures == [], "\(failures.prefix(10))")
}

/// A checkpoint with nothing appended since the last one (an entity's last, empty page) keeps
/// the stream's length: a resume from it cuts nothing. (A SIGKILLed copy of 40,000 items in
/// batches of 500 once resumed from such a checkpoint to an empty file.)
@Test(arguments: ["plain.jsonl", "packed.jsonl.gz"])
func aCheckpointWithNothingNewKeepsTheStreamsLength(_ name: String) throws {
    let dir = try TemporaryDirectory()
    let source = try edgeStore(.memory, dir, "source")
    let path = dir.path(name)
    let backend = JSONLBackend()
    let writer = try backend.beginStream(at: path, schema: source.schema, source: "test", key: nil)
    let entity = try #require(source.schema.entities.first)
    let records = try source.read { try $0.scan(entity.name, after: nil, limit: 10) }
    for record in records { try writer.append(record, of: entity) }
    let position = StreamPosition(source: "test", entity: entity.name, lastKey: records.last?[entity.primaryKey])
    try writer.checkpoint(position)
    try writer.checkpoint(position)
    // The process dies here; a later run resumes.
    let (resumed, written) = try backend.resumeStream(at: path, schema: source.schema, key: nil)
    defer { try? written.close() }
    #expect(try written.read { try $0.scan(entity.name, after: nil, limit: 100) } == records)
    #expect(resumed.position == position)
    resumed.abandon()
}
