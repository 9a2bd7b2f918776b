/// The net changes of one transaction, ready to be written to the feed.
struct RecordedChanges {
    struct Group {
        var entity: String
        var keyType: ValueType
        var cleared: Bool
        var overflowed: Bool
        /// The changed items' keys, encoded, in ascending key order (``TouchedKeys``).
        var keys: TouchedKeys
        /// Each item's change, in the order of `keys`.
        var kinds: Kinds
    }

    /// The changes of a group's items: each listed, or, when every item was inserted (a bulk
    /// load's, a one-insert transaction's), only their count, with no array to allocate and fill.
    enum Kinds {
        case listed([ItemChange.Kind])
        case inserted(count: Int)

        var count: Int {
            switch self {
            case .listed(let kinds): return kinds.count
            case .inserted(let count): return count
            }
        }

        /// Calls `body` with each item's change, in order.
        @inline(__always)
        func forEach(_ body: (Int, ItemChange.Kind) -> Void) {
            switch self {
            case .listed(let kinds):
                kinds.withUnsafeBufferPointer { kinds in
                    for i in kinds.indices { body(i, kinds[i]) }
                }
            case .inserted(let count):
                for i in 0..<count { body(i, .inserted) }
            }
        }
    }

    var entities: [Group] = []
    var isEmpty: Bool { entities.isEmpty }
}

/// A write transaction that records, above the engine, which items it changed: the one
/// implementation of the feed's bookkeeping for every backend.
///
/// For each item it keeps whether the item existed before the transaction and whether it exists
/// now, so the feed gets each item's net effect exactly once.
final class ChangeRecorder: ForwardingWriter, BulkInserting {
    private struct Touch {
        var before: Bool
        var after: Bool
    }

    /// A class, so that recording a key mutates its table in place (a struct copied out of
    /// `entities` and written back would copy the whole table at every write).
    ///
    /// The touched keys are kept in one buffer (``TouchedKeys``), each with its touch (those of a
    /// run of inserted keys at the end as a count, ``insertedRun``). While they come in
    /// ascending order (a bulk load, a copy) the buffer stays sorted: a new key
    /// greater than the last one is appended after one comparison, an earlier one is found by
    /// binary search, and nothing is hashed or sorted at commit. The first key out of order adds
    /// a dictionary from key to position, and the keys are sorted at commit.
    private final class EntityChanges {
        let keyType: ValueType
        @exclusivity(unchecked) private(set) var keys: TouchedKeys
        /// The touches of the first keys; the ``insertedRun`` keys after them are inserted ones
        /// (none existed before): a bulk load's keys are noted without a touch each.
        @exclusivity(unchecked) private var noted: [Touch] = []
        @exclusivity(unchecked) private var insertedRun = 0
        /// `nil` while `keys` are in ascending order.
        @exclusivity(unchecked) private var positions: [[UInt8]: Int]?
        var cleared = false
        var overflowed = false

        init(keyType: ValueType) {
            self.keyType = keyType
            keys = TouchedKeys(intKeys: keyType == .int)
        }

        var count: Int { noted.count + insertedRun }

        /// How many touched keys exist after the transaction's writes so far.
        var presentCount: Int { noted.reduce(0) { $0 + ($1.after ? 1 : 0) } + insertedRun }

        /// Every key's touch, in the order of `keys`.
        var touches: [Touch] {
            materialize()
            return noted
        }

        /// Notes the inserted run's touches one by one, before a touch is read or changed.
        private func materialize() {
            guard insertedRun > 0 else { return }
            noted.append(contentsOf: repeatElement(Touch(before: false, after: true), count: insertedRun))
            insertedRun = 0
        }

        /// Where a key is among the touched ones: at a position, or not touched and going after
        /// every touched key (`last`, as a bulk load's keys do) or among them (`inside`).
        enum Location: Equatable {
            case at(Int), last, inside
        }

        /// Where the key encoded as `key` is (``Location``).
        func locate(_ key: UnsafeRawBufferPointer) -> Location {
            if let positions { return positions[Array(key)].map { .at($0) } ?? .inside }
            let count = self.count
            guard count > 0 else { return .last }
            let order = keys.compare(count - 1, key)
            if order < 0 { return .last }
            if order == 0 { return .at(count - 1) }
            var low = 0
            var high = count - 1
            while low < high {
                let middle = (low + high) / 2
                if keys.compare(middle, key) < 0 { low = middle + 1 } else { high = middle }
            }
            return keys.compare(low, key) == 0 ? .at(low) : .inside
        }

