@_spi(Backend) import DataStoreAPI
import Foundation

/// A Realm file (`.realm`) opened read-only as a ``DataStore``, without realm-core: see
/// ``RealmMapping`` for what maps to what. The file is read once, whole, when the store opens
/// (one snapshot: the commit its header selects), and never written.
///
/// ```swift
/// let realm = try RealmStore(ForeignSource(path: "default.realm"))
/// let people = try realm.read { try $0.fetch(FetchRequest("Person")) }
/// ```
public final class RealmStore: Store, ForeignStore, @unchecked Sendable {
    public let summary: String
    public let facts: [String]

    /// Reads the file and maps its classes.
    /// - Throws: `notFound`; `notAStore` for a file that is not a Realm file (or is encrypted);
    ///   `incompatibleFormat` for a format this reader does not read; `corrupt` naming what is
    ///   damaged; `invalidArgument` naming a class or property that cannot be carried.
    public init(_ source: ForeignSource) throws {
        let path = source.path
        guard source.model == nil, source.keys.isEmpty else {
            throw StoreError(.invalidArgument, "realm:\(path) takes no model or key: a Realm file keeps its classes "
                + "and primary keys itself")
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw StoreError(.notFound, "\(path) does not exist")
        }
        guard !isDirectory.boolValue else {
            throw StoreError(.notAStore, "\(path) is a directory, not a Realm file")
        }
        let key = try source.keyFile.map { try RealmCipher.key(fromFile: $0) }
        let raw = try Self.snapshot(path)
        let bytes: [UInt8]
        let clear = RealmFile.hasHeader(raw)
        switch (clear, key) {
        case (false, let key?):
            bytes = try RealmCipher(key: key).decrypt(raw, path: path)
        case (false, nil) where RealmCipher.looksEncrypted(raw):
            throw StoreError(.notAStore, "\(path) has no Realm header in the clear: it is an encrypted Realm file "
                + "(give its key with --key-file, or keyfile= in the location), or not a Realm file")
        case (true, _?):
            throw StoreError(.invalidArgument, "\(path) is not encrypted (its Realm header is in the clear), yet a key "
                + "file was given: leave out --key-file (keyfile=)")
        default:
            bytes = raw
        }
        let file = try RealmFile(bytes: bytes, path: path)
        let mapping = try RealmMapping(try RealmModel(file), classes: source.tables)
        summary = mapping.summary
        facts = ["Realm file format \(file.format)" + (file.isStreaming ? ", in the streaming form (as writeCopy "
            + "writes it)" : "") + (key != nil ? ", encrypted (AES-256 pages with HMAC-SHA224)" : ""),
                 "\(raw.count) bytes, read whole when opened"]
        try super.init(engine: RealmEngine(path: path, mapping: mapping))
    }

    /// The file's bytes as of one commit. A Realm app that has the file open writes a commit
    /// into space that the commit before it does not use, then switches the header (the top
    /// references and the slot flag; in an encrypted file, the first page and its table entry)
    /// to it: so when those bytes are the same after the read as before, every byte the selected
    /// commit uses was read as that commit wrote it. When they changed, the file is read again.
    /// - Parameter afterRead: called after each read of the whole file, before the header is
    ///   read again (where a test lands a commit).
    /// - Throws: `busy` when commits keep coming faster than the file is read.
    static func snapshot(_ path: String, afterRead: () throws -> Void = {}) throws -> [UInt8] {
        for _ in 0..<8 {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw StoreError(.io, "\(path) cannot be read")
            }
            let bytes = [UInt8](data)
            try afterRead()
            let headerBytes = RealmCipher.looksEncrypted(bytes) ? RealmCipher.pageSize * 2 : 24
            guard bytes.count >= headerBytes else { return bytes }
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw StoreError(.io, "\(path) cannot be read")
            }
            let again = [UInt8]((try? handle.read(upToCount: headerBytes)) ?? Data())
            try? handle.close()
            if again.elementsEqual(bytes[0..<headerBytes]) { return bytes }
        }
        throw StoreError(.busy, "\(path) is being written: its header changed each of 8 times it was read; copy it "
            + "when the app that writes it is idle or closed")
    }
}

/// The engine of a ``RealmStore``: the mapped records, in key order, read from memory.
final class RealmEngine: StorageEngine, CommitCounting {
    let path: String
    let mapping: RealmMapping
    var schema: Schema { mapping.schema }

    init(path: String, mapping: RealmMapping) {
        self.path = path
        self.mapping = mapping
    }

    func withReader<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        try body(RealmReader(engine: self))
    }

    func withWriter<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        throw StoreError(.readOnly, "realm:\(path) is read as a source and never written: copy it into a store of "
            + "this toolkit (migrate-store copy --from realm:\(path) --to …)")
    }

    func close() throws {}

    func commitCounter() throws -> UInt64 { 0 }

    func records(of entity: EntitySchema) throws -> [Record] {
        guard let records = mapping.records[entity.name] else {
            throw StoreError(.unknownEntity, "realm:\(path) has no entity '\(entity.name)'")
        }
        return records
    }
}

struct RealmReader: StorageReader {
    let engine: RealmEngine

    /// The position of the first record whose key is at least (or, `after`, past) `key`.
    private func position(of key: PrimaryKey, in records: [Record], entity: EntitySchema, after: Bool) -> Int {
        var low = 0, high = records.count
        while low < high {
            let middle = (low + high) / 2
            let other = (try? PrimaryKey(entity.primaryKeyValue(of: records[middle])))
            let before = other.map { after ? $0 <= key : $0 < key } ?? true
            if before { low = middle + 1 } else { high = middle }
        }
        return low
    }

    func get(_ entity: EntitySchema, key: PrimaryKey) throws -> Record? {
        let records = try engine.records(of: entity)
        let at = position(of: key, in: records, entity: entity, after: false)
        guard at < records.count, entity.primaryKeyValue(of: records[at]) == key.value else { return nil }
        return records[at]
    }

    func fetch(_ request: FetchRequest, in entity: EntitySchema) throws -> [Record] {
        let records = try engine.records(of: entity)
        var stages = RequestStages(request)
        stages.reserve(candidates: records.count)
        for record in records {
            guard stages.offer(key: (try? KeyEncoding.encodeKey(entity.primaryKeyValue(of: record))) ?? [],
                               record: record) else { break }
        }
        return stages.finish()
    }

    func forEach(_ request: FetchRequest, in entity: EntitySchema, _ body: (Record) throws -> Bool) throws {
        guard request.sort.isEmpty, request.offset == 0, request.limit == nil else {
            for record in try fetch(request, in: entity) where !(try body(record)) { return }
            return
        }
        for record in try engine.records(of: entity) where request.filter.matches(record) {
            guard try body(record) else { return }
        }
    }

    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int {
        let records = try engine.records(of: entity)
        if case .all = filter { return records.count }
        return records.reduce(0) { $0 + (filter.matches($1) ? 1 : 0) }
    }

    func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int) throws -> [Record] {
        let records = try engine.records(of: entity)
        let start = key.map { position(of: $0, in: records, entity: entity, after: true) } ?? 0
        return Array(records[start..<min(records.count, start + max(0, limit))])
    }

    func metadata(forKey key: String) throws -> [UInt8]? { nil }
}
