@_spi(Backend) import DataStoreAPI

/// A transaction on its own copy of the in-memory state.
final class MemoryTransaction: StorageWriter {
    var state: MemoryState

    init(state: MemoryState) {
        self.state = state
    }

    func get(_ entity: EntitySchema, key: [UInt8]) throws -> Record? {
        state.tables[entity.name]?.rows[key]
    }

    func fetch(_ request: FetchRequest, in entity: EntitySchema) throws -> [Record] {
        guard let table = state.tables[entity.name] else { return [] }
        let keys = table.sortedKeys()
        if request.sort.isEmpty {
            var skipped = 0
            var result: [Record] = []
            for key in keys {
                guard let record = table.rows[key], request.filter.matches(record) else { continue }
                if skipped < request.offset {
                    skipped += 1
                    continue
                }
                if let limit = request.limit, result.count >= limit { break }
                result.append(record)
            }
            return result
        }
        let rows = keys.compactMap { key in table.rows[key].map { (key: key, record: $0) } }
        return request.apply(to: rows, alreadyInKeyOrder: true)
    }

    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int {
        guard let table = state.tables[entity.name] else { return 0 }
        if filter == .all { return table.rows.count }
        return table.rows.values.reduce(0) { $0 + (filter.matches($1) ? 1 : 0) }
    }

    func scan(_ entity: EntitySchema, after key: [UInt8]?, limit: Int) throws -> [Record] {
        guard let table = state.tables[entity.name] else { return [] }
        let keys = table.sortedKeys()
        var low = 0
        if let key {
            var high = keys.count
            while low < high {
                let mid = (low + high) / 2
                if Value.compareBytes(keys[mid], key) <= 0 { low = mid + 1 } else { high = mid }
            }
        }
        return keys[low..<(low + min(limit, keys.count - low))].compactMap { table.rows[$0] }
    }

    func metadata(forKey key: String) throws -> [UInt8]? {
        state.metadata[Array(key.utf8)]
    }

    func insert(_ record: Record, key: [UInt8], in entity: EntitySchema) throws {
        if state.tables[entity.name]?.rows[key] != nil {
            throw StoreError.keyExists(entity, record)
        }
        try put(record, key: key, in: entity)
    }

    func put(_ record: Record, key: [UInt8], in entity: EntitySchema) throws {
        var table = state.tables.removeValue(forKey: entity.name) ?? MemoryTable()
        defer { state.tables[entity.name] = table }
        let old = table.rows[key]
        for index in entity.indexes where index.isUnique {
            if let tuple = Self.uniqueTuple(record, index), let owner = table.unique[index.name]?[tuple], owner != key {
                throw StoreError.uniqueViolation(entity, index, record)
            }
        }
        for index in entity.indexes where index.isUnique {
            if let old, let tuple = Self.uniqueTuple(old, index) { table.unique[index.name]?[tuple] = nil }
            if let tuple = Self.uniqueTuple(record, index) { table.unique[index.name, default: [:]][tuple] = key }
        }
        table.rows[key] = record
        if old == nil { table.touch() }
    }

    func delete(key: [UInt8], in entity: EntitySchema) throws -> Bool {
        guard var table = state.tables.removeValue(forKey: entity.name) else { return false }
        defer { state.tables[entity.name] = table }
        guard let old = table.rows.removeValue(forKey: key) else { return false }
        for index in entity.indexes where index.isUnique {
            if let tuple = Self.uniqueTuple(old, index) { table.unique[index.name]?[tuple] = nil }
        }
        table.touch()
        return true
    }

    func deleteAll(in entity: EntitySchema) throws -> Int {
        let count = state.tables[entity.name]?.rows.count ?? 0
        state.tables[entity.name] = MemoryTable()
        return count
    }

    func setMetadata(_ value: [UInt8]?, forKey key: String) throws {
        state.metadata[Array(key.utf8)] = value
    }

    /// The values of a unique index, with -0.0 as 0.0; `nil` when one is null (never conflicts).
    static func uniqueTuple(_ record: Record, _ index: Index) -> [Value]? {
        var tuple: [Value] = []
        for name in index.attributes {
            switch record[name] {
            case .null: return nil
            case .double(let d) where d == 0: tuple.append(.double(0))
            case let value: tuple.append(value)
            }
        }
        return tuple
    }
}
