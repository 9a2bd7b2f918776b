@_spi(Backend) import DataStoreAPI
internal import CZlib
import Foundation

/// Export of a store to a JSON Lines file and loading of one into a store, streamed both ways
/// in bounded memory: a header line with the schema, then one item per line
/// (``JSONLineCodec``), entity by entity in schema order, each in key order.
public enum JSONLines {
    /// Where an export or load stands.
    public struct Progress: Sendable {
        /// The entity.
        public var entity: String
        /// Its items in the file.
        public var items: Int
    }

    /// Writes every item of `store`, read in one snapshot, to `path` (gzip-compressed when it
    /// ends in `.gz`); returns the number of items. The file appears only when complete.
    @discardableResult
    public static func export(_ store: any DataStore, to path: String, pageSize: PositiveInt = 1_000,
                              progress: (Progress) -> Void = { _ in }) throws -> Int {
        try store.read { snapshot -> Int in
            let writer = try JSONLStreamWriter.begin(at: path, schema: snapshot.schema, source: "export")
            do {
                var total = 0
                for entity in snapshot.schema.entities {
                    var items = 0
                    try forEachPage(of: entity, in: snapshot, pageSize: pageSize) { page in
                        for record in page { try writer.append(record, of: entity) }
                        items += page.count
                        progress(Progress(entity: entity.name, items: items))
                    }
                    total += items
                }
                try writer.finish()
                return total
            } catch {
                writer.abandon()
                throw error
            }
        }
    }

    /// `OutputFiles.check(_:option:inputs:)` for a file a command writes at `path`, which also
    /// refuses a gzip-compressed JSON Lines store there (whose first bytes are gzip's, so that
    /// only a reader through zlib sees the store's header).
    /// - Throws: `invalidArgument`, naming the option, the path and what is there.
    public static func checkOutputFile(_ path: String, option: String, inputs: [String] = []) throws(StoreError) {
        try OutputFiles.check(path, option: option, inputs: inputs)
        guard holdsCompressedStore(path) else { return }
        throw StoreError(.invalidArgument, "\(option) \(path) holds a JSON Lines store (gzip-compressed); it is not "
            + "replaced: name another file, or remove it first")
    }

    /// Whether the regular file at `path` is gzip-compressed and begins, decompressed, as a JSON
    /// Lines store's header does.
    static func holdsCompressedStore(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        let magic = (try? handle.read(upToCount: 2)).map(Array.init) ?? []
        try? handle.close()
        guard magic == [0x1f, 0x8b], let file = gzopen(path, "rb") else { return false }
        defer { gzclose(file) }
        let header = Array(#"{"datastore":"jsonl""#.utf8)
        var head = [UInt8](repeating: 0, count: header.count)
        let read = head.withUnsafeMutableBytes { gzread(file, $0.baseAddress, UInt32($0.count)) }
        return read == header.count && head == header
    }

    /// The schema a JSON Lines file holds.
    public static func schema(of path: String) throws -> Schema {
        let reader = try JSONLLineReader(path: path)
        guard let header = try reader.next() else { throw StoreError(.notAStore, "\(path) is empty") }
        return try JSONLHeader.decode(header, path: path).schema
    }

    /// Checks every line of `path` without writing anything: the header, each line's JSON and
    /// types, entities in schema order, keys in strictly increasing order. Returns the number of
    /// items per entity.
    /// - Throws: one-line `corrupt` errors naming the file and the line.
    public static func check(_ path: String) throws -> [String: Int] {
        try JSONLEngine.check(path).entities.mapValues(\.count)
    }

    /// Loads `path` into `store` (whose schema must hold the file's entities as they are) in one
    /// write transaction, reading the file once: a damaged line, or any failure, rolls the whole
    /// load back, so a damaged file writes nothing. Items go to the store `batchSize` at a time
    /// (on PostgreSQL one `COPY` each), and `progress` is called after each batch, inside the
    /// transaction (it must not use the store).
    @discardableResult
    public static func load(_ path: String, into store: any DataStore, batchSize: PositiveInt = 1_000,
                            progress: (Progress) -> Void = { _ in }) throws -> Int {
        let fileSchema = try schema(of: path)
        for entity in fileSchema.entities where store.schema.entity(named: entity.name) != entity {
            throw StoreError(.schemaMismatch, "\(path): entity '\(entity.name)' differs from the store's (or the store "
                + "has none)")
        }
        return try store.writeSync { writer in
            var batch: [Record] = []
            var entityName = ""
            var total = 0
            func flush() throws {
                guard !batch.isEmpty else { return }
                try writer.insert(contentsOf: batch, into: entityName)
                total += batch.count
                progress(Progress(entity: entityName, items: total))
                batch.removeAll(keepingCapacity: true)
            }
            try read(path) { _, entity, _, record in
                if entity.name != entityName {
                    try flush()
                    entityName = entity.name
                }
                batch.append(record)
                if batch.count >= batchSize.value { try flush() }
            }
            try flush()
            return total
        }
    }

    /// Streams every item of `path` (read through the file `opening` names, when given),
    /// checking every line and the order as it goes; returns the header's schema and metadata.
    @discardableResult
    static func read(_ path: String, opening: String? = nil,
                     _ body: (JSONLLineReader, EntitySchema, [UInt8], Record) throws -> Void) throws
        -> (schema: Schema, metadata: [String: [UInt8]])
    {
        let reader = try JSONLLineReader(path: path, opening: opening)
        guard let header = try reader.next() else { throw StoreError(.notAStore, "\(path) is empty") }
        let (schema, metadata) = try JSONLHeader.decode(header, path: path)
        let decoder = CanonicalLineDecoder(schema: schema)
        var entityIndex = 0
        var lastKey: (entity: String, key: [UInt8])?
        while let line = try reader.next() {
            let number = reader.lineNumber
            let (entity, record): (EntitySchema, Record)
            let key: [UInt8]
            do {
                (entity, record) = try decoder.decode(line) ?? JSONLineCodec.decode(line, schema: schema, lineNumber: number)
                _ = try entity.normalize(record)
                key = try PrimaryKey(record[entity.primaryKey]).bytes
            } catch let error as StoreError {
                // A value the schema does not allow is damage in the file, named by its line.
                throw StoreError(.corrupt, "\(path): "
                    + (error.message.hasPrefix("line ") ? error.message : "line \(number): \(error.message)"))
            }
            guard let position = schema.entities.firstIndex(where: { $0.name == entity.name }),
                position >= entityIndex
            else {
                throw StoreError(.corrupt, "\(path): line \(number): '\(entity.name)' items come after those of a later "
                    + "entity; a file lists entities in schema order")
            }
            entityIndex = position
            if let lastKey, lastKey.entity == entity.name, !lastKey.key.lexicographicallyPrecedes(key) {
                throw StoreError(.corrupt, "\(path): line \(number): key \(record[entity.primaryKey]) of '\(entity.name)' "
                    + (lastKey.key == key ? "appears twice" : "is out of key order"))
            }
            lastKey = (entity.name, key)
            try body(reader, entity, key, record)
        }
        return (schema, metadata)
    }

    /// Calls `body` with each page of the entity's items, in key order.
    static func forEachPage(of entity: EntitySchema, in reader: ReadAccessor, pageSize: PositiveInt,
                            _ body: ([Record]) throws -> Void) throws {
        try reader.forEachPage(entity, pageSize: pageSize.value) { page in
            try body(page)
            return true
        }
    }
}