        /// Where `key` is in `keys`, if it was touched.
        func position(of key: PrimaryKey) -> Int? {
            guard case .at(let position) = key.bytes.withUnsafeBytes({ locate($0) }) else { return nil }
            return position
        }

        /// Adds a key, encoded as `key`, that was not touched before, where ``locate(_:)`` put it.
        func add(_ key: UnsafeRawBufferPointer, _ touch: Touch, _ location: Location) {
            // An inserted key after every touched one, keys in order: one more of the inserted
            // run, as a bulk load's next key is (a one-insert write's first key allocated the
            // touches' array for it).
            if location == .last, positions == nil, !touch.before, touch.after {
                keys.append(key)
                insertedRun += 1
                return
            }
            materialize()
            if positions == nil, location == .inside {
                var made = [[UInt8]: Int](minimumCapacity: noted.count * 2)
                for position in noted.indices { made[keys.key(position)] = position }
                positions = made
            }
            positions?[Array(key)] = noted.count
            keys.append(key)
            noted.append(touch)
        }

        /// Adds an inserted int key, as its word, when it goes after every touched key of a table in
        /// order (``add(_:_:_:)`` at `.last`); otherwise changes nothing and returns false.
        @inline(__always)
        func addInsertedIfLast(_ word: UInt64) -> Bool {
            guard positions == nil, keys.appendWordIfLast(word) else { return false }
            insertedRun += 1
            return true
        }

        func setAfter(_ after: Bool, at position: Int) {
            materialize()
            noted[position].after = after
        }

        func removeAll() {
            keys.removeAll()
            noted = []
            insertedRun = 0
            positions = nil
        }

        /// The net changes, in ascending key order.
        func changes() -> (keys: TouchedKeys, kinds: RecordedChanges.Kinds) {
            func kind(_ touch: Touch) -> ItemChange.Kind? {
                switch (touch.before, touch.after) {
                case (false, true): return .inserted
                case (true, true): return .updated
                case (true, false): return .deleted
                case (false, false): return nil
                }
            }
            // Keys in order, each inserted (a bulk load's, a one-insert transaction's): the table
            // itself, no key copied, and the inserts' count, no kind listed. (A list of kinds
            // cost an array's allocation and a loop of appends, about 300 instructions a
            // one-insert transaction.)
            if positions == nil, noted.isEmpty {
                return (keys, .inserted(count: insertedRun))
            }
            let touches = self.touches
            if positions == nil, case let kinds = touches.compactMap(kind), kinds.count == touches.count {
                return (keys, .listed(kinds))
            }
            let order = positions == nil ? Array(touches.indices)
                : touches.indices.sorted { keys.compare($0, $1) < 0 }
            var changed = TouchedKeys(intKeys: keys.isWords)
            var kinds: [ItemChange.Kind] = []
            for position in order {
                guard let kind = kind(touches[position]) else { continue }
                changed.append(position, of: keys)
                kinds.append(kind)
            }
            return (changed, .listed(kinds))
        }
    }

    let writer: any StorageWriter
    /// The feed's state and entries are those of the transaction this recorder wraps.
    var feedTransaction: any StorageReader { writer.feedWriter }
    var feedWriter: any StorageWriter { writer.feedWriter }
    // `@exclusivity(unchecked)` on the hot mutable state of this recorder and of its entities'
    // changes: each is used by one thread at a time and none of those accesses overlaps another,
    // so the runtime's exclusivity check (`swift_beginAccess`) would only cost time. Defended by
    // Scripts/instruction-counts.txt: without them an insert with the feed on costs 6 to 8 % more
    // instructions on every backend, and the check fails. (The LMDB and SQLite transactions and
    // connections had them too; without them no hot path moved by more than 2 %, and they went.)
    /// The entities the transaction wrote, in the order it first wrote them. Most transactions
    /// write one or a few: they are found by comparing names, and only past
    /// ``indexedEntityCount`` through `entityIndex` (a dictionary made and filled for every
    /// transaction was a third of the recorder's cost in a one-insert transaction).
    @exclusivity(unchecked) private var entities: [(name: String, changes: EntityChanges)] = []
    /// Positions in `entities` by name, once there are more than ``indexedEntityCount``.
    @exclusivity(unchecked) private var entityIndex: [String: Int]?
    private static let indexedEntityCount = 8
    /// The entity recorded last (a loop of writes writes one entity again and again), its
    /// changes unretained: `entities`, which only grows, keeps them (a copy of the tuple retained
    /// them at every insert).
    @exclusivity(unchecked) private var lastEntity: (name: String, changes: Unmanaged<EntityChanges>)? {
        didSet {
            lastEntityWords = lastEntity.map { unsafeBitCast($0.name, to: NameWords.self) } ?? (0, 0)
            lastEntityChanges = lastEntity?.changes
        }
    }
    /// ``lastEntity``'s name as its two words (a name with the same words is the same string) and
    /// its changes, read without copying the name out of it (which retained and released it at
    /// every insert).
    @exclusivity(unchecked) private var lastEntityWords: NameWords = (0, 0)
    @exclusivity(unchecked) private var lastEntityChanges: Unmanaged<EntityChanges>?
    @exclusivity(unchecked) private var keysListed = 0
    /// The feed's state as the transaction found it, read at the first write (`nil` until then,
    /// and `.some(nil)` for a store whose feed has no state yet).
    @exclusivity(unchecked) private var state: ChangeLog.State??
    @exclusivity(unchecked) private var settings: ChangeFeedSettings?

