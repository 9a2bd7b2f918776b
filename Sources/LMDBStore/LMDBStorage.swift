internal import CLMDB
@_spi(Backend) import DataStoreAPI

/// The items of a store inside one LMDB transaction: records in `e.<Entity>` under
/// `0x00 + encoded key` (LMDB refuses empty keys, and a string key may be empty), index entries
/// in `i.<Entity>.<index>`.
final class LMDBStorage: StorageWriter {
    let txn: LMDBTransaction
    let databases: LMDBDatabases

    init(txn: LMDBTransaction, databases: LMDBDatabases) {
        self.txn = txn
        self.databases = databases
    }

    private func dbi(_ entity: EntitySchema) throws(StoreError) -> MDB_dbi {
        guard let dbi = databases.entities[entity.name] else {
            throw StoreError(.unknownEntity, "no database for entity '\(entity.name)'")
        }
        return dbi
    }

    static func recordKey(_ key: [UInt8]) -> [UInt8] { [0x00] + key }

    func get(_ entity: EntitySchema, key: [UInt8]) throws -> Record? {
        try txn.withValue(dbi(entity), Self.recordKey(key)) { try decode($0, entity, key: key) }
    }

    /// Decodes a stored record; a damaged one is `corrupt` naming the environment, entity and key.
    private func decode(_ bytes: UnsafeRawBufferPointer, _ entity: EntitySchema,
                        key: some Collection<UInt8>) throws(StoreError) -> Record {
        do {
            return try LMDBRecordCoding.decode(bytes, entity)
        } catch {
            let keyText = (try? KeyEncoding.decodeKey(key, as: entity.primaryKeyAttribute.type))?.description
                ?? "0x" + key.map { String($0, radix: 16) }.joined()
            throw StoreError(.corrupt, "\(txn.environment.path): item \(entity.name)[\(keyText)]: \(error.message)")
        }
    }

    /// Candidate keys from an index, in key order; `nil` when no index applies.
    private func candidates(_ filter: Filter, _ entity: EntitySchema) throws -> [[UInt8]]? {
        guard let (index, ranges) = LMDBIndexKeys.plan(filter, entity),
              let dbi = databases.indexes[entity.name]?[index.name] else { return nil }
        var keys: [[UInt8]] = []
        for range in ranges {
            try LMDBIndexKeys.primaryKeys(in: range, of: dbi, txn) { keys.append($0) }
        }
        // One equality prefix yields its keys in key order already; anything else is merged here.
        if ranges.count > 1 { keys = Array(Set(keys)) }
        if zip(keys, keys.dropFirst()).contains(where: { Value.compareBytes($0, $1) >= 0 }) {
            keys.sort { Value.compareBytes($0, $1) < 0 }
        }
        return keys
    }

    /// Visits the records matching `filter` in key order while `visit` returns true.
    private func matching(_ filter: Filter, _ entity: EntitySchema,
                          _ visit: ([UInt8], Record) throws -> Bool) throws {
        if let keys = try candidates(filter, entity) {
            for key in keys {
                guard let record = try get(entity, key: key) else {
                    throw StoreError(.corrupt, "index of '\(entity.name)' names a missing item")
                }
                if filter.matches(record), !(try visit(key, record)) { return }
            }
            return
        }
        try txn.forEach(dbi(entity), from: nil) { key, value in
            let record = try decode(value, entity, key: key.dropFirst())
            guard filter.matches(record) else { return true }
            return try visit(Array(key.dropFirst()), record)
        }
    }

    func fetch(_ request: FetchRequest, in entity: EntitySchema) throws -> [Record] {
        if request.sort.isEmpty {
            var skipped = 0
            var result: [Record] = []
            try matching(request.filter, entity) { _, record in
                if skipped < request.offset {
                    skipped += 1
                    return true
                }
                result.append(record)
                return request.limit.map { result.count < $0 } ?? true
            }
            return result
        }
        var rows: [(key: [UInt8], record: Record)] = []
        try matching(request.filter, entity) { key, record in
            rows.append((key, record))
            return true
        }
        var unfiltered = request
        unfiltered.filter = .all
        return unfiltered.apply(to: rows, alreadyInKeyOrder: true)
    }

    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int {
        if filter == .all { return try txn.count(dbi(entity)) }
        var count = 0
        try matching(filter, entity) { _, _ in
            count += 1
            return true
        }
        return count
    }

