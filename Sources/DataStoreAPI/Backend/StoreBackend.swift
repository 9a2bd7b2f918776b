/// The name of a kind of store, as written in `KIND:PATH`: `sqlite`, `lmdb`, `memory`, or the
/// name a third-party backend registers.
public struct StoreKind: RawRepresentable, Hashable, Sendable, Codable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { rawValue = value }
    public var description: String { rawValue }
}

/// How the stores of one kind are found, opened, checked, moved and removed by path.
///
/// Each backend implements it in its own module, next to the files it owns, and registers it
/// with StoreMigration's `StoreBackends.register(_:)`; the migration engine and `migrate-store`
/// then copy, sync, verify, inspect and check stores of that kind without knowing it.
@_spi(Backend) public protocol StoreBackend: Sendable {
    /// The kind's name in `KIND:PATH`.
    var kind: StoreKind { get }
    /// The suffix of the file or directory that holds a store named NAME (`sqlite` names
    /// `NAME.sqlite`); `nil` for a kind without files.
    var fileExtension: String? { get }
    /// Whether anything (a store or not) is at `path`.
    func exists(at path: String) -> Bool
    /// Whether `path` looks like a store of this kind (it decides the kind of a bare path).
    func recognizes(_ path: String) -> Bool
    /// Opens the store at `path` for reading and writing, creating it with `schema` when there
    /// is none (`nil` opens an existing store), and migrating a store of an older schema
    /// version with `upgrades` (passed to the store's initializer).
    func open(at path: String, schema: Schema?, upgrades: SchemaUpgrades, durability: Durability) throws
        -> any DataStore
    /// Opens an existing store to read it as a source: nothing may be written to it, and no
    /// damage may crash the process (`alreadyChecked` when ``check(at:)`` has just run).
    func openSource(at path: String, alreadyChecked: Bool) throws -> any DataStore
    /// ``open(at:schema:upgrades:durability:)`` for an encrypted store, opened (or created)
    /// with `key`; the default refuses a key (a kind whose stores cannot be encrypted).
    func open(at path: String, schema: Schema?, upgrades: SchemaUpgrades, durability: Durability, key: StoreKey?)
        throws -> any DataStore
    /// ``openSource(at:alreadyChecked:)`` for an encrypted store; the default refuses a key.
    func openSource(at path: String, alreadyChecked: Bool, key: StoreKey?) throws -> any DataStore
    /// The engine's own integrity check, without writing. Throws `corrupt` naming what is
    /// damaged.
    func check(at path: String) throws -> EngineCheck
    /// Deletes the store's files.
    func destroy(at path: String) throws
    /// Moves the store to `other`, which must not exist.
    func move(from path: String, to other: String) throws
    /// Bytes on disk.
    func sizeOnDisk(at path: String) -> Int64
    /// Where a migration stages a new store before it moves it to `path`.
    func stagingPath(for path: String) -> String
    /// The file or directory in the file system that holds the store at `path`, or `nil` for a
    /// kind whose stores are not files (two locations naming one file are one store, whatever
    /// their spelling: a symbolic link, a hard link, `./`).
    func fileSystemPath(of path: String) -> String?
    /// Items per write transaction of a copy into a store of this kind when the migration is
    /// given no batch size (each also writes a checkpoint): 1,000 by default. Above 1,000, a
    /// copy's first transaction takes 1,000 and the later ones as many as fit in 32 MiB, up to
    /// this.
    var copyBatchSize: Int { get }
    /// What the store at `path` sits beside that is not its own (a user's files beside
    /// `data.mdb`, a user's table in a PostgreSQL store's schema): `--overwrite` must never
    /// delete it. Empty for a kind whose store is one file.
    func otherFiles(at path: String) -> [String]
    /// What sits beside the store at `path`, which opened with `schema`, that is not its own
    /// (``otherFiles(at:)``, or a user's table in a PostgreSQL store's schema).
    /// - Throws: when it cannot be told (`--overwrite` then refuses).
    func objectsBeside(storeAt path: String, schema: Schema) throws -> [String]
    /// Whether the store at `path` is the backend's files holding nothing at all: no table, no
    /// database, no item (what a store's creation leaves when it is killed before its first
    /// commit). A copy replaces such a store at its staging path, and `--overwrite` at its
    /// destination, as it replaces an empty file. Reads only; `false` when it cannot tell.
    func holdsNothing(at path: String) -> Bool
    /// Restores the files at `path` to their last commit when a process died while it wrote
    /// them and left what a read-only open cannot undo (SQLite's hot rollback journal), as the
    /// engine's next open for writing would; returns whether it did. Only for what a copy
    /// staged (`PATH.migrating`), about to be replaced: a source, and a destination given
    /// `--overwrite`, are never written to.
    func rollBackInterruptedWrite(at path: String) -> Bool
    /// Whether `path` and `other`, as spelled, name one store (a kind whose locations have
    /// several spellings, such as PostgreSQL's URLs, compares what they name). Files are also
    /// compared by device and inode by the caller.
    func isSameStore(_ path: String, as other: String) -> Bool
}

extension StoreBackend {
    public var copyBatchSize: Int { 1_000 }

    /// Where a migration stages a new store before it moves it to `path`: `PATH.migrating`,
    /// unless the backend's paths are not file names (a PostgreSQL URL names another schema).
    public func stagingPath(for path: String) -> String { path + ".migrating" }

