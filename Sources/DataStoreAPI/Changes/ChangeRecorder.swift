/// The net changes of one transaction, ready to be written to the feed.
struct RecordedChanges {
    struct Group {
        var entity: String
        var keyType: ValueType
        var cleared: Bool
        var overflowed: Bool
        var items: [(PrimaryKey, ItemChange.Kind)]
    }

    var entities: [Group] = []
    var isEmpty: Bool { entities.isEmpty }
}

/// A write transaction that records, above the engine, which items it changed: the one
/// implementation of the feed's bookkeeping for every backend.
///
/// For each item it keeps whether the item existed before the transaction and whether it exists
/// now, so the feed gets each item's net effect exactly once.
final class ChangeRecorder: StorageWriter, BulkInserting {
    private struct Touch {
        var before: Bool
        var after: Bool
    }

    /// A class, so that recording a key mutates its table in place (a struct copied out of
    /// `entities` and written back would copy the whole table at every write).
    private final class EntityChanges {
        let keyType: ValueType
        var touched: [PrimaryKey: Touch] = [:]
        var cleared = false
        var overflowed = false

        init(keyType: ValueType) { self.keyType = keyType }
    }

    let writer: any StorageWriter
    private var entities: [String: EntityChanges] = [:]
    private var keysListed = 0
    /// The feed's state as the transaction found it, read at the first write (`nil` until then,
    /// and `.some(nil)` for a store whose feed has no state yet).
    private var state: ChangeLog.State??
    private var settings: ChangeFeedSettings?

    init(_ writer: any StorageWriter) {
        self.writer = writer
    }

    private func isRecording() throws -> Bool {
        if settings == nil {
            let found = try ChangeLog.readState(writer)
            state = .some(found)
            settings = found?.settings ?? ChangeFeedSettings()
        }
        return settings!.isEnabled
    }

    /// Notes that `key` is about to change; `existed` tells (lazily) whether it exists now.
    private func touch(_ entity: EntitySchema, _ key: PrimaryKey, existed: () throws -> Bool, after: Bool) throws {
        guard try isRecording() else { return }
        let changes = changesOf(entity)
        if changes.overflowed { return }
        if changes.touched[key] != nil {
            changes.touched[key]!.after = after
            return
        }
        if keysListed >= settings!.maxKeysPerTransaction {
            changes.overflowed = true
            keysListed -= changes.touched.count
            changes.touched = [:]
            return
        }
        let before = changes.cleared ? false : try existed()
        changes.touched[key] = Touch(before: before, after: after)
        keysListed += 1
    }

    private func changesOf(_ entity: EntitySchema) -> EntityChanges {
        if let changes = entities[entity.name] { return changes }
        let made = EntityChanges(keyType: entity.primaryKeyAttribute.type)
        entities[entity.name] = made
        return made
    }

    /// The feed's state as last read by this transaction, unless it wrote it since.
    var knownState: ChangeLog.State? { state ?? nil }

    func finish() -> RecordedChanges {
        var result = RecordedChanges()
        for (name, changes) in entities.sorted(by: { Value.compareBytes(Array($0.key.utf8), Array($1.key.utf8)) < 0 }) {
            var items: [(PrimaryKey, ItemChange.Kind)] = []
            if !changes.overflowed {
                for (key, touch) in changes.touched.sorted(by: { $0.key < $1.key }) {
                    switch (touch.before, touch.after) {
                    case (false, true): items.append((key, .inserted))
                    case (true, true): items.append((key, .updated))
                    case (true, false): items.append((key, .deleted))
                    case (false, false): break
                    }
                }
            }
            if items.isEmpty && !changes.cleared && !changes.overflowed { continue }
            result.entities.append(RecordedChanges.Group(entity: name, keyType: changes.keyType,
                                                         cleared: changes.cleared, overflowed: changes.overflowed,
                                                         items: items))
        }
        return result
    }

    // MARK: StorageReader

    func get(_ entity: EntitySchema, key: PrimaryKey) throws -> Record? { try writer.get(entity, key: key) }
    func contains(_ entity: EntitySchema, key: PrimaryKey) throws -> Bool { try writer.contains(entity, key: key) }
    func fetch(_ request: FetchRequest, in entity: EntitySchema) throws -> [Record] {
        try writer.fetch(request, in: entity)
    }
    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int { try writer.count(filter, in: entity) }
    func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int) throws -> [Record] {
        try writer.scan(entity, after: key, limit: limit)
    }
    func metadata(forKey key: String) throws -> [UInt8]? { try writer.metadata(forKey: key) }

    // MARK: StorageWriter

    func insert(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        try writer.insert(record, key: key, in: entity)
        try touch(entity, key, existed: { false }, after: true)
    }

    /// A clean batch goes to the engine in one go and each item is noted as inserted (none
    /// existed: the batch would not be clean); otherwise ``StorageWriter/insertAll(_:in:)``
    /// inserts one by one through ``insert(_:key:in:)``, noting each as it succeeds.
    func insertAllOrNone(_ records: [(record: Record, key: PrimaryKey)], in entity: EntitySchema) throws -> Bool {
        guard let bulk = writer as? any BulkInserting, try bulk.insertAllOrNone(records, in: entity) else {
            return false
        }
        for (_, key) in records { try touch(entity, key, existed: { false }, after: true) }
        return true
    }

    func put(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        var existed: Bool?
        if try isRecording(), entities[entity.name]?.touched[key] == nil {
            existed = try writer.contains(entity, key: key)
        }
        try writer.put(record, key: key, in: entity)
        try touch(entity, key, existed: { existed ?? true }, after: true)
    }

    func delete(key: PrimaryKey, in entity: EntitySchema) throws -> Bool {
        let existed = try writer.delete(key: key, in: entity)
        if existed { try touch(entity, key, existed: { true }, after: false) }
        return existed
    }

    func deleteAll(in entity: EntitySchema) throws -> Int {
        let count = try writer.deleteAll(in: entity)
        guard count > 0, try isRecording() else { return count }
        let changes = changesOf(entity)
        if changes.overflowed { return count }
        if count == changes.touched.values.filter(\.after).count {
            // Every item that existed was one this transaction touched: the net effect is a
            // delete of each, not a clearing of the entity.
            for key in Array(changes.touched.keys) { changes.touched[key]!.after = false }
        } else {
            changes.cleared = true
            keysListed -= changes.touched.count
            changes.touched = [:]
        }
        return count
    }

    func setMetadata(_ value: [UInt8]?, forKey key: String) throws {
        try writer.setMetadata(value, forKey: key)
        if key == ChangeLog.stateKey {
            settings = nil
            state = nil
        }
    }
}