    /// A recorder over `writer`; `knownState`, when given, is the feed's state as the
    /// transaction finds it (what the last write left, when nothing was committed since), so the
    /// recorder does not read it.
    init(_ writer: any StorageWriter, knownState: ChangeLog.State? = nil) {
        self.writer = writer
        if let knownState {
            state = .some(knownState)
            settings = knownState.settings
        }
    }

    /// The feed's settings, read at the first write of the transaction.
    private func feedSettings() throws -> ChangeFeedSettings {
        if let settings { return settings }
        // (Not a numbering backend's window: the commit's entry takes its number itself.)
        let found = try ChangeLog.readState(writer, window: false)
        state = .some(found)
        let read = found?.settings ?? ChangeFeedSettings()
        settings = read
        return read
    }

    private func isRecording() throws -> Bool { try feedSettings().isEnabled }

    /// Notes that `key` is about to change; `existed` tells (lazily) whether it exists now.
    private func touch(_ entity: EntitySchema, _ key: PrimaryKey, existed: () throws -> Bool, after: Bool) throws {
        try key.bytes.withUnsafeBytes { try touch(entity, encoded: $0, existed: existed, after: after) }
    }

    /// ``touch(_:_:existed:after:)`` of the key encoded as `key` (``KeyEncoding``).
    private func touch(_ entity: EntitySchema, encoded key: UnsafeRawBufferPointer, existed: () throws -> Bool,
                       after: Bool) throws {
        guard try isRecording() else { return }
        let changes = changesOf(entity)
        if changes.overflowed { return }
        let location = changes.locate(key)
        if case .at(let position) = location {
            changes.setAfter(after, at: position)
            return
        }
        if try keysListed >= feedSettings().maxKeysPerTransaction {
            changes.overflowed = true
            keysListed -= changes.count
            changes.removeAll()
            return
        }
        let before = changes.cleared ? false : try existed()
        changes.add(key, Touch(before: before, after: after), location)
        keysListed += 1
    }

    /// The changes of the entity recorded last, when `name` is its name.
    @inline(__always)
    private func lastChanges(of name: String) -> Unmanaged<EntityChanges>? {
        if sameWords(lastEntityWords, unsafeBitCast(name, to: NameWords.self)) { return lastEntityChanges }
        guard let last = lastEntity, last.name == name else { return nil }
        return last.changes
    }

    private func changesOf(_ entity: EntitySchema) -> EntityChanges {
        if let last = lastChanges(of: entity.name) { return last.takeUnretainedValue() }
        let changes: EntityChanges
        if let known = knownChanges(of: entity.name) {
            changes = known
        } else {
            changes = EntityChanges(keyType: entity.primaryKeyAttribute.type)
            entityIndex?[entity.name] = entities.count
            entities.append((entity.name, changes))
            if entityIndex == nil && entities.count > Self.indexedEntityCount {
                entityIndex = Dictionary(entities.indices.map { (entities[$0].name, $0) },
                                         uniquingKeysWith: { first, _ in first })
            }
        }
        lastEntity = (entity.name, Unmanaged.passUnretained(changes))
        return changes
    }

    private func knownChanges(of name: String) -> EntityChanges? {
        if let entityIndex { return entityIndex[name].map { entities[$0].changes } }
        return entities.first { $0.name == name }?.changes
    }

    /// The feed's state as last read by this transaction, unless it wrote it since.
    var knownState: ChangeLog.State? { state ?? nil }

