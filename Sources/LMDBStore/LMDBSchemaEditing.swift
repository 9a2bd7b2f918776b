internal import CLMDB
@_spi(Backend) import DataStoreAPI

/// Schema upgrades on LMDB, inside one write transaction without a journal
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
        guard let dbi = try txn.openDatabase(name, create: true) else {
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

    /// Copies every entry of `from` into `to`, emptied first, appending them in key order.
    ///
    /// Each entry is copied out of the cursor's page into one reused buffer before it is
    /// written: a write may spill this transaction's dirty pages, which frees their memory, and
    /// `from` may have been written earlier in the same migration. One buffer, not two arrays
    /// per entry, and appended (`MDB_APPEND`) rather than found by a descent of the tree.
    private func copy(_ from: MDB_dbi, _ to: MDB_dbi) throws {
        try txn.drop(to)
        var entry: [UInt8] = []
        try txn.forEach(from, from: nil) { key, value in
            entry.removeAll(keepingCapacity: true)
            entry.append(contentsOf: key)
            entry.append(contentsOf: value)
            let keyCount = key.count
            try entry.withUnsafeBytes { bytes in
                try txn.append(to, UnsafeRawBufferPointer(rebasing: bytes[..<keyCount]),
                               UnsafeRawBufferPointer(rebasing: bytes[keyCount...]))
            }
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
        let conversion = change.conversion
        let keyType = change.old.primaryKeyAttribute.type
        var ranges: [Range<Int>] = []
        try rewriteRecords(dbi) { key, value, buffer in
            if let damage = LMDBRecordCoding.fields(value, attributes: attributes, into: &ranges) {
                throw damaged(damage, change.old, key: key.dropFirst())
            }
            let recordStart = buffer.count
            buffer.append(LMDBRecordCoding.version)
            for (position, source) in sources.enumerated() {
                if let conversion, position == conversion.position, let source {
                    guard let old = LMDBRecordCoding.value(of: value, at: ranges[source], attributes: attributes,
                                                           index: source) else {
                        throw damaged("unreadable \(attributes[source].name)", change.old, key: key.dropFirst())
                    }
                    let converted = try conversion.convert(old) {
                        (try? PrimaryKey(bytes: key.dropFirst(), type: keyType))?.value ?? .bytes(Array(key.dropFirst()))
                    }
                    LMDBRecordCoding.append(field: converted, to: &buffer)
                } else if let source {
                    buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: value[ranges[source]]))
                } else {
                    buffer.append(contentsOf: defaults[position])
                }
            }
            LMDBRecordCoding.seal(&buffer, from: recordStart)
        } visited: { change.countVisited($0) }
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

    /// Writes the index entries of every item (the migrator checked unique indexes first), from
    /// the stored records: each checked as a decode checks it, only the indexed attributes
    /// decoded, the entry built in one reused buffer (its index key, then the item's key, the
    /// entry's value) and written from there, not from the cursor's page (a write may spill this
    /// transaction's dirty pages).
    private func fill(_ index: Index, of entity: EntitySchema) throws {
        guard let target = databases.indexes[entity.name]?[index.name] else { return }
        let attributes = entity.attributes
        let positions = index.attributes.compactMap { name in attributes.firstIndex { $0.name == name } }
        var ranges: [Range<Int>] = []
        var entry: [UInt8] = []
        try txn.forEach(try dbi(entity), from: nil) { key, value in
            let itemKey = key.dropFirst()
            if let damage = LMDBRecordCoding.fields(value, attributes: attributes, into: &ranges) {
                throw damaged(damage, entity, key: itemKey)
            }
            entry.removeAll(keepingCapacity: true)
            for position in positions {
                guard let value = LMDBRecordCoding.value(of: value, at: ranges[position], attributes: attributes,
                                                         index: position) else {
                    throw damaged("unreadable \(attributes[position].name)", entity, key: itemKey)
                }
                KeyEncoding.appendTupleElement(value, to: &entry)
            }
            LMDBIndexKeys.finish(&entry, primaryKey: itemKey)
            let indexKeyEnd = entry.count
            entry.append(contentsOf: itemKey)
            try entry.withUnsafeBytes { bytes in
                try txn.put(target, UnsafeRawBufferPointer(rebasing: bytes[..<indexKeyEnd]),
                            UnsafeRawBufferPointer(rebasing: bytes[indexKeyEnd...]))
            }
            return true
        }
    }

    func writeSchema(_ schema: Schema) throws {
        try StoreHeader.write(schema, format: LMDBEngine.formatVersion) {
            try txn.put(databases.meta, Array($0.utf8), $1)
        }
    }
}
