internal import CLMDB
@_spi(Backend) import DataStoreAPI

/// Schema migrations on LMDB, inside one write transaction without a journal
/// (``LMDBEngine/restartableWrite(_:)``).
///
/// LMDB records are positional (``LMDBRecordCoding``), so a change of attributes rewrites each
/// record under its own key, in pages read by key; a rename of attributes or a change of
/// indexes alone leaves the records as they are. This was chosen over a versioned record layout
/// read lazily: every read then stays one decode with one layout, a migrated store holds no
/// old records to carry forever, and the cost is paid once, inside the migration's transaction.
/// LMDB cannot rename a database, so renaming an entity copies its entries.
extension LMDBTransaction: SchemaEditingWriter {
    private var environment: LMDBEnvironment { txn.environment }

    private func open(_ name: String) throws -> MDB_dbi {
        guard let dbi = try environment.openDatabase(name, in: txn.txn, create: true) else {
            throw StoreError(.io, "\(environment.path): cannot create database \(name)")
        }
        return dbi
    }

    func createEntity(_ entity: EntitySchema) throws {
        let dbi = try open(LMDBDatabases.entityName(entity.name))
        databases.entities[entity.name] = dbi
        try txn.drop(dbi)
        for index in entity.indexes {
            try createIndex(index, of: entity)
        }
    }

    func dropEntity(_ entity: EntitySchema) throws {
        for index in entity.indexes { try dropIndex(index, of: entity) }
        if let dbi = databases.entities.removeValue(forKey: entity.name) {
            try txn.dropDatabase(dbi)
        }
    }

    func renameEntity(_ entity: EntitySchema, to renamed: EntitySchema) throws {
        let from = try dbi(entity)
        let to = try open(LMDBDatabases.entityName(renamed.name))
        try copy(from, to)
        for index in entity.indexes {
            guard let source = databases.indexes[entity.name]?[index.name] else { continue }
            let target = try open(LMDBDatabases.indexName(renamed.name, index.name))
            try copy(source, target)
            databases.indexes[renamed.name, default: [:]][index.name] = target
        }
        try dropEntity(entity)
        databases.entities[renamed.name] = to
    }

    private func copy(_ from: MDB_dbi, _ to: MDB_dbi) throws {
        try txn.drop(to)
        try txn.forEach(from, from: nil) { key, value in
            try txn.put(to, Array(key), Array(value))
            return true
        }
    }

    func changeEntity(_ change: EntityChange) throws {
        let sameRecords = change.isStructural && change.old.attributes.count == change.new.attributes.count
            && zip(change.old.attributes, change.new.attributes).allSatisfy { old, new in
                (change.renamedAttributes[old.name] ?? old.name) == new.name && old.type == new.type
                    && old.isOptional == new.isOptional
            }
        if sameRecords {
            for index in change.removedIndexes { try dropIndex(index, of: change.old) }
            for index in change.addedIndexes {
                try createIndex(index, of: change.new)
                try fill(index, of: change.new)
            }
            return
        }
        // Rewrite every record under its own key, writing the new index entries in the same pass.
        // An index whose entries the change leaves as they are is kept: building it again would
        // write every entry in the order of the records' keys, not its own.
        let kept = Set(change.unchangedIndexes.map(\.name))
        for index in change.old.indexes where !kept.contains(index.name) { try dropIndex(index, of: change.old) }
        var indexes: [(Index, MDB_dbi)] = []
        for index in change.new.indexes where !kept.contains(index.name) {
            try createIndex(index, of: change.new)
            if let dbi = databases.indexes[change.new.name]?[index.name] { indexes.append((index, dbi)) }
        }
        let dbi = try dbi(change.old)
        if (change.isStructural || change.conversion != nil) && indexes.isEmpty {
            return try carryFields(change, dbi)
        }
        try forEachRewrittenPage(change) { page in
            for (key, new) in page {
                if let new {
                    try txn.put(dbi, Self.recordKey(key), LMDBRecordCoding.encode(new, change.new))
                    for (index, indexDBI) in indexes {
                        try txn.put(indexDBI, LMDBIndexKeys.key(index, new, primaryKey: key.bytes), key.bytes)
                    }
                } else {
                    try txn.delete(dbi, Self.recordKey(key))
                }
            }
        }
    }