    func finish() -> RecordedChanges {
        var result = RecordedChanges()
        // In the order of the names' UTF-8 bytes (the feed's order on every backend).
        let ordered = entities.count < 2 ? entities
            : entities.sorted { Value.compareBytes(Array($0.name.utf8), Array($1.name.utf8)) < 0 }
        for (name, changes) in ordered {
            let (keys, kinds) = changes.overflowed ? (TouchedKeys(), .listed([])) : changes.changes()
            if kinds.count == 0 && !changes.cleared && !changes.overflowed { continue }
            result.entities.append(RecordedChanges.Group(entity: name, keyType: changes.keyType,
                                                         cleared: changes.cleared, overflowed: changes.overflowed,
                                                         keys: keys, kinds: kinds))
        }
        return result
    }

    // MARK: StorageWriter

    func insert(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        try writer.insert(record, key: key, in: entity)
        if notedInsert(of: key.value, in: entity) { return }
        try touch(entity, key, existed: { false }, after: true)
    }

    /// Whether the insert of `key` is noted without ``touch(_:encoded:existed:after:)``, with the
    /// feed's settings read: nothing to note when the feed is off; and a bulk load's next int key,
    /// for the entity noted last, noted as `touch` notes it (no touched key goes after it, and
    /// none existed before the insert) without encoding or locating it.
    @inline(__always)
    private func notedInsert(of key: Value, in entity: EntitySchema) -> Bool {
        guard let settings else { return false }
        if !settings.isEnabled { return true }
        guard case .int(let i) = key, keysListed < settings.maxKeysPerTransaction,
              let last = lastChanges(of: entity.name),
              last._withUnsafeGuaranteedRef({
                  !$0.overflowed && $0.addInsertedIfLast(UInt64(bitPattern: i) ^ (1 << 63))
              })
        else { return false }
        keysListed += 1
        return true
    }

    func insertFields<T: RowCodable>(_ object: T, in entity: EntitySchema) throws -> Value? {
        guard let key = try writer.insertFields(object, in: entity) else { return nil }
        return try noteInserted(key, in: entity)
    }

    var takesRecordFields: Bool { writer.takesRecordFields }

    func insertRecordFields(_ record: Record, in entity: EntitySchema) throws -> Value? {
        guard let key = try writer.insertRecordFields(record, in: entity) else { return nil }
        return try noteInserted(key, in: entity)
    }

    /// Notes the insert of an item the writer stored from its values (``insertFields(_:in:)``).
    @inline(__always)
    private func noteInserted(_ key: Value, in entity: EntitySchema) throws -> Value {
        if notedInsert(of: key, in: entity) { return key }
        // The key encoded on the stack: an array is made only for the list of keys.
        try KeyEncoding.withEncodedKey(key) { try touch(entity, encoded: $0, existed: { false }, after: true) }
        return key
    }

    /// A clean batch goes to the engine in one go and each item is noted as inserted (none
    /// existed: the batch would not be clean); otherwise ``StorageWriter/insertAll(_:in:)``
    /// inserts one by one through ``insert(_:key:in:)``, noting each as it succeeds.
    func insertAllOrNone(_ records: [(record: Record, key: PrimaryKey)], in entity: EntitySchema) throws -> Bool {
        guard let bulk = writer as? any BulkInserting, try bulk.insertAllOrNone(records, in: entity) else {
            return false
        }
        for (_, key) in records where !notedInsert(of: key.value, in: entity) {
            try touch(entity, key, existed: { false }, after: true)
        }
        return true
    }

    func put(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        var existed: Bool?
        if try isRecording(), changesOf(entity).position(of: key) == nil {
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
        if count == changes.presentCount {
            // Every item that existed was one this transaction touched: the net effect is a
            // delete of each, not a clearing of the entity.
            for position in 0..<changes.count { changes.setAfter(false, at: position) }
        } else {
            changes.cleared = true
            keysListed -= changes.count
            changes.removeAll()
        }
        return count
    }

    func setMetadata(_ value: [UInt8]?, forKey key: String) throws {
        try writer.setMetadata(value, forKey: key)
        if key == ChangeLog.stateKey { forgetFeedState() }
    }

    /// The feed's state was written in this transaction: the append at its commit reads it
    /// anew, and records the transaction only if the feed is on then. The keys noted so far
    /// stay (the feed's settings do not change what the transaction changed).
    func forgetFeedState() {
        settings = nil
        state = nil
    }
}
