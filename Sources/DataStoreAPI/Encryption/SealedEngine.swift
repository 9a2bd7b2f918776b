import Foundation
import Logging

/// An encrypted store's engine: any backend's engine underneath, holding each entity as
/// ``SealedEntity`` keeps it, and every metadata value and change feed entry sealed.
///
/// What it hands up is the store's schema and its items in the clear; what the engine under it
/// sees and writes is the clear key and indexed attributes, and ciphertext. Requests the engine
/// can answer from clear attributes (filters and sorts on keys and indexed attributes) go to it
/// whole; any other is answered here, over the items it returns decrypted, with the stages every
/// backend without a query engine uses (``RequestStages``), so the answer is the same.
///
/// Every backend gets encryption from this one type: the conformance suite runs over it on each.
@_spi(Backend) public final class SealedEngine: StorageEngine, CommitCounting, CommitNotifying,
    ReferenceConstraining, RestartableWriting
{
    public let inner: any StorageEngine
    public let schema: Schema
    let cipher: StoreCipher
    let storeID: [UInt8]
    let entities: [String: SealedEntity]

    /// The metadata key of the store's schema, sealed (the engine's header holds the physical one).
    static let schemaKey = "datastore.encryption.schema"

    /// Set while an encrypted store's engine opens or edits its schema: schemas holding
    /// ``SealedEntity/column`` are valid then, and only then.
    @_spi(Backend) @TaskLocal public static var physicalSchemas = false

    private init(inner: any StorageEngine, schema: Schema, dataKey: [UInt8], storeID: [UInt8]) {
        self.inner = inner
        self.schema = schema
        cipher = StoreCipher(key: dataKey)
        self.storeID = storeID
        entities = Dictionary(uniqueKeysWithValues: schema.entities.map { ($0.name, SealedEntity($0, storeID: storeID)) })
    }

    /// Opens (or creates, with `requested`) the encrypted store that `open` opens the engine of,
    /// with `key`: what a backend's store type calls in place of ``SchemaUpgrader/open(requested:upgrades:location:_:)``
    /// when it is given a key, and with `key` `nil`, exactly that.
    /// - Returns: the store's engine, and the backend's engine (the same, or the one under it).
    /// (`requestedFirst`: as ``SchemaUpgrader/open(requested:upgrades:location:requestedFirst:_:)``'s.)
    public static func open<E: StorageEngine>(
        key: StoreKey?, requested: Schema?, upgrades: SchemaUpgrades, location: String, requestedFirst: Bool = false,
        _ open: (Schema?) throws -> E
    ) throws -> (engine: any StorageEngine, backend: E) {
        guard let key else {
            let engine = try SchemaUpgrader.open(requested: requested, upgrades: upgrades, location: location,
                                                 requestedFirst: requestedFirst, open)
            return (engine, engine)
        }
        let sealed = try SchemaUpgrader.open(requested: requested, upgrades: upgrades, location: location,
                                             requestedFirst: requestedFirst) { logical in
            try SealedEngine.open(key: key, requested: logical, location: location, open)
        }
        return (sealed, sealed.inner as! E)
    }

    private static func open<E: StorageEngine>(key: StoreKey, requested: Schema?, location: String,
                                               _ open: (Schema?) throws -> E) throws -> SealedEngine {
        try $physicalSchemas.withValue(true) {
            let inner: E
            do {
                inner = try open(nil)
            } catch let error as StoreError where error.code == .notFound {
                guard let requested = try requested?.resolved() else { throw error }
                try requested.validate()
                return try create(key: key, schema: requested, location: location, inner: try open(requested.sealedPhysical()))
            }
            do {
                return try existing(key: key, requested: requested, location: location, inner: inner)
            } catch {
                try? inner.close()
                throw error
            }
        }
    }

    /// Writes the key record and the sealed schema of a new store.
    private static func create(key: StoreKey, schema: Schema, location: String, inner: any StorageEngine) throws
        -> SealedEngine
    {
        do {
            let (envelope, dataKey) = try KeyEnvelope.create(for: key)
            let engine = SealedEngine(inner: inner, schema: schema, dataKey: dataKey, storeID: envelope.storeID)
            try inner.withWriter { writer in
                try writer.setMetadata(envelope.encoded, forKey: KeyEnvelope.key)
                try writer.setMetadata(engine.sealMetadata(schema.encodedForStorage(), key: schemaKey), forKey: schemaKey)
            }
            return engine
        } catch {
            try? inner.close()
            throw error
        }
    }

    private static func existing(key: StoreKey, requested: Schema?, location: String, inner: any StorageEngine) throws
        -> SealedEngine
    {
        let (envelopeBytes, sealedSchema) = try inner.withReader { reader in
            (try reader.metadata(forKey: KeyEnvelope.key), try reader.metadata(forKey: schemaKey))
        }
        guard let envelopeBytes else {
            // A store whose creation stopped between the engine's header and the key record:
            // finish it, when it is what was asked for and holds nothing.
            if let requested = try requested?.resolved(), inner.schema == requested.sealedPhysical(),
                try inner.withReader({ reader in try requested.sealedPhysical().entities.allSatisfy {
                    try reader.scan($0, after: nil, limit: 1).isEmpty
                } })
            {
                return try create(key: key, schema: requested, location: location, inner: inner)
            }
            throw StoreError(.invalidArgument, "\(location) is not encrypted: open it without a key, or copy it to "
                + "an encrypted store with migrate-store copy")
        }
        let envelope = try KeyEnvelope.decode(envelopeBytes, location: location)
        let dataKey = try envelope.dataKey(with: key, location: location)
        let probe = SealedEngine(inner: inner, schema: Schema(entities: []), dataKey: dataKey, storeID: envelope.storeID)
        guard let sealedSchema else {
            throw StoreError(.corrupt, "\(location): the encrypted store's schema (\(schemaKey)) is missing")
        }
        let schemaBytes = try probe.openMetadata(sealedSchema, key: schemaKey, location: location)
        let stored = try Schema.decodeFromStorage(schemaBytes, location: location)
        let expected = try stored.resolved().sealedPhysical().resolved()
        guard inner.schema == expected else {
            let differences = SchemaDifference.between(stored: inner.schema, requested: expected)
            throw StoreError(.corrupt, "\(location): the engine's tables do not match the encrypted store's schema: "
                + SchemaDifference.list(differences))
        }
        let (schema, _) = try Schema.resolve(stored: stored, requested: requested, location: location)
        return SealedEngine(inner: inner, schema: schema, dataKey: dataKey, storeID: envelope.storeID)
    }

    // MARK: Sealing metadata and feed entries

    private func metadataAAD(_ key: String) -> [UInt8] { Self.metadataAAD(storeID, key) }
    /// What a metadata value is bound to: the store's identity, `m` and the value's name.
    static func metadataAAD(_ storeID: [UInt8], _ key: String) -> [UInt8] { storeID + [UInt8(ascii: "m")] + Array(key.utf8) }
    private var feedAAD: [UInt8] { storeID + [UInt8(ascii: "f")] }

    func sealMetadata(_ value: [UInt8], key: String) throws -> [UInt8] {
        try cipher.seal(value, aad: metadataAAD(key))
    }

    func openMetadata(_ sealed: [UInt8], key: String, location: String = "store") throws -> [UInt8] {
        guard let value = try cipher.open(sealed, aad: metadataAAD(key)) else {
            throw StoreError(.corrupt, "the metadata value '\(key)' does not open with the store's key: it was changed "
                + "after it was written, or moved from another key or store")
        }
        return value
    }

    func sealEntry(_ entry: [UInt8]) throws -> [UInt8] { try cipher.seal(entry, aad: feedAAD) }

    func openEntry(_ sealed: [UInt8], sequence: UInt64) throws -> [UInt8] {
        guard let entry = try cipher.open(sealed, aad: feedAAD) else {
            throw StoreError(.corrupt, "change feed entry \(sequence) does not open with the store's key: it was "
                + "changed after it was written, or moved from another store")
        }
        return entry
    }

    /// The sealed form of `entity` (the store's, or one a schema step makes).
    func sealed(_ entity: EntitySchema) -> SealedEntity {
        if let known = entities[entity.name], known.logical == entity { return known }
        return SealedEntity(entity, storeID: storeID)
    }

    // MARK: StorageEngine

    public func withReader<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        try inner.withReader { try body(transaction($0)) }
    }

    public func withWriter<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        try inner.withWriter { try body(transaction($0)) }
    }

    public var pipelinesCommits: Bool { inner.pipelinesCommits }

    public func withWriter<T>(after previous: (any CommitInFlight)?, leavingCommitInFlight: Bool,
                              _ body: (any StorageWriter) throws -> T) throws -> (T, (any CommitInFlight)?) {
        try inner.withWriter(after: previous, leavingCommitInFlight: leavingCommitInFlight) { try body(transaction($0)) }
    }

    public func restartableWrite<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        try inner.withRestartableWriter { try body(transaction($0)) }
    }

    private func transaction(_ inner: any StorageReader) -> SealedTransaction {
        inner is any ChangeLogNumbering
            ? SealedNumberingTransaction(engine: self, inner: inner) : SealedTransaction(engine: self, inner: inner)
    }

    public func close() throws { try inner.close() }
    public var concurrentReads: PositiveInt { inner.concurrentReads }
    public func attach(_ logger: Logger) { inner.attach(logger) }
    public var conflictRetries: Int { inner.conflictRetries }
    public func isRetryableConflict(_ error: StoreError) -> Bool { inner.isRetryableConflict(error) }
    public var concurrentWriters: Int { inner.concurrentWriters }

    public func commitCounter() throws -> UInt64 {
        if let counting = inner as? any CommitCounting { return try counting.commitCounter() }
        return try ChangeLog.head(of: self).sequence
    }

    public var hasUnreleasedCommits: Bool { (inner as? any CommitCounting)?.hasUnreleasedCommits ?? false }

    public func subscribeToCommits(_ wake: @escaping @Sendable () -> Void) -> (any CommitSubscription)? {
        (inner as? any CommitNotifying)?.subscribeToCommits(wake)
    }

    public func addMissingReferenceConstraints() throws {
        try (inner as? any ReferenceConstraining)?.addMissingReferenceConstraints()
    }
}

