@_spi(Backend) import DataStoreAPI
import Foundation
internal import CZlib

/// The `jsonl` kind: `jsonl:PATH` is a JSON Lines file (gzip-compressed when PATH ends in
/// `.gz`): a header line with the schema, then one item per line, entity by entity in key
/// order. The migration engine reads it as a store and writes it as one stream.
@_spi(Backend) public struct JSONLBackend: StreamedStoreBackend {
    public init() {}

    public var kind: StoreKind { "jsonl" }
    public var fileExtension: String? { "jsonl" }

    public func exists(at path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// A file named `*.jsonl` or `*.jsonl.gz` that begins with a store header: a rejects file
    /// or a diff, also JSON Lines, is not a store.
    public func recognizes(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        guard path.hasSuffix(".jsonl") || path.hasSuffix(".jsonl.gz"),
            FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
            let file = gzopen(path, "rb")
        else { return false }
        defer { gzclose(file) }
        let header = Array(#"{"datastore":"jsonl""#.utf8)
        var start = [UInt8](repeating: 0, count: header.count)
        return gzread(file, &start, UInt32(header.count)) == header.count && start == header
    }

    public func open(at path: String, schema: Schema?, upgrades: SchemaUpgrades, durability: Durability) throws
        -> any DataStore
    {
        try open(at: path, schema: schema, upgrades: upgrades, durability: durability, key: nil)
    }

    /// An encrypted file (``SealedStream``) opens with its key, read-only as every JSON Lines store.
    public func open(at path: String, schema: Schema?, upgrades: SchemaUpgrades, durability: Durability,
                     key: StoreKey?) throws -> any DataStore
    {
        guard exists(at: path) else {
            if let source = JSONLStreamWriter.unfinishedPosition(path)?.source {
                throw StoreError(.incompleteMigration, "jsonl:\(path) is the destination of an unfinished copy from "
                    + "\(source); finish it with: " + ShellCommand.resume(from: source, to: "jsonl:\(path)"))
            }
            throw StoreError(.notFound, "jsonl:\(path) does not exist; a JSON Lines store is made by "
                + "migrate-store copy --to jsonl:\(path)")
        }
        let store = try JSONLinesStore(path: path, key: key)
        if let schema, schema != store.schema {
            try? store.close()
            throw StoreError(.schemaMismatch, "jsonl:\(path) holds schema version \(store.schema.version) with "
                + "entities \(store.schema.entities.map(\.name).joined(separator: ", ")), not the one asked for; "
                + "a JSON Lines store is read-only, so copy it into another kind to migrate it")
        }
        return store
    }

    public func openSource(at path: String, alreadyChecked: Bool) throws -> any DataStore {
        try open(at: path, schema: nil, durability: .full)
    }

    public func openSource(at path: String, alreadyChecked: Bool, key: StoreKey?) throws -> any DataStore {
        try open(at: path, schema: nil, upgrades: SchemaUpgrades(), durability: .full, key: key)
    }

    public func check(at path: String) throws -> EngineCheck {
        let items = try JSONLEngine.check(path).entities.values.reduce(0) { $0 + $1.count }
        return EngineCheck("every line read and checked, keys in order", itemsChecked: items)
    }

    public func destroy(at path: String) throws {
        // A file at the staging path that no copy left there is a user's, and stays.
        let staging = JSONLStreamWriter.hasLeftover(path) ? [JSONLStreamWriter.stagingPath(path)] : []
        for file in [path] + staging + [JSONLStreamWriter.checkpointPath(path)]
        where FileManager.default.fileExists(atPath: file) {
            do {
                try FileManager.default.removeItem(atPath: file)
            } catch {
                throw StoreError(.io, "\(file) cannot be removed: \(error.localizedDescription)")
            }
        }
    }

    public func move(from path: String, to other: String) throws {
        guard !exists(at: other) else { throw StoreError(.invalidArgument, "\(other) already exists") }
        guard rename(path, other) == 0 else {
            throw StoreError(.io, "cannot move \(path) to \(other): \(String(cString: strerror(errno)))")
        }
    }

    public func sizeOnDisk(at path: String) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? 0
    }

    // MARK: Streams

    public func beginStream(at path: String, schema: Schema, source: String, key: StoreKey?) throws
        -> any StreamedStoreWriter
    {
        try JSONLStreamWriter.begin(at: path, schema: schema, source: source, key: key)
    }

    /// A stream a copy left with its checkpoint; one killed before its first checkpoint holds
    /// nothing to go on from, and the next copy starts it again.
    public func hasUnfinishedStream(at path: String) -> Bool {
        JSONLStreamWriter.hasLeftover(path) && FileManager.default.fileExists(atPath: JSONLStreamWriter.checkpointPath(path))
    }

    public func unfinishedStreamPosition(at path: String) -> StreamPosition? {
        JSONLStreamWriter.unfinishedPosition(path)
    }

    public func resumeStream(at path: String, schema: Schema, key: StoreKey?) throws
        -> (writer: any StreamedStoreWriter, written: any DataStore)
    {
        guard let writer = try JSONLStreamWriter.resume(at: path, schema: schema, key: key) else {
            throw StoreError(.notFound, "nothing to resume: no unfinished copy into jsonl:\(path)")
        }
        let written = try JSONLinesStore(path: writer.staging, key: key)
        guard written.schema == schema else {
            try? written.close()
            throw StoreError(.schemaMismatch, "the unfinished copy into jsonl:\(path) was made with another schema "
                + "or entity list; start over with --overwrite")
        }
        return (writer, written)
    }
}
