@_spi(Backend) import DataStoreAPI

/// A transaction on its own copy of the in-memory state.
final class InMemoryTransaction: StorageWriter {
    var state: MemoryState

    init(state: MemoryState) {
        self.state = state
    }

    func get(_ entity: EntitySchema, key: PrimaryKey) throws -> Record? {
        state.tables[entity.name]?.rows[key.bytes]
    }

    func fetch(_ request: FetchRequest, in entity: EntitySchema) throws -> [Record] {
        guard let table = state.tables[entity.name] else { return [] }
        var stages = RequestStages(request)
        for key in table.candidateKeys(request.filter, entity) ?? table.sortedKeys() {
            guard let record = table.rows[key] else { continue }
            if !stages.offer(key: key, record: record) { break }
        }
        return stages.finish()
    }

    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int {
        guard let table = state.tables[entity.name] else { return 0 }
        if filter == .all { return table.rows.count }
        if let keys = table.candidateKeys(filter, entity) {
            return keys.reduce(0) { $0 + (table.rows[$1].map(filter.matches) == true ? 1 : 0) }
        }
        return table.rows.values.reduce(0) { $0 + (filter.matches($1) ? 1 : 0) }
    }

    func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int) throws -> [Record] {
        guard let table = state.tables[entity.name] else { return [] }
        let keys = table.sortedKeys()
        var low = 0
        if let key {
            var high = keys.count
            while low < high {
                let mid = (low + high) / 2
                if Value.compareBytes(keys[mid], key.bytes) <= 0 { low = mid + 1 } else { high = mid }
            }
        }
        return keys[low..<(low + min(limit, keys.count - low))].compactMap { table.rows[$0] }
    }

    func metadata(forKey key: String) throws -> [UInt8]? {
        state.metadata[Array(key.utf8)]
    }

    func insert(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        if state.tables[entity.name]?.rows[key.bytes] != nil { throw StoreError.keyExists(entity, record) }
        try put(record, key: key, in: entity)
    }

    func put(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        var table = state.tables.removeValue(forKey: entity.name) ?? MemoryTable()
        defer { state.tables[entity.name] = table }
        try UniqueIndexRule.check(record, key: key, in: entity) { index, values in
            table.unique[index.name]?[values].flatMap { table.rows[$0] }.map { [$0] } ?? []
        }
        let old = table.rows[key.bytes]
        for index in entity.indexes where index.isUnique {
            if let old, let tuple = UniqueIndexRule.tuple(old, index) { table.unique[index.name]?[tuple] = nil }
            if let tuple = UniqueIndexRule.tuple(record, index) { table.unique[index.name, default: [:]][tuple] = key.bytes }
        }
        table.rows[key.bytes] = record
        table.updateLookups(entity, key: key.bytes, old: old, new: record)
        if old == nil { table.keyInserted(key.bytes) }
    }

    func delete(key: PrimaryKey, in entity: EntitySchema) throws -> Bool {
        guard var table = state.tables.removeValue(forKey: entity.name) else { return false }
        defer { state.tables[entity.name] = table }
        guard let old = table.rows.removeValue(forKey: key.bytes) else { return false }
        for index in entity.indexes where index.isUnique {
            if let tuple = UniqueIndexRule.tuple(old, index) { table.unique[index.name]?[tuple] = nil }
        }
        table.updateLookups(entity, key: key.bytes, old: old, new: nil)
        table.keyDeleted(key.bytes)
        return true
    }

    func deleteAll(in entity: EntitySchema) throws -> Int {
        let count = state.tables[entity.name]?.rows.count ?? 0
        state.tables[entity.name] = MemoryTable()
        return count
    }

    /// The database's commit count: every commit of every store on the database adds one.
    func commitVersion(afterWrites: Bool) throws -> CommitVersion? {
        CommitVersion(afterWrites ? state.commits &+ 1 : state.commits)
    }

    func setMetadata(_ value: [UInt8]?, forKey key: String) throws {
        state.metadata[Array(key.utf8)] = value
    }
}

extension InMemoryTransaction: ChangeLogWriting {
    var changeLogStorage: (any ChangeLogStoring)? { self }
    var changeLogWriter: (any ChangeLogWriting)? { self }

    func changeLogBounds() throws -> (first: UInt64, last: UInt64)? {
        state.feedBounds.map { ($0.first, $0.last) }
    }

    func changeLogEntry(_ sequence: UInt64) throws -> [UInt8]? {
        state.feed[sequence]
    }

    func appendChangeLog(_ sequence: UInt64, _ entry: [UInt8]) throws {
        state.feed[sequence] = entry
        if var bounds = state.feedBounds {
            bounds.first = min(bounds.first, sequence)
            bounds.last = max(bounds.last, sequence)
            state.feedBounds = bounds
        } else {
            state.feedBounds = FeedBounds(first: sequence, last: sequence)
        }
    }

    func removeChangeLog(before sequence: UInt64) throws {
        guard let bounds = state.feedBounds, bounds.first < sequence else { return }
        for old in bounds.first..<(bounds.last < sequence ? bounds.last + 1 : sequence) { state.feed[old] = nil }
        state.feedBounds = sequence > bounds.last ? nil : FeedBounds(first: sequence, last: bounds.last)
    }
}