/// A transaction of a ``SealedEngine``: the engine's transaction under it, read and written
/// through the store's sealing.
class SealedTransaction: StorageWriter, SchemaEditingWriter, ChangeLogWriting {
    let engine: SealedEngine
    let inner: any StorageReader

    init(engine: SealedEngine, inner: any StorageReader) {
        self.engine = engine
        self.inner = inner
    }

    var writer: any StorageWriter {
        get throws {
            guard let writer = inner as? any StorageWriter else {
                throw StoreError(.readOnly, "a read transaction cannot write")
            }
            return writer
        }
    }

    /// The records this transaction opened from compact ones are made in it.
    private var arena = CompactArena()

    private func open(_ record: Record, _ sealed: SealedEntity) throws -> Record {
        if let compact = try sealed.openCompact(record, cipher: engine.cipher, arena: &arena) { return compact }
        return try sealed.open(record, cipher: engine.cipher)
    }

    // MARK: Reads

    func get(_ entity: EntitySchema, key: PrimaryKey) throws -> Record? {
        let sealed = engine.sealed(entity)
        return try inner.get(sealed.physical, key: key).map { try open($0, sealed) }
    }

    func get(_ entity: EntitySchema, keyValue: Value) throws -> Record? {
        let sealed = engine.sealed(entity)
        return try inner.get(sealed.physical, keyValue: keyValue).map { try open($0, sealed) }
    }

