@_spi(Backend) import DataStoreAPI
import Foundation
import Synchronization

/// A JSON Lines file read as a store: the engine of ``JSONLinesStore``.
///
/// Opening reads the whole file once, checking every line (the same check as
/// ``JSONLines/check(_:)``), and keeps per entity its item count, where its lines start and a
/// sparse index (every 1,024th key with its offset): memory grows by about one key per 1,024
/// items. The engine holds the file open by descriptor, so a writer that replaces the file
/// (``JSONLStreamWriter`` renames a finished file into place) never changes what a reader sees.
///
/// Reads stream: a key-order `scan` continues from where the previous page of the same entity
/// ended (the migration engine's pattern) without starting over; a `get` starts at the nearest
/// indexed key; `fetch` and `count` read the entity's lines once. A compressed file can only be
/// read forward, so each `get` or out-of-order `scan` decompresses from the start of the file.
/// Writing is refused with `readOnly`: a JSON Lines store is written whole, by
/// `migrate-store copy`/`sync` (or ``JSONLines/export(_:to:pageSize:progress:)``).
final class JSONLEngine: StorageEngine, CommitCounting {
    /// What the opening pass learned about one entity.
    struct EntityLines {
        var count = 0
        /// The offset and number of the line before the entity's first (where to seek).
        var start: (offset: Int64, lineNumber: Int)?
        /// Every 1,024th key, with the offset and number of the line before it.
        var index: [(key: [UInt8], offset: Int64, lineNumber: Int)] = []
    }

    static let indexStride = 1_024

    let path: String
    let schema: Schema
    /// The header's metadata (an encrypted store's key record and sealed schema).
    let metadata: [String: [UInt8]]
    let entities: [String: EntityLines]
    private let descriptor: Int32
    /// Readers left where a scan stopped, by entity, for the next page.
    private let idle = Mutex<[JSONLCursor]>([])
    /// Every key of an entity, read once when a reference check first asks (see
    /// ``keys(of:)``).
    private let keySets = Mutex<[String: Set<[UInt8]>]>([:])
    /// How many item lines the engine's cursors decoded: what a read costs here, counted so
    /// that a test can tell a pass over an entity from one per page.
    let linesDecoded = LineCount()

    /// What one checking pass over a file learned: the schema and each entity's lines.
    struct Scan: @unchecked Sendable {
        var schema: Schema
        /// The header's metadata: an encrypted store's key record and sealed schema.
        var metadata: [String: [UInt8]]
        var entities: [String: EntityLines]
        /// The file it read: device, inode, size and modification time.
        var identity: [Int]
    }

    /// The last file ``check(_:)`` read, so that opening it right after (a copy checks its
    /// source, then opens it) does not read it again.
    private static let lastCheck = Mutex<(path: String, scan: Scan)?>(nil)

