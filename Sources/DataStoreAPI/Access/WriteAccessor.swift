import Foundation
import Synchronization

/// Reads and writes a store inside a `writeSync` or `writeAsync` block; sees its own
/// uncommitted writes. Not `Sendable`, and valid only until its block returns.
public final class WriteAccessor: ReadAccessor {
    let writer: any StorageWriter
    /// The last model layout ``insert(_:)`` compared with its entity's layout, that layout and
    /// whether they were equal: a loop of inserts of one model compares them once. Both held, so
    /// that the identities stay theirs; the accessor is used by one thread at a time.
    var lastLayoutMatch: (model: StoredModelLayout, entity: RecordLayout, equal: Bool)?
    /// The model type whose values ``insert(_:)`` last handed over one at a time (its layout
    /// its entity's), and that entity.
    var lastStoredModel: (type: ObjectIdentifier, entity: EntitySchema)? {
        didSet { lastStoredModelParts = lastStoredModel.map { Unmanaged.passUnretained($0.entity.parts) } }
    }
    /// ``lastStoredModel``'s entity, unretained (the property keeps it): a loop of inserts
    /// hands it to the writer without a retain and a release per insert.
    @exclusivity(unchecked) private(set) var lastStoredModelParts: Unmanaged<EntitySchema.Parts>?

    /// Whether the writer takes a record's values as they are (``StorageWriter/takesRecordFields``),
    /// asked once: the other backends pay nothing per insert for the way they do not take.
    private let takesRecordFields: Bool

    init(writer: any StorageWriter, catalog: Catalog) {
        takesRecordFields = writer.takesRecordFields
        self.writer = writer
        super.init(reader: writer, catalog: catalog)
    }

    /// Stores a new item.
    /// - Throws: `keyExists` when an item has the same primary key, `uniqueViolation`, and the
    ///   validation errors (`unknownAttribute`, `typeMismatch`, `invalidValue`, `limitExceeded`).
    public func insert(_ record: Record, into entityName: String) throws {
        let entity = try entity(entityName)
        // A backend that takes the values as they are (SQLite) checks and stores them without a
        // normalized record; a value it would convert or refuse comes back here.
        if takesRecordFields, try writer.insertRecordFields(record, in: entity) != nil { return }
        let normalized = try entity.normalize(record)
        try writer.insert(normalized, key: PrimaryKey(entity.primaryKeyValue(of: normalized)), in: entity)
    }

    /// Inserts new items, as ``insert(_:into:)`` does each in order, in as few round trips as
    /// the backend allows: what a bulk load (a migration's batch) calls.
    ///
    /// The items go to the backend 10,000 at a time, so that a large array is not held twice
    /// (the backend's form of each item and its key live only for its batch and the next). While
    /// the backend stores a batch, the next one is checked on a thread of the toolkit's.
    /// - Throws: as ``insert(_:into:)``, for the first item that cannot be stored; the items
    ///   before it are stored (in the transaction, which the error rolls back unless it is caught
    ///   inside the block), none after it.
    public func insert(contentsOf records: [Record], into entityName: String) throws {
        let entity = try entity(entityName)
        let size = Self.bulkInsertBatch
        var batch = Self.checked(records[..<Swift.min(records.count, size)], of: entity)
        var next = batch.items.count
        while true {
            // The next batch is checked on another thread while the backend stores this one
            // (a server parses and indexes a COPY while the client would otherwise wait for it;
            // an embedded engine writes while the other core checks): a load of many batches
            // keeps both sides busy. Checking is a pure function of the items and the schema.
            let ahead = batch.failure == nil && next < records.count
                ? CheckedAhead(records[next..<Swift.min(records.count, next + size)], of: entity) : nil
            defer { _ = ahead?.wait() }
            // Those before a refused item are stored, as inserting each in order would have
            // stored them.
            try writer.insertAll(batch.items, in: entity)
            if let failure = batch.failure { throw failure }
            guard let ahead else { return }
            batch = ahead.wait()
            next += batch.items.count
        }
    }