    func contains(_ entity: EntitySchema, key: PrimaryKey) throws -> Bool {
        try inner.contains(engine.sealed(entity).physical, key: key)
    }

    func get(_ entity: EntitySchema, keyValues: [Value]) throws -> [Record] {
        let sealed = engine.sealed(entity)
        return try inner.get(sealed.physical, keyValues: keyValues).map { try open($0, sealed) }
    }

    func existingKeys(_ entity: EntitySchema, among keyValues: [Value]) throws -> Set<Value> {
        try inner.existingKeys(engine.sealed(entity).physical, among: keyValues)
    }

    func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int) throws -> [Record] {
        let sealed = engine.sealed(entity)
        return try inner.scan(sealed.physical, after: key, limit: limit).map { try open($0, sealed) }
    }

    func fetch(_ request: FetchRequest, in entity: EntitySchema) throws -> [Record] {
        let sealed = engine.sealed(entity)
        let (clear, whole) = Self.clearPart(request.filter, sealed)
        if whole, sealed.isClear(request.sort.map(\.attribute)) {
            return try inner.fetch(request, in: sealed.physical).map { try open($0, sealed) }
        }
        var stages = RequestStages(request)
        try inner.forEach(FetchRequest(request.entity, filter: clear), in: sealed.physical) { record in
            let opened = try open(record, sealed)
            return stages.offer(key: (try? PrimaryKey(opened[entity.primaryKey]))?.bytes ?? [], record: opened)
        }
        return stages.finish()
    }

    func forEach(_ request: FetchRequest, in entity: EntitySchema, _ body: (Record) throws -> Bool) throws {
        let sealed = engine.sealed(entity)
        let (clear, whole) = Self.clearPart(request.filter, sealed)
        if whole, sealed.isClear(request.sort.map(\.attribute)) {
            return try inner.forEach(request, in: sealed.physical) { try body(try open($0, sealed)) }
        }
        guard request.sort.isEmpty else {
            for record in try fetch(request, in: entity) where try !body(record) { return }
            return
        }
        var stages = RequestStages(request)
        try inner.forEach(FetchRequest(request.entity, filter: clear), in: sealed.physical) { record in
            try stages.pass(try open(record, sealed), to: body)
        }
    }

    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int {
        let sealed = engine.sealed(entity)
        let (clear, whole) = Self.clearPart(filter, sealed)
        if whole { return try inner.count(filter, in: sealed.physical) }
        var count = 0
        let compiled = CompiledFilter(filter, layout: entity.layout)
        try inner.forEach(FetchRequest(entity.name, filter: clear), in: sealed.physical) { record in
            if compiled.matches(try open(record, sealed)) { count += 1 }
            return true
        }
        return count
    }

    /// The part of `filter` the engine can answer from clear attributes (every item it leaves
    /// out fails `filter`), and whether that part is all of it.
    static func clearPart(_ filter: Filter, _ sealed: SealedEntity) -> (Filter, whole: Bool) {
        switch filter {
        case .all: return (.all, true)
        case .compare(let name, _, _), .among(let name, _), .isNull(let name), .hasPrefix(let name, _),
             .contains(let name, _), .hasElement(let name, _):
            return sealed.isClear([name]) ? (filter, true) : (.all, false)
        case .and(let parts):
            var kept: [Filter] = []
            var whole = true
            for part in parts {
                let (clear, partWhole) = clearPart(part, sealed)
                whole = whole && partWhole
                if case .all = clear { continue }
                kept.append(clear)
            }
            return (kept.isEmpty ? .all : kept.count == 1 ? kept[0] : .and(kept), whole)
        case .or, .not:
            let (_, whole) = clearParts(filter, sealed)
            return whole ? (filter, true) : (.all, false)
        default:
            return (.all, false)
        }
    }

    /// Whether every attribute under an `or` or a `not` is clear.
    private static func clearParts(_ filter: Filter, _ sealed: SealedEntity) -> (Filter, whole: Bool) {
        switch filter {
        case .or(let parts):
            return (filter, parts.allSatisfy { clearPart($0, sealed).whole })
        case .not(let part):
            return (filter, clearPart(part, sealed).whole)
        default:
            return clearPart(filter, sealed)
        }
    }

    func metadata(forKey key: String) throws -> [UInt8]? {
        switch key {
        case StoreHeader.schemaKey: return try engine.schema.encodedForStorage()
        case StoreHeader.formatKey, KeyEnvelope.key: return try inner.metadata(forKey: key)
        default:
            return try inner.metadata(forKey: key).map { try engine.openMetadata($0, key: key) }
        }
    }

    // MARK: Writes

    func insert(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        let sealed = engine.sealed(entity)
        try writer.insert(sealed.seal(record, key: key, cipher: engine.cipher), key: key, in: sealed.physical)
    }

    func put(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        let sealed = engine.sealed(entity)
        try writer.put(sealed.seal(record, key: key, cipher: engine.cipher), key: key, in: sealed.physical)
    }

    func delete(key: PrimaryKey, in entity: EntitySchema) throws -> Bool {
        try writer.delete(key: key, in: engine.sealed(entity).physical)
    }

    func deleteAll(in entity: EntitySchema) throws -> Int {
        try writer.deleteAll(in: engine.sealed(entity).physical)
    }

    func setMetadata(_ value: [UInt8]?, forKey key: String) throws {
        // The engine's header and the key record are the engine's and this layer's own.
        guard ![StoreHeader.formatKey, StoreHeader.schemaKey, KeyEnvelope.key, SealedEngine.schemaKey].contains(key) else {
            throw StoreError(.invalidArgument, "metadata key '\(key)' is the store's own and cannot be written")
        }
        try writer.setMetadata(value.map { try engine.sealMetadata($0, key: key) }, forKey: key)
    }

    func commitVersion(afterWrites: Bool) throws -> CommitVersion? {
        try writer.commitVersion(afterWrites: afterWrites)
    }

    // MARK: The change feed

    var changeLogStorage: (any ChangeLogStoring)? { self }
    var changeLogWriter: (any ChangeLogWriting)? { self }
    var changeLogNumbering: (any ChangeLogNumbering)? { nil }

    private var log: any ChangeLogStoring {
        get throws {
            guard let log = inner as? any ChangeLogStoring else {
                throw StoreError(.invalidArgument, "this backend keeps no change feed entries of its own")
            }
            return log
        }
    }

    func changeLogBounds() throws -> (first: UInt64, last: UInt64)? { try log.changeLogBounds() }

    func changeLogEntry(_ sequence: UInt64) throws -> [UInt8]? {
        try log.changeLogEntry(sequence).map { try engine.openEntry($0, sequence: sequence) }
    }

    var logWriter: any ChangeLogWriting {
        get throws {
            guard let log = inner as? any ChangeLogWriting else { throw StoreError(.readOnly, "a read transaction cannot write") }
            return log
        }
    }

    func appendChangeLog(_ sequence: UInt64, _ entry: [UInt8]) throws {
        try logWriter.appendChangeLog(sequence, engine.sealEntry(entry))
    }

    func removeChangeLog(before sequence: UInt64) throws { try logWriter.removeChangeLog(before: sequence) }

    // MARK: Schema steps

    private var editor: any SchemaEditingWriter {
        get throws {
            guard let editor = inner as? any SchemaEditingWriter else {
                throw StoreError(.invalidArgument, "this backend cannot change its schema")
            }
            return editor
        }
    }

    func createEntity(_ entity: EntitySchema) throws {
        let editor = try editor
        try SealedEngine.$physicalSchemas.withValue(true) { try editor.createEntity(engine.sealed(entity).physical) }
    }

    func dropEntity(_ entity: EntitySchema) throws {
        let editor = try editor
        try SealedEngine.$physicalSchemas.withValue(true) { try editor.dropEntity(engine.sealed(entity).physical) }
    }

    /// The name is part of each item's associated data: the items are sealed again under the new one.
    func renameEntity(_ entity: EntitySchema, to renamed: EntitySchema) throws {
        let editor = try editor
        let old = engine.sealed(entity), new = engine.sealed(renamed)
        try SealedEngine.$physicalSchemas.withValue(true) {
            try editor.renameEntity(old.physical, to: new.physical)
            let cipher = engine.cipher
            try editor.changeEntity(EntityChange(old: new.physical, new: new.physical, transform: { record in
                let opened = try old.open(record, cipher: cipher)
                return try new.seal(opened, key: PrimaryKey(opened[renamed.primaryKey]), cipher: cipher)
            }, visited: { _ in }))
        }
    }

    /// Every item is opened, changed as the step says, and sealed again: the engine sees only a
    /// rewrite of each item (its clear attributes and its sealed ones).
    func changeEntity(_ change: EntityChange) throws {
        let editor = try editor
        let old = engine.sealed(change.old), new = engine.sealed(change.new)
        let cipher = engine.cipher
        let clearRenames = change.renamedAttributes.filter { old.isClear([$0.key]) && new.isClear([$0.value]) }
        try SealedEngine.$physicalSchemas.withValue(true) {
            try editor.changeEntity(EntityChange(old: old.physical, new: new.physical, renamedAttributes: clearRenames,
                                                 transform: { record in
                let opened = try old.open(record, cipher: cipher)
                guard let changed = try change.newRecord(from: opened) else { return nil }
                return try new.seal(changed, key: PrimaryKey(changed[change.new.primaryKey]), cipher: cipher)
            }, visited: { _ in }))
        }
    }

    func writeSchema(_ schema: Schema) throws {
        let editor = try editor
        try SealedEngine.$physicalSchemas.withValue(true) {
            try editor.writeSchema(schema.sealedPhysical())
            try editor.setMetadata(engine.sealMetadata(schema.encodedForStorage(), key: SealedEngine.schemaKey),
                                   forKey: SealedEngine.schemaKey)
        }
    }
}