    /// `path` itself for a kind with a file extension, else `nil`.
    public func fileSystemPath(of path: String) -> String? { fileExtension == nil ? nil : path }

    /// Nothing: the store is one file.
    public func otherFiles(at path: String) -> [String] { [] }

    /// ``otherFiles(at:)``.
    public func objectsBeside(storeAt path: String, schema: Schema) throws -> [String] { otherFiles(at: path) }

    /// `false`: a kind that cannot tell is never taken to hold nothing.
    public func holdsNothing(at path: String) -> Bool { false }

    /// `false`: nothing to roll back (LMDB's commits leave none; a server's are its own).
    public func rollBackInterruptedWrite(at path: String) -> Bool { false }

    /// The same text.
    public func isSameStore(_ path: String, as other: String) -> Bool { path == other }

    /// Opens the store at `path` with no migration steps.
    public func open(at path: String, schema: Schema?, durability: Durability) throws -> any DataStore {
        try open(at: path, schema: schema, upgrades: SchemaUpgrades(), durability: durability)
    }

    public func open(at path: String, schema: Schema?, upgrades: SchemaUpgrades, durability: Durability,
                     key: StoreKey?) throws -> any DataStore {
        try refuseKey(key)
        return try open(at: path, schema: schema, upgrades: upgrades, durability: durability)
    }

    public func openSource(at path: String, alreadyChecked: Bool, key: StoreKey?) throws -> any DataStore {
        try refuseKey(key)
        return try openSource(at: path, alreadyChecked: alreadyChecked)
    }

    private func refuseKey(_ key: StoreKey?) throws {
        guard key != nil else { return }
        throw StoreError(.invalidArgument, "\(kind) stores cannot be encrypted, so they take no key; encrypted "
            + "stores are sqlite, lmdb, memory, postgres and jsonl")
    }
}

/// What a backend's own integrity check did.
@_spi(Backend) public struct EngineCheck: Sendable {
    /// One line saying what was checked (`PRAGMA integrity_check: ok`, the pages walked).
    public var description: String
    /// How many items the check decoded and checked against the schema, when it did; `nil`
    /// lets the caller read every item itself.
    public var itemsChecked: Int?

    public init(_ description: String, itemsChecked: Int? = nil) {
        self.description = description
        self.itemsChecked = itemsChecked
    }
}

/// A kind of store that is written whole, as one stream of items (entity by entity in schema
/// order, each in key order), instead of by transactions: a file format such as JSON Lines.
/// The migration engine copies and syncs into it through a ``StreamedStoreWriter``; reading
/// goes through the ``DataStore`` that ``StoreBackend/openSource(at:alreadyChecked:)`` returns.
@_spi(Backend) public protocol StreamedStoreBackend: StoreBackend {
    /// Starts a new stream into `path`, replacing an unfinished one; nothing appears at `path`
    /// until ``StreamedStoreWriter/finish()``. With `key`, the stream is an encrypted store's.
    func beginStream(at path: String, schema: Schema, source: String, key: StoreKey?) throws -> any StreamedStoreWriter
    /// Whether an unfinished stream into `path` was left by an interrupted run.
    func hasUnfinishedStream(at path: String) -> Bool
    /// Where the unfinished stream into `path` stood at its last checkpoint, or `nil` when there
    /// is none (or it never reached a checkpoint).
    func unfinishedStreamPosition(at path: String) -> StreamPosition?
    /// Reopens the unfinished stream into `path` at its last checkpoint: the writer, which
    /// appends after it, and a read-only store of what it holds up to there (to compare with the
    /// source before going on).
    /// `key` is the encrypted stream's, `nil` for one without encryption.
    /// - Throws: `notFound` when there is none, `corrupt` when its checkpoint cannot be read,
    ///   `wrongKey` when `key` is not the stream's.
    func resumeStream(at path: String, schema: Schema, key: StoreKey?) throws
        -> (writer: any StreamedStoreWriter, written: any DataStore)
}

/// Where a streamed write stands: stored with each checkpoint.
@_spi(Backend) public struct StreamPosition: Codable, Sendable, Hashable {
    /// The source the stream is copied from.
    public var source: String
    /// The entities written completely.
    public var finishedEntities: [String]
    /// The entity being written, and the last key written of it.
    public var entity: String?
    public var lastKey: Value?

    public init(source: String, finishedEntities: [String] = [], entity: String? = nil, lastKey: Value? = nil) {
        self.source = source
        self.finishedEntities = finishedEntities
        self.entity = entity
        self.lastKey = lastKey
    }
}

/// Writes one streamed store.
@_spi(Backend) public protocol StreamedStoreWriter: AnyObject {
    /// Where the stream stood at its last checkpoint.
    var position: StreamPosition { get }
    /// Appends an item; items come entity by entity in schema order, each in key order.
    func append(_ record: Record, of entity: EntitySchema) throws
    /// Makes everything appended so far durable and records `position` with it: an interrupted
    /// run resumes from the last checkpoint.
    func checkpoint(_ position: StreamPosition) throws
    /// What the stream holds at its last checkpoint, opened as a read-only store while it is
    /// still unfinished (not in place): what a copy verifies before it finishes, so that only a
    /// verified stream is ever moved into place.
    func openWritten() throws -> any DataStore
    /// Makes the stream durable and moves it into place (replacing what was there).
    func finish() throws
    /// Stops writing and removes the unfinished stream.
    func abandon()
}