    /// Items of a batch, normalized with their keys, up to the first that cannot be stored, and
    /// that one's error.
    struct CheckedBatch: Sendable {
        var items: [(record: Record, key: PrimaryKey)] = []
        var failure: StoreError?
    }

    static func checked(_ records: ArraySlice<Record>, of entity: EntitySchema) -> CheckedBatch {
        var batch = CheckedBatch()
        batch.items.reserveCapacity(records.count)
        for record in records {
            do {
                let normalized = try entity.normalize(record)
                batch.items.append((normalized, try PrimaryKey(entity.primaryKeyValue(of: normalized))))
            } catch {
                batch.failure = error
                break
            }
        }
        return batch
    }

    /// The thread that checks the batches ahead, one for the process: a job never waits for
    /// anything, so the bulk inserts of several stores at once take turns on it.
    static let checkingThread = StoreThreads(label: "DataStore.bulk-check")

    /// A batch being checked on ``checkingThread`` (``checked(_:of:)``).
    final class CheckedAhead: Sendable {
        private let done = DispatchSemaphore(value: 0)
        private let result = Mutex(CheckedBatch())

        init(_ records: ArraySlice<Record>, of entity: EntitySchema) {
            WriteAccessor.checkingThread.submit { [self] in
                let batch = WriteAccessor.checked(records, of: entity)
                result.withLock { $0 = batch }
                done.signal()
            }
        }

        /// The batch, once checked (waits for it); a second call returns an empty batch at once
        /// (the first one took it, so that the batch is not held twice).
        func wait() -> CheckedBatch {
            done.wait()
            done.signal()
            return result.withLock { batch in
                defer { batch = CheckedBatch() }
                return batch
            }
        }
    }

    /// How many items ``insert(contentsOf:into:)`` hands the backend at once (a COPY each on
    /// PostgreSQL): a copy's largest batch into PostgreSQL, so that its batches stay whole.
    static let bulkInsertBatch = 10_000

    /// Items of an entity checked ahead of their insert (``check(_:for:)``), on another thread
    /// than the writer's: what ``insert(_:)`` stores. A migration's page is checked by the thread
    /// that read it while the page before is written, and its checked items are let go of there
    /// too, so that the writer spends its turn only on the backend.
    @_spi(Backend) public struct CheckedInserts: Sendable {
        let entity: EntitySchema
        let batch: CheckedBatch
    }

    /// `records` checked and normalized for `entity` (as ``insert(contentsOf:into:)`` checks each),
    /// up to the first that cannot be stored.
    @_spi(Backend) public static func check(_ records: [Record], for entity: EntitySchema) -> CheckedInserts {
        CheckedInserts(entity: entity, batch: checked(records[...], of: entity))
    }

    /// Stores items checked ahead (``check(_:for:)``) as ``insert(contentsOf:into:)`` stores
    /// them: those before an item that cannot be stored, then that item's error.
    /// - Throws: `invalidArgument` when they were checked for another schema of the entity than
    ///   the store's (nothing is stored); what ``insert(contentsOf:into:)`` throws.
    @_spi(Backend) public func insert(_ checked: CheckedInserts) throws {
        let entity = try entity(checked.entity.name)
        guard entity == checked.entity else {
            throw StoreError(.invalidArgument, "items were checked for another schema of entity '\(entity.name)' "
                + "than the store's")
        }
        let items = checked.batch.items
        if items.count <= Self.bulkInsertBatch {
            try writer.insertAll(items, in: entity)
        } else {
            var start = 0
            while start < items.count {
                let end = Swift.min(items.count, start + Self.bulkInsertBatch)
                try writer.insertAll(Array(items[start..<end]), in: entity)
                start = end
            }
        }
        if let failure = checked.batch.failure { throw failure }
    }

    /// Stores an item, replacing any item with the same primary key (upsert).
    public func save(_ record: Record, into entityName: String) throws {
        let entity = try entity(entityName)
        let normalized = try entity.normalize(record)
        try writer.put(normalized, key: PrimaryKey(entity.primaryKeyValue(of: normalized)), in: entity)
    }