/// A ``SealedTransaction`` over an engine that numbers its feed's entries itself (PostgreSQL's).
final class SealedNumberingTransaction: SealedTransaction, ChangeLogNumbering, BulkInserting {
    private var numbering: any ChangeLogNumbering { inner as! any ChangeLogNumbering }
    override var changeLogNumbering: (any ChangeLogNumbering)? { self }

    func changeLogWindow() throws -> (floor: UInt64, released: UInt64) { try numbering.changeLogWindow() }
    func changeLogIssued() throws -> UInt64 { try numbering.changeLogIssued() }

    func changeLogEntries(after: UInt64, through: UInt64, limit: Int) throws -> [(sequence: UInt64, entry: [UInt8])] {
        try numbering.changeLogEntries(after: after, through: through, limit: limit).map {
            ($0.sequence, try engine.openEntry($0.entry, sequence: $0.sequence))
        }
    }

    func changeLogCount(after: UInt64, through: UInt64, atMost: Int) throws -> Int {
        try numbering.changeLogCount(after: after, through: through, atMost: atMost)
    }

    func trimChangeLog(keeping: UInt64, slack: UInt64) throws { try numbering.trimChangeLog(keeping: keeping, slack: slack) }
    func expireChangeLog(keeping: UInt64) throws { try numbering.expireChangeLog(keeping: keeping) }
    func restartChangeLog() throws { try numbering.restartChangeLog() }
    func continueChangeLog(after head: UInt64) throws { try numbering.continueChangeLog(after: head) }

    func insertAllOrNone(_ records: [(record: Record, key: PrimaryKey)], in entity: EntitySchema) throws -> Bool {
        let sealed = engine.sealed(entity)
        let sealedRecords = try records.map { (try sealed.seal($0.record, key: $0.key, cipher: engine.cipher), $0.key) }
        return try (inner as! any BulkInserting).insertAllOrNone(sealedRecords, in: sealed.physical)
    }
}