    init(path: String) throws {
        let descriptor = Foundation.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let reason = String(cString: strerror(errno))
            throw StoreError(errno == ENOENT ? .notFound : .io, "\(path) cannot be opened: \(reason)")
        }
        do {
            let identity = try Self.identity(descriptor, path)
            let checked = Self.lastCheck.withLock { last -> Scan? in
                defer { last = nil }
                return last.flatMap { $0.path == path && $0.scan.identity == identity ? $0.scan : nil }
            }
            let scan = try checked ?? Self.scan(path, opening: Self.procPath(descriptor), identity: identity)
            try JSONLHeader.refuseWithoutKey(scan.metadata, path: path)
            self.path = path
            self.schema = scan.schema
            metadata = scan.metadata
            self.entities = scan.entities
            self.descriptor = descriptor
        } catch {
            _ = Foundation.close(descriptor)
            throw error
        }
    }

    /// Reads and checks every line (``JSONLines/check(_:)``), keeping what a store needs of it
    /// for an open that follows.
    static func check(_ path: String) throws -> Scan {
        let descriptor = Foundation.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let reason = String(cString: strerror(errno))
            throw StoreError(errno == ENOENT ? .notFound : .io, "\(path) cannot be opened: \(reason)")
        }
        defer { _ = Foundation.close(descriptor) }
        let scan = try Self.scan(path, opening: procPath(descriptor), identity: identity(descriptor, path))
        lastCheck.withLock { $0 = (path, scan) }
        return scan
    }

    private static func identity(_ descriptor: Int32, _ path: String) throws -> [Int] {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw StoreError(.io, "\(path) cannot be examined: \(String(cString: strerror(errno)))")
        }
        return [Int(info.st_dev), Int(info.st_ino), Int(info.st_size), Int(info.st_mtim.tv_sec),
                Int(info.st_mtim.tv_nsec)]
    }

    private static func scan(_ path: String, opening: String, identity: [Int]) throws -> Scan {
        var entities: [String: EntityLines] = [:]
        let (schema, metadata) = try JSONLines.read(path, opening: opening) { reader, entity, key, _ in
            // Seeking to the line's offset, numbered as the line before it, reads it next.
            let here = (offset: reader.lineOffset, lineNumber: reader.lineNumber - 1)
            var lines = entities[entity.name] ?? EntityLines()
            if lines.start == nil { lines.start = here }
            if lines.count % Self.indexStride == 0 { lines.index.append((key, here.offset, here.lineNumber)) }
            lines.count += 1
            entities[entity.name] = lines
        }
        return Scan(schema: schema, metadata: metadata, entities: entities, identity: identity)
    }

    deinit { _ = Foundation.close(descriptor) }

    /// A path that opens the very file this engine holds, whatever has been renamed over it.
    private static func procPath(_ descriptor: Int32) -> String { "/proc/self/fd/\(descriptor)" }

    func withReader<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        try body(JSONLReader(engine: self))
    }

    func withWriter<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        throw StoreError(.readOnly, "\(path) is a JSON Lines file, which is read as a store and written whole: "
            + "use migrate-store copy or sync --to jsonl:\(path)")
    }

    func close() throws {
        idle.withLock { $0.removeAll() }
    }

    /// Nothing ever commits to a JSON Lines store.
    func commitCounter() throws -> UInt64 { 0 }

    // MARK: Cursors

    /// A cursor for `entity` whose next line is the first with a key after `after` (from the
    /// entity's start when `nil`): an idle one left exactly there when there is one.
    func cursor(_ entity: EntitySchema, after: [UInt8]?) throws -> JSONLCursor {
        if let reused = idle.withLock({ cursors -> JSONLCursor? in
            guard let i = cursors.firstIndex(where: { $0.entity.name == entity.name && $0.lastKey == after }) else {
                return nil
            }
            return cursors.remove(at: i)
        }) {
            return reused
        }
        let cursor = try cursor(entity, near: after)
        if let after { try cursor.skip(through: after) }
        return cursor
    }

    /// A new cursor for `entity` at the last indexed key not after `key` (at the entity's start
    /// when `nil`).
    func cursor(_ entity: EntitySchema, near key: [UInt8]?) throws -> JSONLCursor {
        let reader = try JSONLLineReader(path: path, opening: Self.procPath(descriptor))
        let cursor = JSONLCursor(reader: reader, entity: entity, schema: schema, count: linesDecoded)
        guard let lines = entities[entity.name], var from = lines.start else {
            cursor.exhausted = true
            return cursor
        }
        if let key, let entry = lines.index.last(where: { !key.lexicographicallyPrecedes($0.key) }) {
            from = (entry.offset, entry.lineNumber)
        }
        try reader.seek(toOffset: from.offset, lineNumber: from.lineNumber)
        return cursor
    }

    /// Every encoded key of `entity`, read in one pass the first time and kept: a point get
    /// reads up to 1,024 lines (or, compressed, the file from its start), so a check of every
    /// reference of a store asks this set instead (memory: the keys of the entities referred to).
    func keys(of entity: EntitySchema) throws -> Set<[UInt8]> {
        if let keys = keySets.withLock({ $0[entity.name] }) { return keys }
        var keys: Set<[UInt8]> = []
        keys.reserveCapacity(entities[entity.name]?.count ?? 0)
        let cursor = try cursor(entity, near: nil)
        while let item = try cursor.next() { keys.insert(item.key) }
        keySets.withLock { $0[entity.name] = keys }
        return keys
    }

    /// Keeps a cursor for the next page (a few per engine).
    func park(_ cursor: JSONLCursor) {
        guard !cursor.exhausted else { return }
        idle.withLock { cursors in
            cursors.append(cursor)
            if cursors.count > 4 { cursors.removeFirst() }
        }
    }
}

