import Foundation
import Logging
/// What a backend implements: transactions over encoded keys and complete, validated records.
///
/// Everything that must behave the same on every backend (validation of entities, attributes,
/// values and limits; reentrancy; the async writer; accessor expiry; child stores) lives in
/// ``Store`` and the accessors, above this protocol. A backend receives only requests whose
/// entity, attributes and values were checked, and records normalized by
/// ``EntitySchema/normalize(_:)``.
@_spi(Backend) public protocol StorageEngine: AnyObject, Sendable {
    /// The schema the store holds.
    var schema: Schema { get }
    /// Runs `body` in a read transaction that sees one consistent snapshot.
    func withReader<T>(_ body: (any StorageReader) throws -> T) throws -> T
    /// Runs `body` in a write transaction: commits durably when it returns, rolls back when it
    /// throws. ``Store`` runs one at a time, unless ``concurrentWriters`` is more than 1: then it
    /// calls it from any number of threads at once, and the engine bounds how many run (its
    /// connections).
    func withWriter<T>(_ body: (any StorageWriter) throws -> T) throws -> T
    /// Releases the engine's resources. Called once, with no transaction running.
    func close() throws
    /// How many reads the store's async API runs at once, each on a thread of the store's own
    /// (``DataStore/readAsync(_:)``). The default, one per core, suits engines whose reads
    /// compute (SQLite, LMDB, memory): more threads would only take turns on the cores, and
    /// make the app's other threads wait longer for one. An engine whose reads wait on a
    /// server sizes it by its connections.
    var concurrentReads: PositiveInt { get }
    /// Gives the engine the store's logger, for what only the engine sees (LMDB's map growing,
    /// a lost PostgreSQL connection replaced); called once, when the store opens, if the app
    /// configured logging (``Instrumentation``).
    func attach(_ logger: Logger)
    /// How many more times ``Store`` runs a write block whose transaction the engine rolled
    /// back for a conflict with concurrent transactions (``isRetryableConflict(_:)``); 0 (the
    /// default) for an engine whose writers never conflict (one writer at a time, as SQLite's
    /// and LMDB's).
    var conflictRetries: Int { get }
    /// Whether `error`, thrown by ``withWriter(_:)``, says that the server rolled the
    /// transaction back because it conflicted with concurrent ones (PostgreSQL's serialization
    /// failure or deadlock): nothing of it was stored, and running the block again may succeed.
    func isRetryableConflict(_ error: StoreError) -> Bool
    /// How many write transactions ``Store`` may run at once, each on a thread of its caller's
    /// (or of the store's, for an awaited `writeAsync`): 1 (the default) for an engine with one
    /// writer (SQLite, LMDB, memory), whose writes ``Store`` runs one after another. An engine
    /// that declares more must make its concurrent transactions behave as if they ran one
    /// after another (PostgreSQL's `SERIALIZABLE`), reporting those it cannot order as
    /// retryable conflicts.
    var concurrentWriters: Int { get }
    /// Whether ``withWriter(after:leavingCommitInFlight:_:)`` may leave a transaction's `COMMIT`
    /// unanswered for the next write to read (the default, false): ``Store`` then sends the
    /// blocks enqueued without awaiting one after another on one connection, each `COMMIT` with
    /// the next block's first statements.
    var pipelinesCommits: Bool { get }
    /// Runs `body` as ``withWriter(_:)`` does, after `previous`, a write whose `COMMIT` was sent
    /// and not yet answered, and on its connection: the answer is read before this transaction
    /// commits, and when `previous` did not commit, this one is rolled back and throws
    /// ``PrecedingCommitFailed``. With `leavingCommitInFlight`, this transaction's `COMMIT` may
    /// be sent without waiting for its answer: it is returned, and the store reads its outcome
    /// (``CommitInFlight/outcome()``) before it tells the caller.
    func withWriter<T>(after previous: (any CommitInFlight)?, leavingCommitInFlight: Bool,
                       _ body: (any StorageWriter) throws -> T) throws -> (T, (any CommitInFlight)?)
}

/// A write transaction whose `COMMIT` was sent and whose answer is still on its way
/// (``StorageEngine/withWriter(after:leavingCommitInFlight:_:)``).
@_spi(Backend) public protocol CommitInFlight: AnyObject {
    /// Whether the transaction committed: waited for at the first call (which also gives its
    /// connection back when no write follows on it), then kept.
    func outcome() -> CommitOutcome
}

