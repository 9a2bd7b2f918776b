import Synchronization

/// The engine of a child store: reads see the parent's current data with the overlay applied;
/// writes go to the overlay. Generic over ``DataStore``, so every backend has child stores.
final class OverlayEngine: StorageEngine {
    /// The store this child was made from.
    let parent: any DataStore
    let state = Mutex(Overlay())

    init(parent: any DataStore) {
        self.parent = parent
    }

    var schema: Schema { parent.schema }

    func withReader<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        let overlay = state.withLock { $0 }
        return try parent.read { try body(OverlayTransaction(parent: $0, overlay: overlay)) }
    }

    func withWriter<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        let overlay = state.withLock { $0 }
        return try parent.read { parentReader in
            let transaction = OverlayTransaction(parent: parentReader, overlay: overlay)
            let result = try body(transaction)
            let committed = transaction.overlay
            state.withLock { $0 = committed }
            return result
        }
    }

    func close() throws {}

    func takeChanges() -> Overlay {
        state.withLock { $0 }
    }

    func clear() {
        state.withLock { $0 = Overlay() }
    }
}

/// A child's pending changes.
struct Overlay: Sendable {
    /// One changed item: what the parent held when the child first changed it, and now.
    struct Change: Sendable {
        var key: Value
        var base: Record?
        var current: Record?
    }

    var entities: [String: [[UInt8]: Change]] = [:]
    /// Metadata changes by the UTF-8 bytes of their key.
    var metadata: [[UInt8]: [UInt8]?] = [:]
}

/// A transaction of a child store over a read transaction of its parent.
final class OverlayTransaction: StorageWriter {
    let parent: ReadAccessor
    var overlay: Overlay

    init(parent: ReadAccessor, overlay: Overlay) {
        self.parent = parent
        self.overlay = overlay
    }

    private func decodedKey(_ key: [UInt8], _ entity: EntitySchema) throws -> Value {
        try KeyEncoding.decodeKey(key, as: entity.primaryKeyAttribute.type)
    }

    func get(_ entity: EntitySchema, key: [UInt8]) throws -> Record? {
        if let change = overlay.entities[entity.name]?[key] { return change.current }
        return try parent.get(entity.name, key: decodedKey(key, entity))
    }

    func fetch(_ request: FetchRequest, in entity: EntitySchema) throws -> [Record] {
        guard let changes = overlay.entities[entity.name], !changes.isEmpty else {
            return try parent.fetch(request)
        }
        var unpaged = request
        unpaged.offset = 0
        unpaged.limit = nil
        var rows: [(key: [UInt8], record: Record)] = []
        for record in try parent.fetch(unpaged) {
            let key = KeyEncoding.encodeKey(record[entity.primaryKey])
            if changes[key] == nil { rows.append((key, record)) }
        }
        for (key, change) in changes {
            if let current = change.current { rows.append((key, current)) }
        }
        return request.apply(to: rows, alreadyInKeyOrder: false)
    }

    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int {
        guard let changes = overlay.entities[entity.name], !changes.isEmpty else {
            return try parent.count(FetchRequest(entity.name, filter: filter))
        }
        return try fetch(FetchRequest(entity.name, filter: filter), in: entity).count
    }

    func scan(_ entity: EntitySchema, after key: [UInt8]?, limit: Int) throws -> [Record] {
        let changes = overlay.entities[entity.name] ?? [:]
        var fromParent: [(key: [UInt8], record: Record)] = []
        var cursor = try key.map { try decodedKey($0, entity) }
        var exhausted = false
        while fromParent.count < limit && !exhausted {
            let page = try parent.scan(entity.name, after: cursor, limit: limit)
            exhausted = page.count < limit
            for record in page {
                let k = KeyEncoding.encodeKey(record[entity.primaryKey])
                if changes[k] == nil { fromParent.append((k, record)) }
            }
            cursor = page.last?[entity.primaryKey]
        }
        var rows = fromParent
        for (k, change) in changes {
            guard let current = change.current else { continue }
            if let key, Value.compareBytes(k, key) <= 0 { continue }
            rows.append((k, current))
        }
        rows.sort { Value.compareBytes($0.key, $1.key) < 0 }
        return rows.prefix(limit).map(\.record)
    }

    func metadata(forKey key: String) throws -> [UInt8]? {
        if let value = overlay.metadata[Array(key.utf8)] { return value }
        return try parent.metadata(forKey: key)
    }

    private func record(_ record: Record?, key: [UInt8], in entity: EntitySchema) throws {
        if var change = overlay.entities[entity.name]?[key] {
            change.current = record
            overlay.entities[entity.name, default: [:]][key] = change
        } else {
            let keyValue = try decodedKey(key, entity)
            let base = try parent.get(entity.name, key: keyValue)
            overlay.entities[entity.name, default: [:]][key] = Overlay.Change(key: keyValue, base: base,
                                                                              current: record)
        }
    }

    private func checkUnique(_ record: Record, key: [UInt8], in entity: EntitySchema) throws {
        for index in entity.indexes where index.isUnique {
            let values = index.attributes.map { record[$0] }
            if values.contains(where: \.isNull) { continue }
            let filter = Filter.and(zip(index.attributes, values).map { .compare($0, .equal, $1) })
            let clash = try fetch(FetchRequest(entity.name, filter: filter), in: entity).contains {
                KeyEncoding.encodeKey($0[entity.primaryKey]) != key
            }
            if clash { throw StoreError.uniqueViolation(entity, index, record) }
        }
    }

    func insert(_ record: Record, key: [UInt8], in entity: EntitySchema) throws {
        if try get(entity, key: key) != nil {
            throw StoreError.keyExists(entity, record)
        }
        try put(record, key: key, in: entity)
    }

    func put(_ record: Record, key: [UInt8], in entity: EntitySchema) throws {
        try checkUnique(record, key: key, in: entity)
        try self.record(record, key: key, in: entity)
    }

    func delete(key: [UInt8], in entity: EntitySchema) throws -> Bool {
        guard try get(entity, key: key) != nil else { return false }
        try record(nil, key: key, in: entity)
        return true
    }

    func deleteAll(in entity: EntitySchema) throws -> Int {
        let all = try fetch(FetchRequest(entity.name), in: entity)
        for item in all {
            try record(nil, key: KeyEncoding.encodeKey(item[entity.primaryKey]), in: entity)
        }
        return all.count
    }

    func setMetadata(_ value: [UInt8]?, forKey key: String) throws {
        overlay.metadata[Array(key.utf8)] = .some(value)
    }
}