    /// Rewrites every record of a change that leaves every index as it is (a structural change,
    /// or a change of one attribute's type), field by field: each stored field checked as a
    /// decode checks it and copied as it is, each new attribute written from its default, a
    /// converted attribute's value alone decoded, converted and encoded; in pages of 1,000
    /// records read by key. Building each record's values and encoding them again took most of
    /// the rewrite's time.
    private func carryFields(_ change: EntityChange, _ dbi: MDB_dbi) throws {
        let attributes = change.old.attributes
        let sources = change.carriedFrom
        let defaults = change.new.attributes.map { attribute in
            var field: [UInt8] = []
            LMDBRecordCoding.append(field: attribute.defaultValue ?? .null, to: &field)
            return field
        }
        let defaultsSize = defaults.reduce(0) { $0 + $1.count }
        let conversion = change.conversion
        let keyType = change.old.primaryKeyAttribute.type
        var ranges: [Range<Int>] = []
        var page: [(key: [UInt8], record: [UInt8])] = []
        var start: [UInt8]?
        repeat {
            page.removeAll(keepingCapacity: true)
            try txn.forEach(dbi, from: start) { key, value in
                if let damage = LMDBRecordCoding.fields(value, attributes: attributes, into: &ranges) {
                    throw damaged(damage, change.old, key: key.dropFirst())
                }
                var record: [UInt8] = []
                record.reserveCapacity(value.count + defaultsSize)
                record.append(LMDBRecordCoding.version)
                for (position, source) in sources.enumerated() {
                    if let conversion, position == conversion.position, let source {
                        guard let old = LMDBRecordCoding.value(of: value, at: ranges[source], attributes: attributes,
                                                               index: source) else {
                            throw damaged("unreadable \(attributes[source].name)", change.old, key: key.dropFirst())
                        }
                        let converted = try conversion.convert(old) {
                            (try? PrimaryKey(bytes: key.dropFirst(), type: keyType))?.value ?? .bytes(Array(key.dropFirst()))
                        }
                        LMDBRecordCoding.append(field: converted, to: &record)
                    } else if let source {
                        record.append(contentsOf: UnsafeRawBufferPointer(rebasing: value[ranges[source]]))
                    } else {
                        record.append(contentsOf: defaults[position])
                    }
                }
                page.append((Array(key), record))
                return page.count < 1_000
            }
            for (key, record) in page { try txn.put(dbi, key, record) }
            change.countVisited(page.count)
            // The least key after the page's last.
            start = page.last.map { $0.key + [0x00] }
        } while page.count == 1_000
    }

    private func createIndex(_ index: Index, of entity: EntitySchema) throws {
        let dbi = try open(LMDBDatabases.indexName(entity.name, index.name))
        try txn.drop(dbi)
        databases.indexes[entity.name, default: [:]][index.name] = dbi
    }

    private func dropIndex(_ index: Index, of entity: EntitySchema) throws {
        if let dbi = databases.indexes[entity.name]?.removeValue(forKey: index.name) {
            try txn.dropDatabase(dbi)
        }
    }

    /// Writes the index entries of every item (the migrator checked unique indexes first).
    private func fill(_ index: Index, of entity: EntitySchema) throws {
        guard let dbi = databases.indexes[entity.name]?[index.name] else { return }
        var after: PrimaryKey?
        while true {
            let page = try scan(entity, after: after, limit: 1_000)
            for record in page {
                let key = try PrimaryKey(record[entity.primaryKey])
                after = key
                try txn.put(dbi, LMDBIndexKeys.key(index, record, primaryKey: key.bytes), key.bytes)
            }
            if page.count < 1_000 { break }
        }
    }

    func writeSchema(_ schema: Schema) throws {
        try StoreHeader.write(schema, format: LMDBEngine.formatVersion) {
            try txn.put(databases.meta, Array($0.utf8), $1)
        }
    }
}