@_spi(Backend) public enum CommitOutcome: Sendable {
    case committed
    /// Not committed (or not known to be): `retryable` when the server rolled it back for a
    /// conflict with concurrent transactions, so that running the block again may succeed.
    case failed(any Error, retryable: Bool)
}

/// What a write that followed a ``CommitInFlight`` throws when that commit failed: this write was
/// rolled back too, and runs again after the one before it.
@_spi(Backend) public struct PrecedingCommitFailed: Error {
    public init() {}
}

extension StorageEngine {
    public var pipelinesCommits: Bool { false }
    public func withWriter<T>(after previous: (any CommitInFlight)?, leavingCommitInFlight: Bool,
                              _ body: (any StorageWriter) throws -> T) throws -> (T, (any CommitInFlight)?) {
        if let previous, case .failed = previous.outcome() { throw PrecedingCommitFailed() }
        return (try withWriter(body), nil)
    }
}

extension StorageEngine {
    public var concurrentReads: PositiveInt { StoreThreads.perCore }
    public func attach(_ logger: Logger) {}
    public var conflictRetries: Int { 0 }
    public func isRetryableConflict(_ error: StoreError) -> Bool { false }
    public var concurrentWriters: Int { 1 }
}

/// The read operations of a backend transaction. Not `Sendable`: it lives inside its block.
@_spi(Backend) public protocol StorageReader {
    func get(_ entity: EntitySchema, key: PrimaryKey) throws -> Record?
    /// The item with the key whose checked value is `keyValue` (``EntitySchema/checkedKeyValue(_:)``),
    /// or `nil`: a point get from the app. The default encodes the key and calls
    /// ``get(_:key:)``; a backend may look it up without building a ``PrimaryKey`` (SQLite binds
    /// the value, LMDB encodes it on the stack).
    func get(_ entity: EntitySchema, keyValue: Value) throws -> Record?
    /// Whether an item has that key (the change feed asks before a `put`). The default calls
    /// ``get(_:key:)``; a backend may answer without decoding the record.
    func contains(_ entity: EntitySchema, key: PrimaryKey) throws -> Bool
    /// Returns the items that match, sorted by the request's sort keys and then by primary key,
    /// with offset and limit applied.
    func fetch(_ request: FetchRequest, in entity: EntitySchema) throws -> [Record]
    /// Hands the items ``fetch(_:in:)`` returns to `body`, in the same order, while it returns
    /// true. The default fetches them first; a backend may stream them from its cursor, reusing
    /// one record's storage (``Record/refill(layout:_:)``).
    func forEach(_ request: FetchRequest, in entity: EntitySchema, _ body: (Record) throws -> Bool) throws
    /// Hands the items ``fetch(_:in:)`` returns to `body` as rows of one cursor, in the same
    /// order, while it returns true: the cursor's current row is each item in turn, checked
    /// before it is handed over (``RowCursor``). The default visits the records ``forEach(_:in:_:)``
    /// hands over; a backend may read its rows in place (LMDB's map, SQLite's statement), building
    /// nothing per row.
    func visit(_ request: FetchRequest, in entity: EntitySchema, _ body: (any RowCursor) throws -> Bool) throws
    /// Whether ``visit(_:in:_:)`` reads the request's rows in place rather than visiting records
    /// (the default, false): a typed fetch then decodes each model from the row, else from the
    /// record.
    func visitsInPlace(_ request: FetchRequest) -> Bool
    /// Hands the stored fields of each item ``fetch(_:in:)`` returns, in the same order, to
    /// `body` (a ``StoredFieldReader`` over a compact record's fields in the entity's order,
    /// checked as a record is: its checksum), while it returns true, and returns `true`; returns
    /// `false` when the backend does not keep the request's items so, or an item's record is
    /// not sound (the caller then reads the request the ordinary way, which names the damage).
    /// The default: `false`. What a typed fetch of a model `@StoredModel` wrote reads, with no
    /// attribute looked up by name.
    func visitStoredFields(_ request: FetchRequest, in entity: EntitySchema,
                           _ body: (inout StoredFieldReader) throws -> Bool) throws -> Bool
    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int
    /// Returns up to `limit` items with keys greater than `key`, in key order.
    func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int) throws -> [Record]
    /// Replaces `page` with what ``scan(_:after:limit:)`` returns. The default assigns that
    /// array; a backend may refill the page's records in place (``Record/refill(layout:_:)``),
    /// so that a caller paging through an entity with one buffer allocates nothing per item
    /// once the first page is read (records it kept from a page keep their values).
    func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int, into page: inout [Record]) throws
    func metadata(forKey key: String) throws -> [UInt8]?
    /// The items with these keys (checked values, ``EntitySchema/checkedKeyValue(_:)``), in any
    /// order, the missing ones left out: what eager loading and reference checks look up. The
    /// default gets each; a backend where each get is a round trip asks for them at once.
    func get(_ entity: EntitySchema, keyValues: [Value]) throws -> [Record]
    /// Which of these keys (checked values) have an item: what a reference check asks, a page of
    /// targets at a time. The default gets the items (``get(_:keyValues:)``); a backend whose
    /// point gets cost a scan (a JSON Lines file) answers from a set of the entity's keys, so
    /// that checking every reference of a store reads each entity once, not once per page.
    func existingKeys(_ entity: EntitySchema, among keyValues: [Value]) throws -> Set<Value>

    /// The backend transaction the change feed reads its state and entries from: this one
    /// (the default), or, for a transaction that wraps another (a recorder of changes, a child
    /// store's overlay), the one it wraps. Requirements rather than casts: the feed asks at
    /// every commit, and a dynamic cast to a class or a protocol costs a conformance lookup.
    var feedTransaction: any StorageReader { get }
    /// This transaction as storage of the change feed's entries, when its backend keeps them
    /// itself (``ChangeLogStoring``); `nil` (the default): the entries are metadata.
    var changeLogStorage: (any ChangeLogStoring)? { get }
}

