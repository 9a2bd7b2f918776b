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
        var key: PrimaryKey
        var base: Record?
        var current: Record?
    }

    var entities: [String: [PrimaryKey: Change]] = [:]
    /// The changed items that hold each unique index's values: entity, index name, the values
    /// as `KeyEncoding.encodeTuple` writes them (which compares as the rule does), the keys.
    /// A unique check then costs a lookup, never a walk over every change.
    var uniqueHolders: [String: [String: [[UInt8]: Set<PrimaryKey>]]] = [:]
    /// Metadata changes by the UTF-8 bytes of their key.
    var metadata: [[UInt8]: [UInt8]?] = [:]
}

/// A transaction of a child store over a read transaction of its parent.
final class OverlayTransaction: StorageWriter {
    let parent: ReadAccessor
    var overlay: Overlay
    /// A child store's reads of the feed are its parent's.
    var feedTransaction: any StorageReader { parent.reader.feedTransaction }

    init(parent: ReadAccessor, overlay: Overlay) {
        self.parent = parent
        self.overlay = overlay
    }

    func get(_ entity: EntitySchema, key: PrimaryKey) throws -> Record? {
        if let change = overlay.entities[entity.name]?[key] { return change.current }
        return try parent.get(entity.name, key: key.value)
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
            let key = try PrimaryKey(record[entity.primaryKey])
            if changes[key] == nil { rows.append((key.bytes, record)) }
        }
        for (key, change) in changes {
            if let current = change.current { rows.append((key.bytes, current)) }
        }
        return RequestStages.answer(request, over: rows)
    }

    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int {
        guard let changes = overlay.entities[entity.name], !changes.isEmpty else {
            return try parent.count(FetchRequest(entity.name, filter: filter))
        }
        return try fetch(FetchRequest(entity.name, filter: filter), in: entity).count
    }

    func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int) throws -> [Record] {
        let changes = overlay.entities[entity.name] ?? [:]
        var rows: [(key: PrimaryKey, record: Record)] = []
        var cursor = key?.value
        var exhausted = false
        while rows.count < limit && !exhausted {
            let page = try parent.scan(entity.name, after: cursor, limit: limit)
            exhausted = page.count < limit
            for record in page {
                let k = try PrimaryKey(record[entity.primaryKey])
                if changes[k] == nil { rows.append((k, record)) }
            }
            cursor = page.last?[entity.primaryKey]
        }
        for (k, change) in changes {
            guard let current = change.current else { continue }
            if let key, k <= key { continue }
            rows.append((k, current))
        }
        rows.sort { $0.key < $1.key }
        return rows.prefix(limit).map(\.record)
    }

    func metadata(forKey key: String) throws -> [UInt8]? {
        if let value = overlay.metadata[Array(key.utf8)] { return value }
        return try parent.metadata(forKey: key)
    }

    private func record(_ record: Record?, key: PrimaryKey, in entity: EntitySchema) throws {
        // The item's values the overlay held before (the parent's are found in the parent).
        let previous: Record?
        if var change = overlay.entities[entity.name]?[key] {
            previous = change.current
            change.current = record
            overlay.entities[entity.name, default: [:]][key] = change
        } else {
            previous = nil
            let base = try parent.get(entity.name, key: key.value)
            overlay.entities[entity.name, default: [:]][key] = Overlay.Change(key: key, base: base, current: record)
        }
        for index in entity.indexes where index.isUnique {
            if let previous, let values = UniqueIndexRule.tuple(previous, index) {
                let encoded = KeyEncoding.encodeTuple(values)
                overlay.uniqueHolders[entity.name, default: [:]][index.name, default: [:]][encoded]?.remove(key)
                if overlay.uniqueHolders[entity.name]?[index.name]?[encoded]?.isEmpty == true {
                    overlay.uniqueHolders[entity.name]?[index.name]?[encoded] = nil
                }
            }
            if let record, let values = UniqueIndexRule.tuple(record, index) {
                overlay.uniqueHolders[entity.name, default: [:]][index.name, default: [:]][
                    KeyEncoding.encodeTuple(values), default: []].insert(key)
            }
        }
    }

    func insert(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        if try get(entity, key: key) != nil { throw StoreError.keyExists(entity, record) }
        try put(record, key: key, in: entity)
    }

    func put(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        try UniqueIndexRule.check(record, key: key, in: entity) { index, values in
            // The parent's holders that the overlay has not changed (the parent keeps the index,
            // so they are few), and the overlay's own, from its map.
            let changes = overlay.entities[entity.name] ?? [:]
            let sameValues = Filter.and(zip(index.attributes, values).map { .compare($0, .equal, $1) })
            var holders = try parent.fetch(FetchRequest(entity.name, filter: sameValues)).filter {
                changes[try PrimaryKey($0[entity.primaryKey])] == nil
            }
            for other in overlay.uniqueHolders[entity.name]?[index.name]?[KeyEncoding.encodeTuple(values)] ?? [] {
                if let current = changes[other]?.current { holders.append(current) }
            }
            return holders
        }
        try self.record(record, key: key, in: entity)
    }

    func delete(key: PrimaryKey, in entity: EntitySchema) throws -> Bool {
        guard try get(entity, key: key) != nil else { return false }
        try record(nil, key: key, in: entity)
        return true
    }

    func deleteAll(in entity: EntitySchema) throws -> Int {
        let all = try fetch(FetchRequest(entity.name), in: entity)
        for item in all {
            try record(nil, key: PrimaryKey(item[entity.primaryKey]), in: entity)
        }
        return all.count
    }

    func setMetadata(_ value: [UInt8]?, forKey key: String) throws {
        overlay.metadata[Array(key.utf8)] = .some(value)
    }
}
