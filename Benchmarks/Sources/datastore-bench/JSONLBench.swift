import BenchSupport
import DataStoreAPI
import Foundation
import InMemoryStore
import JSONLStore
import LMDBStore
import SQLiteStore
import StoreMigration

/// The workload's item as a plain Codable struct, for the baseline loops.
struct PlainItem: Codable {
    var id: Int64
    var name: String
    var score: Int64
    var ratio: Double
    var payload: Data
}

/// Export and load of `n` items through JSON Lines on every backend, next to a plain loop over
/// the same items: `JSONEncoder` encoding each into a line of a file (export), and
/// `JSONSerialization` parsing each line of that file into a dictionary (load). The loops neither
/// read nor write a store, nor check types or order: they are the floor of JSON work. With `key`,
/// the stores and the migration's `jsonl:` file encrypted (an export through `JSONLines` is
/// written in the clear, as the user asks; the loops as they are).
@MainActor func benchmarkJSONLines(n: Int, key: StoreKey? = nil) throws {
    let suffix = key == nil ? "" : ", encrypted"
    let workload = Workload(count: n)
    let directory = scratch("jsonl")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    // The baselines.
    let plainPath = directory + "/plain.jsonl"
    let encodeSeconds = try time {
        let encoder = JSONEncoder()
        FileManager.default.createFile(atPath: plainPath, contents: nil)
        let handle = FileHandle(forWritingAtPath: plainPath)!
        var buffer = Data()
        for i in 0..<n {
            buffer += try encoder.encode(PlainItem(id: Int64(i), name: workload.name(i), score: workload.score(i),
                                                   ratio: workload.ratio(i), payload: Data(workload.payload(i))))
            buffer.append(0x0A)
            if buffer.count > 1 << 16 {
                try handle.write(contentsOf: buffer)
                buffer.removeAll(keepingCapacity: true)
            }
        }
        try handle.write(contentsOf: buffer)
        try handle.close()
    }
    var parsed = 0
    let parseSeconds = try time {
        let data = try Data(contentsOf: URL(fileURLWithPath: plainPath))
        for line in data.split(separator: 0x0A) where !line.isEmpty {
            if try JSONSerialization.jsonObject(with: line) is [String: Any] { parsed += 1 }
        }
    }
    precondition(parsed == n)
    for backend in ["SQLite", "LMDB", "in-memory"] {
        func open(_ name: String) throws -> any DataStore {
            switch backend {
            case "SQLite":
                return try SQLiteStore(path: "\(directory)/\(name).sqlite", schema: Workload.schema,
                                       options: SQLiteOptions(durability: .normal, key: key))
            case "LMDB":
                return try LMDBStore(path: "\(directory)/\(name).lmdb", schema: Workload.schema,
                                     options: LMDBOptions(durability: .normal, initialMapSize: 8 << 30, key: key))
            default:
                return try InMemoryStore(schema: Workload.schema, key: key)
            }
        }
        let source = try open("source")
        try APIBench(store: source, workload: workload).insertAll(from: 0, count: n, batch: 10_000)
        let path = "\(directory)/\(backend).jsonl"
        var exported = 0
        let exportSeconds = try time { exported = try JSONLines.export(source, to: path) }
        precondition(exported == n)
        try source.close()
        let destination = try open("destination")
        var loaded = 0
        let loadSeconds = try time { loaded = try JSONLines.load(path, into: destination, batchSize: 10_000) }
        precondition(loaded == n)
        try destination.close()
        record(backend + suffix, "JSON Lines export (vs JSONEncoder loop)", n, operations: n, api: exportSeconds, raw: encodeSeconds, memory: false)
        record(backend + suffix, "JSON Lines load, one transaction (vs JSONSerialization loop)", n, operations: n,
               api: loadSeconds, raw: parseSeconds, memory: false)
        // The same through the jsonl: kind of the migration engine (checkpointed batches; the
        // source file checked by a pass of its own, then read once more while opening).
        let kind: StoreKind = backend == "SQLite" ? .sqlite : backend == "LMDB" ? .lmdb : .memory
        func location(_ name: String) -> StoreLocation {
            kind == .memory ? StoreLocation(kind: .memory, path: "bench-\(name)-\(n)\(suffix)", key: key)
                : StoreLocation(kind: kind, path: "\(directory)/\(name).\(kind.rawValue)", key: key)
        }
        let from = location("kind-source")
        let kindSource = try from.open(schema: Workload.schema, durability: .normal)
        try APIBench(store: kindSource, workload: workload).insertAll(from: 0, count: n, batch: 10_000)
        try kindSource.close()
        let file = StoreLocation(kind: .jsonl, path: "\(directory)/\(backend)-kind.jsonl", key: key)
        let options = MigrationOptions(batchSize: 10_000, verify: false, checkSource: false)
        let copyOutSeconds = try time { _ = try Migrator.copy(from: from, to: file, options: options) }
        var checked = options
        checked.checkSource = true
        let into = location("kind-destination")
        let copyInSeconds = try time { _ = try Migrator.copy(from: file, to: into, options: checked) }
        let differences = try Migrator.verify(from: from, to: into).differences
        precondition(differences == 0)
        for l in [from, into] { try l.destroy() }
        record(backend + suffix, "copy --to jsonl: (vs JSONEncoder loop)", n, operations: n, api: copyOutSeconds,
               raw: encodeSeconds, memory: false)
        record(backend + suffix, "copy --from jsonl:, checked (vs JSONSerialization loop)", n, operations: n,
               api: copyInSeconds, raw: parseSeconds, memory: false)
    }
}