extension StorageReader {
    public var feedTransaction: any StorageReader { self }
    public var changeLogStorage: (any ChangeLogStoring)? { nil }

    public func get(_ entity: EntitySchema, keyValue: Value) throws -> Record? {
        try get(entity, key: PrimaryKey(keyValue))
    }

    public func forEach(_ request: FetchRequest, in entity: EntitySchema, _ body: (Record) throws -> Bool) throws {
        try forEachFetched(request, in: entity, body)
    }

    public func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int, into page: inout [Record]) throws {
        page = try scan(entity, after: key, limit: limit)
    }

    public func visit(_ request: FetchRequest, in entity: EntitySchema, _ body: (any RowCursor) throws -> Bool) throws {
        try visitRecords(request, in: entity, body)
    }

    public func visitsInPlace(_ request: FetchRequest) -> Bool { false }

    public func visitStoredFields(_ request: FetchRequest, in entity: EntitySchema,
                                  _ body: (inout StoredFieldReader) throws -> Bool) throws -> Bool { false }

    /// The default ``visit(_:in:_:)``: the records ``forEach(_:in:_:)`` hands over, one at a time
    /// the cursor's row; what a backend with a cursor of its own does for requests it cannot
    /// read in place.
    public func visitRecords(_ request: FetchRequest, in entity: EntitySchema,
                             _ body: (any RowCursor) throws -> Bool) throws {
        let cursor = RecordRowCursor(entity)
        try forEach(request, in: entity) { record in
            cursor.load(record)
            // Let go at once: a backend refills its record in place only when nothing else holds it.
            defer { cursor.unload() }
            return try body(cursor)
        }
    }

    /// Fetches the items first, then hands them to `body` while it returns true: the default
    /// ``forEach(_:in:_:)``, and what a streaming backend does for requests it cannot stream.
    public func forEachFetched(_ request: FetchRequest, in entity: EntitySchema,
                               _ body: (Record) throws -> Bool) throws {
        for record in try fetch(request, in: entity) where !(try body(record)) { return }
    }

    public func contains(_ entity: EntitySchema, key: PrimaryKey) throws -> Bool {
        try get(entity, key: key) != nil
    }

    public func get(_ entity: EntitySchema, keyValues: [Value]) throws -> [Record] {
        try keyValues.compactMap { try get(entity, keyValue: $0) }
    }

    public func existingKeys(_ entity: EntitySchema, among keyValues: [Value]) throws -> Set<Value> {
        Set(try get(entity, keyValues: keyValues).map { entity.primaryKeyValue(of: $0) })
    }
}