    func scan(_ entity: EntitySchema, after key: [UInt8]?, limit: Int) throws -> [Record] {
        var result: [Record] = []
        let start = key.map { Self.recordKey($0) }
        try txn.forEach(dbi(entity), from: start) { k, value in
            if let start, k.elementsEqual(start) { return true }
            result.append(try decode(value, entity, key: k.dropFirst()))
            return result.count < limit
        }
        return result
    }

    /// Decodes every record of the entity and checks that each carries the primary key it is
    /// stored under (damage can turn one key into another valid one); returns how many.
    /// - Throws: `corrupt` naming the environment, entity and key.
    func checkRecords(_ entity: EntitySchema) throws -> Int {
        var count = 0
        try txn.forEach(dbi(entity), from: nil) { key, value in
            let record = try decode(value, entity, key: key.dropFirst())
            let carried = try entity.encodeKey(record[entity.primaryKey])
            guard key.first == 0x00, carried.elementsEqual(key.dropFirst()) else {
                throw StoreError(.corrupt, "\(txn.environment.path): item \(entity.name)[\(record[entity.primaryKey])] "
                    + "is stored under another key (0x\(key.map { String($0, radix: 16) }.joined()))")
            }
            count += 1
            return true
        }
        return count
    }

    func metadata(forKey key: String) throws -> [UInt8]? {
        try txn.withValue(databases.meta, Array(key.utf8)) { Array($0) }
    }

    func insert(_ record: Record, key: [UInt8], in entity: EntitySchema) throws {
        if try txn.withValue(dbi(entity), Self.recordKey(key), { _ in true }) != nil {
            throw StoreError.keyExists(entity, record)
        }
        try write(record, key: key, old: nil, in: entity)
    }

    func put(_ record: Record, key: [UInt8], in entity: EntitySchema) throws {
        try write(record, key: key, old: get(entity, key: key), in: entity)
    }

    private func write(_ record: Record, key: [UInt8], old: Record?, in entity: EntitySchema) throws {
        try checkUnique(record, key: key, in: entity)
        for index in entity.indexes {
            guard let dbi = databases.indexes[entity.name]?[index.name] else { continue }
            let newKey = LMDBIndexKeys.key(index, record, primaryKey: key)
            if let old {
                let oldKey = LMDBIndexKeys.key(index, old, primaryKey: key)
                if oldKey == newKey { continue }
                try txn.delete(dbi, oldKey)
            }
            try txn.put(dbi, newKey, key)
        }
        try txn.put(dbi(entity), Self.recordKey(key), LMDBRecordCoding.encode(record, entity))
    }

    /// Looks up each unique index's values (nulls never conflict); the index gives candidates,
    /// the records decide, since long values are indexed by a prefix.
    private func checkUnique(_ record: Record, key: [UInt8], in entity: EntitySchema) throws {
        for index in entity.indexes where index.isUnique {
            let values = index.attributes.map { record[$0] }
            if values.contains(where: \.isNull) { continue }
            guard let dbi = databases.indexes[entity.name]?[index.name] else { continue }
            var clash = false
            var others: [[UInt8]] = []
            try LMDBIndexKeys.primaryKeys(in: .prefix(LMDBIndexKeys.equalityPrefix(values)), of: dbi, txn) {
                if $0 != key { others.append($0) }
            }
            for other in others {
                guard let existing = try get(entity, key: other) else { continue }
                if zip(index.attributes, values).allSatisfy({ Value.compareCanonical(existing[$0], $1) == 0 }) {
                    clash = true
                    break
                }
            }
            if clash { throw StoreError.uniqueViolation(entity, index, record) }
        }
    }

    func delete(key: [UInt8], in entity: EntitySchema) throws -> Bool {
        guard let old = try get(entity, key: key) else { return false }
        for index in entity.indexes {
            guard let dbi = databases.indexes[entity.name]?[index.name] else { continue }
            try txn.delete(dbi, LMDBIndexKeys.key(index, old, primaryKey: key))
        }
        return try txn.delete(dbi(entity), Self.recordKey(key))
    }

    func deleteAll(in entity: EntitySchema) throws -> Int {
        let dbi = try dbi(entity)
        let count = try txn.count(dbi)
        try txn.drop(dbi)
        for (_, indexDBI) in databases.indexes[entity.name] ?? [:] { try txn.drop(indexDBI) }
        return count
    }

    func setMetadata(_ value: [UInt8]?, forKey key: String) throws {
        if let value {
            try txn.put(databases.meta, Array(key.utf8), value)
        } else {
            try txn.delete(databases.meta, Array(key.utf8))
        }
    }
}