/// A count shared by an engine's cursors.
final class LineCount: Sendable {
    let value = Atomic<Int>(0)
}

/// A reader positioned inside one entity's lines, reading them in key order.
///
/// `@unchecked Sendable`: one reader uses it at a time; it passes between readers only through
/// the engine's lock (``JSONLEngine/park(_:)``).
final class JSONLCursor: @unchecked Sendable {
    let reader: JSONLLineReader
    let entity: EntitySchema
    let schema: Schema
    /// The key of the last item returned (or skipped).
    var lastKey: [UInt8]?
    var exhausted = false
    private var pending: (key: [UInt8], record: Record)?
    private lazy var decoder = CanonicalLineDecoder(schema: schema)
    private let count: LineCount

    init(reader: JSONLLineReader, entity: EntitySchema, schema: Schema, count: LineCount) {
        self.reader = reader
        self.entity = entity
        self.schema = schema
        self.count = count
    }

    /// The next item of the entity, or `nil` after its last.
    func next() throws -> (key: [UInt8], record: Record)? {
        if let item = pending {
            pending = nil
            lastKey = item.key
            return item
        }
        guard !exhausted, let line = try reader.next() else {
            exhausted = true
            return nil
        }
        count.value.add(1, ordering: .relaxed)
        let (lineEntity, record) = try decoder.decode(line)
            ?? JSONLineCodec.decode(line, schema: schema, lineNumber: reader.lineNumber)
        guard lineEntity.name == entity.name else {
            exhausted = true
            return nil
        }
        let key = try PrimaryKey(record[entity.primaryKey]).bytes
        lastKey = key
        return (key, record)
    }

    /// Reads past every item whose key is not after `key`.
    func skip(through key: [UInt8]) throws {
        while let item = try next() {
            if key.lexicographicallyPrecedes(item.key) {
                pending = item
                lastKey = key
                return
            }
        }
        lastKey = key
    }
}

/// A read transaction: the file is immutable, so every read sees the same snapshot.
struct JSONLReader: StorageReader {
    let engine: JSONLEngine

    func get(_ entity: EntitySchema, key: PrimaryKey) throws -> Record? {
        // The indexed key at or before the one sought, then forward.
        let cursor = try engine.cursor(entity, near: key.bytes)
        while let item = try cursor.next() {
            if item.key == key.bytes { return item.record }
            if key.bytes.lexicographicallyPrecedes(item.key) { return nil }
        }
        return nil
    }

    func fetch(_ request: FetchRequest, in entity: EntitySchema) throws -> [Record] {
        var stages = RequestStages(request)
        let cursor = try engine.cursor(entity, after: nil)
        while let item = try cursor.next() {
            if !stages.offer(key: item.key, record: item.record) { break }
        }
        return stages.finish()
    }

    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int {
        if case .all = filter { return engine.entities[entity.name]?.count ?? 0 }
        var count = 0
        let cursor = try engine.cursor(entity, after: nil)
        while let item = try cursor.next() {
            if filter.matches(item.record) { count += 1 }
        }
        return count
    }

    func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int) throws -> [Record] {
        let cursor = try engine.cursor(entity, after: key?.bytes)
        var page: [Record] = []
        while page.count < limit, let item = try cursor.next() { page.append(item.record) }
        engine.park(cursor)
        return page
    }

    func metadata(forKey key: String) throws -> [UInt8]? { engine.metadata[key] }

    func existingKeys(_ entity: EntitySchema, among keyValues: [Value]) throws -> Set<Value> {
        let keys = try engine.keys(of: entity)
        return Set(try keyValues.filter { keys.contains(try PrimaryKey($0).bytes) })
    }
}