/// An engine with reference constraints of its own (PostgreSQL's foreign keys), which a store
/// the migration engine fills goes without until it is complete, and which a store that a switch
/// moved an app to gets once it serves.
@_spi(Backend) public protocol ReferenceConstraining: StorageEngine {
    /// Adds the reference constraints that are missing, checking the rows already there; runs
    /// inside a write transaction of the store (``Store/enforceReferences()``).
    /// - Throws: `referenceViolation` naming a relationship whose rows refer to missing items.
    func addMissingReferenceConstraints() throws
}

/// The write operations of a backend transaction.
@_spi(Backend) public protocol StorageWriter: StorageReader {
    /// Stores a new item. Throws `keyExists` when the key is taken, `uniqueViolation` when a
    /// unique index would hold the same values twice.
    func insert(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws
    /// Stores an item, replacing the one with the same key. Throws `uniqueViolation`.
    func put(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws
    /// Deletes an item; returns whether it existed.
    func delete(key: PrimaryKey, in entity: EntitySchema) throws -> Bool
    /// Deletes every item of an entity; returns how many there were.
    func deleteAll(in entity: EntitySchema) throws -> Int
    /// Stores (or with `nil` removes) a metadata value, in the same transaction as the data.
    func setMetadata(_ value: [UInt8]?, forKey key: String) throws
    /// Identifies the committed state this write transaction works on, so that the store can
    /// keep what one transaction read (the change feed's state) for the next one instead of
    /// reading it again. `afterWrites` false: the state the transaction began from; true: the
    /// state it leaves when it commits the writes made so far (it has made at least one).
    ///
    /// The contract: the value a transaction gets with `afterWrites` true equals the value the
    /// next write transaction on this engine gets with `afterWrites` false only when nothing
    /// else was committed in between, by this process or another. A value that cannot be
    /// predicted must differ (the store then reads the state anew), never match. `nil`, the
    /// default, means the engine cannot tell: the feed's state is read in every transaction.
    func commitVersion(afterWrites: Bool) throws -> CommitVersion?
    /// Stores a new item from the values a model hands over one at a time
    /// (``RowCodable/writeStoredFields(to:)``), without a record, when the model's
    /// ``RowCodable/storedModelLayout`` is the entity's layout (the caller checks it), and
    /// returns its key's value (an `int`, `string` or `uuid`); throws as ``insert(_:key:in:)`` does. Returns `nil`, having stored
    /// nothing, when this writer takes records only (the default) or when a value must be
    /// converted or refused: the caller then inserts the model's record, which converts the
    /// value or names what is wrong, as every other insert does.
    func insertFields<T: RowCodable>(_ object: T, in entity: EntitySchema) throws -> Value?

    /// Inserts a record whose names are its entity's, in their order, from its values as they are
    /// (``Record/appendValues(inOrderOf:to:)``), checked as ``EntitySchema/normalize(_:)`` checks
    /// them, without a normalized record: the key's value. `nil`, having stored nothing, when
    /// this writer takes normalized records only (the default), when the record is not one of
    /// those, or when a value must be converted or refused: the caller then normalizes the
    /// record and inserts it, which converts the value or names what is wrong.
    func insertRecordFields(_ record: Record, in entity: EntitySchema) throws -> Value?
    /// Whether ``insertRecordFields(_:in:)`` may store a record (`false`, the default: it
    /// returns `nil` for every record, and the caller does not ask it).
    var takesRecordFields: Bool { get }

    /// The backend transaction the change feed appends its entries to: this one (the
    /// default), or the one a recorder of changes wraps (``StorageReader/feedTransaction``).
    var feedWriter: any StorageWriter { get }
    /// This transaction as the writer of the change feed's entries, when its backend keeps
    /// them itself (``ChangeLogWriting``); `nil` (the default): the entries are metadata.
    var changeLogWriter: (any ChangeLogWriting)? { get }
}

extension StorageWriter {
    public var feedWriter: any StorageWriter { self }
    public var changeLogWriter: (any ChangeLogWriting)? { nil }

    public func commitVersion(afterWrites: Bool) throws -> CommitVersion? { nil }

    /// Takes records only: `nil`, and the caller inserts the model's record.
    public func insertFields<T: RowCodable>(_ object: T, in entity: EntitySchema) throws -> Value? { nil }

    /// Takes normalized records only: `nil`, and the caller normalizes the record.
    public func insertRecordFields(_ record: Record, in entity: EntitySchema) throws -> Value? { nil }
    public var takesRecordFields: Bool { false }
}

/// A backend's identity of a committed state (``StorageWriter/commitVersion(afterWrites:)``):
/// two numbers whose meaning is the backend's own (SQLite: the connection's committed write
/// transactions, checked against the file's data version, and its total changes; LMDB: the
/// transaction id; in-memory: the commit count).
@_spi(Backend) public struct CommitVersion: Hashable, Sendable {
    public var major: UInt64
    public var minor: UInt64

    public init(_ major: UInt64, _ minor: UInt64 = 0) {
        self.major = major
        self.minor = minor
    }
}

/// A write transaction that can store a batch of new items in fewer round trips than one insert
/// each (a server backend sends them as one statement or a COPY).
@_spi(Backend) public protocol BulkInserting: StorageWriter {
    /// Stores every item and returns `true`, or stores nothing and returns `false` when one of
    /// them could not be stored (a key taken already or given twice, a unique value held already
    /// or shared within the batch). The caller then inserts them one by one, so that the error
    /// comes from the first item that cannot be stored, with the items before it stored.
    func insertAllOrNone(_ records: [(record: Record, key: PrimaryKey)], in entity: EntitySchema) throws -> Bool
}

extension StorageWriter {
    /// Inserts `records` as inserting each in order would: in one go through ``BulkInserting``
    /// when the writer has it and the batch is clean, else one by one.
    func insertAll(_ records: [(record: Record, key: PrimaryKey)], in entity: EntitySchema) throws {
        if let bulk = self as? any BulkInserting, try bulk.insertAllOrNone(records, in: entity) { return }
        for (record, key) in records { try insert(record, key: key, in: entity) }
    }
}

/// An engine that can tell cheaply, without a read transaction, that some process committed a
/// write since it last asked: what live observers poll to see other processes' commits (and
/// writes made outside the package). Engines without it are polled through a read of the
/// change feed's head.
@_spi(Backend) public protocol CommitCounting {
    /// A value that changes whenever any connection or process commits a write.
    func commitCounter() throws -> UInt64
    /// Whether commits were seen that the change feed does not hand out yet (their entries wait
    /// for lower numbers to be final, ``ChangeLogNumbering``): observers then keep polling
    /// ``commitCounter()`` even while notifications arrive, since what releases the entries (a
    /// transaction rolled back) sends none.
    var hasUnreleasedCommits: Bool { get }
}

extension CommitCounting {
    public var hasUnreleasedCommits: Bool { false }
}

/// An engine that can tell observers of other processes that a write committed, so that they
/// need not poll ``CommitCounting`` while they wait (PostgreSQL's `LISTEN` / `NOTIFY`).
@_spi(Backend) public protocol CommitNotifying: Sendable {
    /// Starts calling `wake` after commits of any process (spurious calls are allowed, missed
    /// ones are not while the subscription is active); `nil` when notifications cannot be had
    /// now, and observers poll instead.
    func subscribeToCommits(_ wake: @escaping @Sendable () -> Void) -> (any CommitSubscription)?
}

/// A running subscription to an engine's commit notifications.
@_spi(Backend) public protocol CommitSubscription: Sendable {
    /// Whether notifications still arrive; once false (the connection was lost), observers poll.
    var isActive: Bool { get }
    /// Stops the notifications.
    func cancel()
}

/// Storage of its own for the change feed's entries, which a backend's transactions may offer
/// instead of the metadata the feed uses otherwise: with it, a recorded transaction appends one
/// entry and writes nothing else (once in a while it also drops a batch of entries past the
/// retention), because the feed's bounds are the entries' own.
///
/// Entries are numbered densely; the feed appends the number after the last and removes from
/// the front.
@_spi(Backend) public protocol ChangeLogStoring: StorageReader {
    /// The lowest and highest numbers stored, or `nil` when none is.
    func changeLogBounds() throws -> (first: UInt64, last: UInt64)?
    /// The entry numbered `sequence`.
    func changeLogEntry(_ sequence: UInt64) throws -> [UInt8]?
    /// This storage as one that numbers its entries itself (``ChangeLogNumbering``), or `nil`
    /// (the default).
    var changeLogNumbering: (any ChangeLogNumbering)? { get }
}

extension ChangeLogStoring {
    public var changeLogNumbering: (any ChangeLogNumbering)? { nil }
}

/// The write side of ``ChangeLogStoring``.
@_spi(Backend) public protocol ChangeLogWriting: ChangeLogStoring, StorageWriter {
    func appendChangeLog(_ sequence: UInt64, _ entry: [UInt8]) throws
    /// Removes every entry numbered below `sequence`.
    func removeChangeLog(before sequence: UInt64) throws
}

/// Entry storage that numbers the entries itself, as a server does that many connections write
/// at once: each entry takes the next number of a counter outside any transaction (a
/// PostgreSQL sequence) as its transaction's last statement, so numbers follow the order in
/// which conflicting transactions commit, but a transaction that took a number and rolled back
/// leaves a gap, and a number may be taken before a lower one is committed. A reader gets an
/// entry only once every lower number is final in its snapshot (committed or never to be): the
/// backend's watermark, ``changeLogWindow()``'s `released`.
///
/// With it, the feed's state in the metadata keeps only the identity and the settings; the
/// entry's number passed to ``ChangeLogWriting/appendChangeLog(_:_:)`` is ignored, and the
/// backend removes entries past the retention itself (``trimChangeLog(keeping:slack:)``).
@_spi(Backend) public protocol ChangeLogNumbering: ChangeLogWriting {
    /// `floor`: the lowest number a token may still be followed from (entries below it were
    /// removed, or the feed restarted past them); `released`: the highest number below which
    /// every entry is final in this transaction's snapshot (in a write transaction, the highest
    /// number taken).
    func changeLogWindow() throws -> (floor: UInt64, released: UInt64)
    /// The highest number taken by any transaction so far (committed or not): a token up to it
    /// is this store's, one past it is ahead of the store.
    func changeLogIssued() throws -> UInt64
    /// The entries numbered after `after` and up to `through`, in order, at most `limit`.
    func changeLogEntries(after: UInt64, through: UInt64, limit: Int) throws -> [(sequence: UInt64, entry: [UInt8])]
    /// How many entries are numbered after `after` and up to `through`, counting no further
    /// than `atMost`.
    func changeLogCount(after: UInt64, through: UInt64, atMost: Int) throws -> Int
    /// Has this transaction's commit remove the entries past the newest `keeping`, once in
    /// every `slack` numbers (after the commit: the backend decides which are final).
    func trimChangeLog(keeping: UInt64, slack: UInt64) throws
    /// Makes every token followed by more than `keeping` entries expire now (the floor rises
    /// to the oldest of the newest `keeping`), whatever the retention says later.
    func expireChangeLog(keeping: UInt64) throws
    /// Makes every number taken so far expire: the next entry's number is past them, and the
    /// floor above them.
    func restartChangeLog() throws
    /// Drops every entry and makes the next number greater than `head` (never lower than one
    /// taken already), with the floor at `head + 1`, so that a token at `head` is followed.
    func continueChangeLog(after head: UInt64) throws
}

/// Whether the write block running on this thread is on its first run in a ``DataStore``'s loop
/// that runs it again after a conflict (``StorageEngine/conflictRetries``): an engine may then
/// take, on that run, a shortcut that a conflict corrects (PostgreSQL sends inserts without
/// waiting and takes a key found taken for a conflict). A transaction made outside that loop (a
/// schema upgrade's) or on a later run sees `false`.
@_spi(Backend) public enum WriteRun {
    /// The value is the flag itself (a null pointer or not).
    private static let slot = ThreadSlot()

    /// The calling thread's flag.
    public static var isFirstOfRetried: Bool { slot.value != nil }

    /// Runs `body` with the calling thread's flag set to `first`, then puts back what it was.
    @inline(__always)
    static func with<T>(firstOfRetried first: Bool, _ body: () throws -> T) rethrows -> T {
        try slot.with(first ? UnsafeRawPointer(bitPattern: 1) : nil, body)
    }
}