    /// Changes some attributes of an existing item and returns the updated item.
    /// - Throws: `notFound` when no item has that key; `invalidArgument` when `changes` names
    ///   the primary key with another value.
    @discardableResult
    public func update(_ entityName: String, key: Value, set changes: [String: Value]) throws -> Record {
        let entity = try entity(entityName)
        let encoded = try entity.primaryKey(key)
        guard var record = try writer.get(entity, key: encoded) else {
            throw StoreError(.notFound, "no '\(entityName)' with key \(key) to update")
        }
        for (name, value) in changes {
            if name == entity.primaryKey, value != record[name] {
                throw StoreError(.invalidArgument, "update of '\(entityName)' \(key) cannot change its primary key")
            }
            record[name] = value
        }
        let normalized = try entity.normalize(record)
        try writer.put(normalized, key: encoded, in: entity)
        return normalized
    }

    /// Deletes the item with that key; returns whether there was one.
    @discardableResult
    public func delete(_ entityName: String, key: Value) throws -> Bool {
        let entity = try entity(entityName)
        return try writer.delete(key: try entity.primaryKey(key), in: entity)
    }

    /// Deletes every item the request returns (filter, sort, offset and limit applied);
    /// returns how many.
    @discardableResult
    public func delete(_ request: FetchRequest) throws -> Int {
        if Self.sortsAcrossRelationships(request) {
            let entity = try entity(request.entity)
            let doomed = try fetchSortedAcrossRelationships(request)
            for record in doomed { _ = try writer.delete(key: PrimaryKey(record[entity.primaryKey]), in: entity) }
            return doomed.count
        }
        let (entity, checked) = try validate(request)
        if checked.filter == .all, checked.offset == 0, checked.limit == nil {
            return try writer.deleteAll(in: entity)
        }
        let doomed = checked.limit == 0 ? [] : try writer.fetch(checked, in: entity)
        for record in doomed {
            _ = try writer.delete(key: PrimaryKey(record[entity.primaryKey]), in: entity)
        }
        return doomed.count
    }

    /// The items delete rules (cascade) have deleted in this transaction so far, by entity
    /// (empty in a store that does not keep relationships, such as a migration's destination).
    @_spi(Backend) public var deletedByDeleteRules: [String: Int] {
        (writer as? RelationshipWriter)?.deletedByRules ?? [:]
    }

    /// Deletes every item of the entity; returns how many.
    @discardableResult
    public func deleteAll(_ entityName: String) throws -> Int {
        try writer.deleteAll(in: entity(entityName))
    }

    /// Stores a metadata value (or removes it, with `nil`) in this transaction. Keys compare by
    /// their UTF-8 bytes.
    /// - Throws: `invalidArgument` for an empty key, a key over ``Limits/maxStringKeyBytes``, or a
    ///   key starting with `datastore.`, which the package reserves for its own (the schema,
    ///   the format version, migration state).
    public func setMetadata(_ value: [UInt8]?, forKey key: String) throws {
        guard isValid else { throw StoreError(.accessorExpired, "accessor used after its block returned") }
        guard !key.isEmpty, key.utf8.count <= Limits.maxStringKeyBytes else {
            throw StoreError(.invalidArgument, "metadata key must be 1 to \(Limits.maxStringKeyBytes) UTF-8 bytes")
        }
        guard !key.utf8.starts(with: MetadataKeys.reservedPrefix.utf8) else {
            throw StoreError(.invalidArgument, "metadata key '\(key)' is reserved: keys starting with "
                + "'\(MetadataKeys.reservedPrefix)' belong to the package")
        }
        try writer.setMetadata(value, forKey: key)
    }

    /// Stores one of the package's own metadata values (migration state), which apps cannot write.
    package func setReservedMetadata(_ value: [UInt8]?, forKey key: String) throws {
        guard isValid else { throw StoreError(.accessorExpired, "accessor used after its block returned") }
        try writer.setMetadata(value, forKey: key)
    }
}
