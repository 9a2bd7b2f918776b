#if Postgres
import CLibPQ
@_spi(Backend) import DataStoreAPI
import Foundation
import Logging
import Synchronization

/// The PostgreSQL backend: a store is one PostgreSQL schema holding a table per entity (a column
/// per attribute, the primary key as the table's), `_ds_meta` (format and schema), `_ds_feed`
/// (the change feed) and `_ds_feed_seq` (the feed's numbers, see ``FeedWatermark``).
///
/// Reads run in `REPEATABLE READ READ ONLY` transactions (one snapshot per read block) on
/// reader connections; writes run at `SERIALIZABLE`, so that writers of every process and
/// machine behave as if they ran one after another; a write the server rolls back for a
/// conflict with another (`40001`, `40P01`) runs again (``conflictRetries``). Creating or
/// upgrading a store takes a transaction-scoped advisory lock.
///
/// Values are stored so that PostgreSQL's order and equality are the canonical ones: ints,
/// dates (microseconds) as `bigint`, doubles as `float8` (bit-exact, `-0.0` kept), strings as
/// `text COLLATE "C"` (byte order) with NUL, which text cannot hold, written as `\u{1}\u{1}` and
/// `\u{1}` as `\u{1}\u{2}` (an escape that keeps byte order), bytes as `bytea`, uuids as `uuid`.
/// Filters, sorts and pages are answered by the shared request stages over key-ordered pages.
@_spi(Backend) public final class PostgresEngine: StorageEngine, CommitCounting, CommitNotifying, ReferenceConstraining,
    @unchecked Sendable {
    /// 2: the feed's numbers come from a sequence (format 1 moved a counter row in every write
    /// transaction, `_ds_commits`); a store of format 1 is upgraded when opened. 3: the header
    /// carries its checksum (``StoreHeader``); a store of format 2 has its header written again
    /// by the first open that gives a schema (an app's, not a source's or a check's). 4: each
    /// entity's rows carry their checksum (`_ds_sum`, ``PostgresRowSum``); the same open adds the
    /// column and writes the sums of the rows already there.
    static let formatVersion = 4
    /// The first format whose header carries its checksum.
    static let headerSealedSince = 3
    /// The first format whose rows carry their checksum.
    static let rowsSealedSince = 4

    /// Whether the entities' rows carry their checksum: a store opened at an older format without
    /// a schema (a source, a check) is read as it is, its rows unchecked.
    let sealedRows: Bool

    public let schema: Schema
    public let location: PostgresLocation
    let durability: Durability
    /// The writer connections not in a transaction now; a write takes one (or makes one, up to
    /// ``writeConnections``) and gives it back. A lost one reconnects when next taken.
    private let idleWriters = Mutex<[PostgresSession]>([])
    /// Every writer connection made, for closing and counting.
    private let allWriters = Mutex<[PostgresSession]>([])
    /// At most ``writeConnections`` write transactions at once.
    private let writeSlots: DispatchSemaphore
    /// The size of the writer pool: as many write transactions at once.
    let writeConnections: Int
    private let readers = Mutex<[PostgresSession]>([])
    /// At most ``readConnections`` reads at once, each on a connection of the pool.
    private let readSlots: DispatchSemaphore
    /// The size of the read pool: as many connections as reads at once.
    let readConnections: Int
    private let poller = Mutex<PostgresSession?>(nil)
    /// From this many conflicts in a row of one block on, its next run runs alone (see
    /// ``sendBegin(_:)``).
    static let runsAloneAfter = 2
    /// How long a transaction that runs alone waits for the gate.
    static let aloneWait = "500ms"
    /// The advisory lock that creating or opening this store takes.
    let lockKey: Int64
    /// What this process's feed reads learned of numbers taken by transactions still running.
    let feedWatermark = FeedWatermark()
    /// The standbys that serve reads (``PostgresLocation/readHosts``), tried in turn.
    let standbys: [StandbyPool]
    /// The standby the next read tries first.
    private let nextStandby = Atomic<Int>(0)
    /// Where the primary's WAL was just after this store's last commit: a read that must see
    /// the store's own writes waits until its standby has replayed this far.
    let lastCommitPosition = Atomic<UInt64>(0)
    /// Where the primary's WAL was once the store was open (its tables made or upgraded): what
    /// a standby must have replayed for any read.
    private(set) var openedPosition: UInt64 = 0
    /// The server's WAL page size (`wal_block_size`), for ``WALPosition/recordsEnd(_:pageSize:)``.
    private(set) var walPageSize: UInt64 = 8_192
    /// The primary's WAL positions the store saw (its commits', and a sample a second while
    /// standbys serve reads), for the lag bound.
    let primaryPositions: PrimaryPositionLog
    /// Whether this store's last commit's WAL position could not be learned.
    let commitPositionUnknown = Atomic<Bool>(false)
    /// Whether a read is asking the primary for its position now (one at a time).
    private let samplingPrimary = Atomic<Bool>(false)
    /// The reads served so far by the primary and by standbys.
    private let primaryReads = Atomic<Int>(0), standbyReads = Atomic<Int>(0)
    /// The reads served so far by the primary and by standbys (for tests and the harness).
    var readsServed: (primary: Int, standbys: Int) {
        (primaryReads.load(ordering: .relaxed), standbyReads.load(ordering: .relaxed))
    }

    /// - Parameter upgradesFormat: whether a store of an older format is upgraded to this one
    ///   (an app's open; `requested` alone does not say, since an existing store's engine is
    ///   opened with its stored schema first); a store of format 1 always is.
    public init(location: PostgresLocation, schema requested: Schema?, durability: Durability = .full,
                readConnections: Int = 16, writeConnections: Int? = nil, upgradesFormat: Bool? = nil) throws {
        guard readConnections >= 1 else {
            throw StoreError(.invalidArgument, "readConnections must be at least 1, not \(readConnections)")
        }
        let writeConnections = writeConnections ?? location.writeConnections ?? PostgresLocation.defaultWriteConnections
        guard (1...PostgresLocation.maxWriteConnections).contains(writeConnections) else {
            throw StoreError(.invalidArgument, "writeConnections must be 1 to \(PostgresLocation.maxWriteConnections), "
                + "not \(writeConnections)")
        }
        self.location = location
        self.durability = durability
        self.readConnections = readConnections
        self.writeConnections = writeConnections
        writeSlots = DispatchSemaphore(value: writeConnections)
        concurrentReads = try PositiveInt(min(readConnections, max(2, 2 * ProcessInfo.processInfo.activeProcessorCount)),
                                          naming: "readConnections")
        readSlots = DispatchSemaphore(value: readConnections)
        lockKey = Self.lockKey(location.schema)
        standbys = location.readHosts.map { StandbyPool(server: $0, of: location) }
        primaryPositions = PrimaryPositionLog(lag: location.maxStandbyLag)
        let s = PostgresSQL.quote(location.schema)
        quotedSchema = s
        let feed = PostgresFeedSQL(s: s, lockKey: lockKey)
        feedSQL = feed
        sharedGate = "LOCK TABLE \(s)._ds_gate IN ACCESS SHARE MODE"
        exclusiveGate = "LOCK TABLE \(s)._ds_gate IN ACCESS EXCLUSIVE MODE"
        let writer = try PostgresSession(location)
        writer.feedStateCache = feedStateCache
        let watermark = feedWatermark
        writer.afterReconnect = { session in Self.connectedAgain(session, feed, watermark) }
        idleWriters.withLock { $0 = [writer] }
        allWriters.withLock { $0 = [writer] }
        do {
            let commitSetting = try Self.commitSetting(writer, durability: durability)
            self.commitSetting = commitSetting
            // The setting goes in the same statement (`set_config(…, true)` is `SET LOCAL`): one
            // statement fewer for the server to run. Only the feed's state is read ahead, when
            // the store has none to assume (``FeedStateCache``; every recorded write needs its
            // settings); the feed's window and the numbers taken, which only a read of the feed
            // inside a write block needs, are read when asked, in the same snapshot.
            beginTicket = "SELECT (SELECT value FROM \(s)._ds_meta WHERE key = $1)"
                + (commitSetting.map { ", set_config('synchronous_commit', '\($0)', true)" } ?? "")
            checkedFeed = feed.checked(commitSetting: commitSetting)
            serverStart = Mutex(try Self.serverStart(writer))
            (schema, sealedRows) = try Self.prepare(writer, requested: requested, location: location,
                                                    lockKey: lockKey, upgradesFormat: upgradesFormat ?? (requested != nil))
        } catch {
            writer.close()
            throw error
        }
        // A first probe, which the process's first feed read can count (its own probe is often
        // held by writers in flight under load).
        _ = try? probeFeed(on: writer)
        // The store as opened (created, upgraded) is what every standby read must see.
        if !standbys.isEmpty,
           let row = try? writer.query("SELECT pg_current_wal_insert_lsn()::text, current_setting('wal_block_size')").first,
           let size = (try? row[1].string()).flatMap({ UInt64($0) }), let text = try? row[0].string(),
           let opened = WALPosition.parse(text).map({ WALPosition.recordsEnd($0, pageSize: size) }) {
            walPageSize = size
            openedPosition = opened
            lastCommitPosition.raise(to: opened)
            primaryPositions.note(opened)
        }
    }

    /// The `synchronous_commit` every write transaction sets for itself when the server's
    /// setting does not give the store's durability (`on` for `.full`: with
    /// `synchronous_standby_names` set, a commit then waits for a synchronous standby to have it
    /// on disk; `off` for `.normal`), in each write transaction (in the read of the feed's state,
    /// or in the statement that checks the state it assumed, as `set_config(…, true)`) rather
    /// than once per connection, so that no session state is
    /// assumed (a pooler in transaction mode hands each transaction a server connection of its
    /// choice).
    let commitSetting: String?

    private static func commitSetting(_ session: PostgresSession, durability: Durability) throws -> String? {
        let current = try session.query("SHOW synchronous_commit").first.map { try $0[0].string() } ?? "on"
        switch durability {
        case .full: return current == "off" || current == "local" ? "on" : nil
        case .normal: return current == "off" ? nil : "off"
        }
    }

    /// A stable 64-bit key from the schema's name (FNV-1a).
    static func lockKey(_ name: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in "datastore:\(name)".utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return Int64(bitPattern: hash)
    }

    /// The schema's name quoted, and the statements every write transaction sends, made once.
    let quotedSchema: String
    let feedSQL: PostgresFeedSQL
    private let sharedGate: String
    private let exclusiveGate: String
    private let beginTicket: String
    /// The feed's state as last read, which write transactions assume and check at commit.
    let feedStateCache = FeedStateCache()
    /// The statements of a write transaction that assumed the feed's state.
    let checkedFeed: PostgresFeedSQL.Checked

    private static func prepare(_ db: PostgresSession, requested: Schema?, location: PostgresLocation,
                                lockKey: Int64, upgradesFormat: Bool) throws -> (Schema, sealedRows: Bool) {
        let s = PostgresSQL.quote(location.schema)
        var binds = LibpqParameters()
        binds.append(lockKey)
        try db.query("BEGIN")
        do {
            try db.query("SELECT pg_advisory_xact_lock($1)", binds)
            var name = LibpqParameters()
            name.append(location.schema)
            let tables = try db.query(tablesOfSchema, name).rows.compactMap { try? $0[0].string() }
            var stored: Schema?
            var sealedRows = true
            if tables.contains("_ds_meta") {
                let reader = PostgresTransaction(session: db, engine: nil, quotedSchema: s)
                guard let header = try StoreHeader.read(location: location.description, supportedFormat: formatVersion,
                                                        sealedSince: headerSealedSince, reader.metadata(forKey:)) else {
                    throw StoreError(.corrupt, "\(location): the store's header is missing from _ds_meta")
                }
                stored = header.schema
                // An open with another schema than the stored one refuses before it changes the
                // store's format (the open with the stored schema that follows does that).
                if let requested { _ = try Schema.resolve(stored: header.schema, requested: requested,
                                                          location: location.description) }
                if header.format < 2 { try upgradeToSequence(db, feed: PostgresFeedSQL(s: s, lockKey: lockKey)) }
                // An app's open: the header of format 2 written again with its sum, the rows of
                // format 3 given theirs. A source's or a check's reads the store as it is: neither
                // writes.
                if header.format < formatVersion && (header.format < 2 || upgradesFormat) {
                    if header.format < rowsSealedSince {
                        try PostgresRowSum.add(to: header.schema, in: db, quotedSchema: s)
                    }
                    try writeHeader(header.schema, db, quotedSchema: s)
                } else {
                    sealedRows = header.format >= rowsSealedSince
                }
            } else if !tables.isEmpty {
                throw StoreError(.notAStore, "\(location): schema \(location.schema) holds tables but is not a "
                    + "DataStore store (no _ds_meta table)")
            } else if requested == nil {
                throw StoreError(.notFound, "\(location) does not exist")
            }
            let (schema, isNew) = try Schema.resolve(stored: stored, requested: requested, location: location.description)
            if isNew {
                try create(schema, in: db, quotedSchema: s)
            }
            try foreignKeys(schema, in: db, quotedSchema: s, location: location)
            try db.query("COMMIT")
            return (schema, sealedRows)
        } catch {
            _ = try? db.query("ROLLBACK")
            throw error
        }
    }

    /// Format 1 to 2: the feed's numbers go on from the last entry's (or the state's `next`) in a
    /// sequence, the floor is the first entry's, and the counter row is dropped. In the
    /// transaction that opens the store, under its advisory lock (which then writes the header).
    private static func upgradeToSequence(_ db: PostgresSession, feed: PostgresFeedSQL) throws {
        let s = feed.s
        // A writer of the old format still in flight appends after these bounds otherwise.
        try db.query("LOCK TABLE \(s)._ds_commits IN ACCESS EXCLUSIVE MODE")
        let bounds = try db.query("SELECT min(seq), max(seq) FROM \(s)._ds_feed").first
        var key = LibpqParameters()
        key.append(PostgresSQL.escape(ChangeLog.stateKey))
        let stateBytes = try db.query("SELECT value FROM \(s)._ds_meta WHERE key = $1", key).first.map { $0[0].bytes() }
        let statedNext = stateBytes.flatMap { ChangeLog.storedNext($0) } ?? 1
        var first = statedNext, last = statedNext - 1
        if let bounds, !bounds[0].isNull {
            first = UInt64(clamping: try bounds[0].int64())
            last = max(last, UInt64(clamping: try bounds[1].int64()))
        }
        try db.query("CREATE SEQUENCE \(s)._ds_feed_seq AS bigint")
        try db.query("CREATE TABLE \(s)._ds_gate ()")
        if last > 0 {
            var value = LibpqParameters()
            value.append(Int64(clamping: last))
            try db.query("SELECT setval(\(feed.sequenceLiteral), $1)", value)
        }
        var floor = LibpqParameters()
        floor.append(Int64(clamping: first))
        try db.query(feed.raiseFloor("$1::int8", greatest: false), floor)
        try db.query("DROP TABLE IF EXISTS \(s)._ds_commits")
    }

    /// Writes the header of this format, in the transaction that opens the store.
    private static func writeHeader(_ schema: Schema, _ db: PostgresSession, quotedSchema s: String) throws {
        try StoreHeader.write(schema, format: formatVersion) { key, value in
            var binds = LibpqParameters()
            binds.append(PostgresSQL.escape(key))
            binds.append(bytes: value)
            try db.query("INSERT INTO \(s)._ds_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE "
                + "SET value = EXCLUDED.value", binds)
        }
    }

    /// A connection made again: the numbers a reader may have seen from the server before (a
    /// failover's old primary) are skipped, and what was learned of that server forgotten.
    static func connectedAgain(_ session: PostgresSession, _ feed: PostgresFeedSQL, _ watermark: FeedWatermark) {
        watermark.reset()
        // A standby refuses; its reads see what the primary's did.
        try? feed.jump(session)
    }

    /// Inside a write transaction of the store, on the calling thread.
    public func addMissingReferenceConstraints() throws {
        guard let writer = WriteAttempts.current.session(of: self) else {
            throw StoreError(.invalidArgument, "addMissingReferenceConstraints runs only inside a write block of the store")
        }
        try Self.foreignKeys(schema, in: writer, quotedSchema: quotedSchema, location: location)
    }

    /// Each to-one relationship's deferred `FOREIGN KEY`, named `ENTITY.RELATIONSHIP`: added
    /// where missing (PostgreSQL checks the rows already there), or dropped while the migration
    /// engine fills the store entity by entity (it checks the references when it is done, and
    /// the next ordinary open adds them back).
    private static func foreignKeys(_ schema: Schema, in db: PostgresSession, quotedSchema s: String,
                                    location: PostgresLocation) throws {
        let references = schema.entities.flatMap { entity in
            entity.relationships.filter { $0.cardinality == .toOne }.map { (entity, $0) }
        }
        guard !references.isEmpty else { return }
        // A destination the migration engine has not finished may hold references to items it
        // has yet to copy: its constraints wait for the copy to finish.
        let unfinished = try PostgresTransaction(session: db, engine: nil, quotedSchema: s)
            .metadata(forKey: MetadataKeys.incompleteMigration) != nil
        var name = LibpqParameters()
        name.append(location.schema)
        let existing = Set(try db.query("SELECT c.conname::text FROM pg_constraint c JOIN pg_namespace n ON "
            + "n.oid = c.connamespace WHERE n.nspname = $1 AND c.contype = 'f'", name).rows
            .compactMap { try? $0[0].string() })
        for (entity, relationship) in references {
            let constraint = PostgresSQL.identifier("\(entity.name).\(relationship.name)")
            let table = PostgresSQL.table(entity, schema: s)
            if MigrationGate.defersReferenceChecks {
                if existing.contains(constraint) {
                    try db.query("ALTER TABLE \(table) DROP CONSTRAINT \(PostgresSQL.quote(constraint))")
                }
            } else if !unfinished, !existing.contains(constraint), let destination = schema.entity(named: relationship.destination) {
                let sql = "ALTER TABLE \(table) ADD CONSTRAINT \(PostgresSQL.quote(constraint)) FOREIGN KEY ("
                    + PostgresSQL.quote(relationship.name) + ") REFERENCES \(PostgresSQL.table(destination, schema: s)) ("
                    + PostgresSQL.quote(destination.primaryKey) + ") DEFERRABLE INITIALLY DEFERRED"
                if let failure = Self.failure(of: { () throws(StoreError) in try db.query(sql) }) {
                    guard failure.code == .referenceViolation else { throw failure }
                    throw StoreError(.referenceViolation, "\(location): '\(entity.name).\(relationship.name)' holds "
                        + "references to missing '\(destination.name)' items, so its foreign key cannot be added; "
                        + "'migrate-store check \(location)' names them")
                }
            }
        }
    }

    /// The error `body` throws, if any.
    private static func failure(of body: () throws(StoreError) -> LibpqResult) -> StoreError? {
        do {
            _ = try body()
            return nil
        } catch {
            return error
        }
    }

    private static func create(_ schema: Schema, in db: PostgresSession, quotedSchema s: String) throws {
        try db.query("CREATE SCHEMA IF NOT EXISTS \(s)")
        try db.query("CREATE TABLE \(s)._ds_meta (key text COLLATE \"C\" PRIMARY KEY, value bytea NOT NULL)")
        try db.query("CREATE TABLE \(s)._ds_feed (seq bigint PRIMARY KEY, entry bytea NOT NULL)")
        try db.query("CREATE SEQUENCE \(s)._ds_feed_seq AS bigint")
        try db.query("CREATE TABLE \(s)._ds_gate ()")
        // textsend (the text's bytes) is deterministic but not declared IMMUTABLE, which an
        // index expression needs.
        try db.query("CREATE FUNCTION \(s)._ds_hash(text) RETURNS bytea IMMUTABLE STRICT PARALLEL SAFE "
            + "LANGUAGE sql AS 'SELECT sha256(textsend($1))'")
        try db.query(PostgresRowSum.createFunction(schema: s))
        for entity in schema.entities {
            try db.query(PostgresSQL.createTable(entity, schema: s))
            try db.query(PostgresRowSum.createTrigger(entity, schema: s))
            for index in entity.indexes { try db.query(PostgresSQL.createIndex(index, of: entity, schema: s)) }
        }
        let transaction = PostgresTransaction(session: db, engine: nil, quotedSchema: s)
        try StoreHeader.write(schema, format: formatVersion) { try transaction.setMetadata($1, forKey: $0) }
    }

    /// Async reads at once, on threads of the store's own: no more than twice the cores (and
    /// the pool), since with libpq each also decodes its rows on its thread, and more would
    /// take the CPU from the app's tasks; synchronous reads use the whole pool.
    public let concurrentReads: PositiveInt

    private let entityStatements = Mutex<NameIndex<EntityStatements>>([:])

    /// The SQL of `entity`'s single-item statements, made at first use (again when the entity's
    /// attributes changed).
    func statements(_ entity: EntitySchema) -> EntityStatements {
        entityStatements.withLock { cache in
            if let known = cache[entity.name],
               known.layout === entity.layout || known.attributes.elementsEqual(entity.attributes.lazy.map(\.name)) {
                return known
            }
            let made = EntityStatements(entity, schema: quotedSchema, sealed: sealedRows)
            cache[entity.name] = made
            return made
        }
    }

    /// The sync points the writer connections sent (one round trip each); read while no write
    /// runs (the connections in use are not counted).
    var writerRoundTrips: Int { idleWriters.withLock { $0.reduce(0) { $0 + $1.connection.syncCount } } }

    public var concurrentWriters: Int { writeConnections }

    /// A writer connection of the pool (made when none is idle), for one write transaction.
    private func takeWriter() throws -> PostgresSession {
        guard writeSlots.wait(timeout: .now() + .seconds(30)) == .success else {
            throw StoreError(.busy, "\(location): every one of the \(writeConnections) writer connections stayed in a "
                + "transaction for 30 s; open the store with more writeConnections (write_connections=) or keep write "
                + "blocks shorter")
        }
        if let idle = idleWriters.withLock({ $0.popLast() }) { return idle }
        do {
            let made = try session(replacingLost: false)
            allWriters.withLock { $0.append(made) }
            return made
        } catch {
            writeSlots.signal()
            throw error
        }
    }

    fileprivate func giveBack(_ writer: PostgresSession) {
        idleWriters.withLock { $0.append(writer) }
        writeSlots.signal()
    }

    /// The store's logger, when the app configured one.
    private let logger = Mutex<Logger?>(nil)

    public func attach(_ logger: Logger) { self.logger.withLock { $0 = logger } }

    /// A connection of the pool that is still open (what it was sent last answered), or a new one.
    private func openReadSession() throws -> PostgresSession {
        var lost = false
        while let pooled = readers.withLock({ $0.popLast() }) {
            if (try? pooled.settle()) != nil, !pooled.isClosed { return pooled }
            lost = true
            logger.withLock { $0 }?.warning("PostgreSQL connection lost; reconnecting before the read",
                                            metadata: ["location": "\(location)"])
        }
        return try session(replacingLost: lost)
    }

    /// A new connection of the store's; in place of a lost one, made as ``connectedAgain(_:_:_:)``
    /// says, as are the connections it is replaced by later.
    ///
    /// A new connection that reaches another server than the store's first did (or the same one
    /// restarted: its postmaster started at another time), as after a failover that none of the
    /// store's connections saw yet, counts as made again too.
    private func session(replacingLost lost: Bool) throws -> PostgresSession {
        let made = try PostgresSession(location)
        made.feedStateCache = feedStateCache
        let feed = feedSQL, watermark = feedWatermark
        if lost || serverChanged(made) { Self.connectedAgain(made, feed, watermark) }
        made.afterReconnect = { session in Self.connectedAgain(session, feed, watermark) }
        return made
    }

    /// When the server's postmaster started, as text: what tells a restarted or other server
    /// from the one the store first connected to.
    private static func serverStart(_ session: PostgresSession) throws -> String {
        try session.query("SELECT pg_postmaster_start_time()::text").first.map { try $0[0].string() } ?? ""
    }

    /// ``serverStart(_:)`` of the server the store's connections reached last.
    private let serverStart: Mutex<String>

    /// Whether `session` reached another server than the store's connections did so far (or
    /// the same one restarted), which it then takes for the store's: once per change, so that
    /// connections made later to the same server do not count it again. One that cannot say
    /// counts as changed.
    private func serverChanged(_ session: PostgresSession) -> Bool {
        guard let start = try? Self.serverStart(session) else { return true }
        return serverStart.withLock { known in
            defer { known = start }
            return known != start
        }
    }


    /// A read runs in one `REPEATABLE READ READ ONLY` transaction. Its `BEGIN` goes with the
    /// block's first statement (after the feed's probe when that statement reads the feed) and its `COMMIT` is sent without waiting (its answer is read when
    /// the connection is next used): a point get is one round trip.
    ///
    /// With standbys (``PostgresLocation/readHosts``) a read goes to the next one that can serve
    /// it (``PostgresReadTarget``), else to the primary; a read whose standby is lost while it
    /// runs, or that reads the change feed, runs again on the primary: a read block may run more
    /// than once.
    /// Reads every row of every entity in one read transaction, each checked as a read checks it
    /// (its values against the schema, its checksum), and goes on past the damaged ones.
    /// - Returns: the rows read, those without a checksum (written by another program), and a
    ///   description of each damaged row.
    func checkRows() throws -> (rows: Int, unsealed: Int, damage: [String], sealed: Bool) {
        try withReader { reader in
            guard let transaction = reader as? PostgresTransaction else { return (0, 0, [], sealedRows) }
            var damage: [String] = []
            var (rows, unsealed) = (0, 0)
            for entity in schema.entities {
                let found = try transaction.checkRows(entity, damage: &damage)
                rows += found.rows
                unsealed += found.unsealed
            }
            return (rows, unsealed, damage, sealedRows)
        }
    }

    public func withReader<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        guard readSlots.wait(timeout: .now() + .seconds(30)) == .success else {
            throw StoreError(.busy, "\(location): every one of the \(readConnections) read connections stayed in use "
                + "for 30 s; open the store with more readConnections or finish reads sooner")
        }
        defer { readSlots.signal() }
        // (Until a commit's position is known again, a read that must see it goes to the primary.)
        if !standbys.isEmpty, case .standbys(let readYourWrites) = Self.readTarget ?? defaultReadTarget,
           !(readYourWrites && commitPositionUnknown.load(ordering: .acquiring)) {
            if primaryPositions.isOlder(than: .seconds(1)) { samplePrimaryPosition() }
            let position = max(readYourWrites ? lastCommitPosition.load(ordering: .acquiring) : openedPosition,
                               primaryPositions.floor())
            let turn = UInt(bitPattern: nextStandby.wrappingAdd(1, ordering: .relaxed).oldValue)
            let first = Int(turn % UInt(standbys.count))
            // One deadline for the waits on every standby tried.
            let deadline = ContinuousClock.now + location.standbyWait
            for offset in 0..<standbys.count {
                let pool = standbys[(first + offset) % standbys.count]
                if pool.isAvoided { continue }
                guard let session = pool.session(replayed: position, until: deadline) else { continue }
                do {
                    let result = try read(on: session, body, onStandby: true)
                    pool.give(session)
                    standbyReads.add(1, ordering: .relaxed)
                    return result
                } catch is ReadNeedsPrimary {
                    pool.give(session)
                    break
                } catch where session.isClosed {
                    // The standby went away under the read: it runs again on the primary.
                    session.close()
                    pool.avoid()
                    break
                } catch let error as StoreError where error.code == .conflict
                    || PostgresSQLState.sessionEnded.contains(error.cause?.sqlState ?? "") {
                    // Canceled for a conflict with the standby's replay (40001), or the standby
                    // is shutting down: the read runs again on the primary.
                    pool.give(session)
                    break
                } catch {
                    pool.give(session)
                    throw error
                }
            }
        }
        let session = try openReadSession()
        var healthy = true
        defer {
            if healthy { readers.withLock { $0.append(session) } } else { session.close() }
        }
        do {
            let result = try read(on: session, body, onStandby: false)
            primaryReads.add(1, ordering: .relaxed)
            return result
        } catch {
            if session.isClosed {
                healthy = false
                throw StoreError(.unavailable, "\(location): the connection to the server was lost during the read "
                    + "(\(error))")
            }
            throw error
        }
    }

    /// Asks the primary where its WAL is (what a read does when no position is a second old or
    /// newer; one read at a time asks, the others go on), so that a standby's lag is known
    /// without writes of this store's. A primary that cannot answer leaves the positions as they were.
    private func samplePrimaryPosition() {
        guard samplingPrimary.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return }
        defer { samplingPrimary.store(false, ordering: .releasing) }
        guard let session = try? openReadSession() else {
            primaryPositions.asked()
            return
        }
        let text = try? session.query("SELECT pg_current_wal_insert_lsn()::text").first?[0].string()
        if session.isClosed { session.close() } else { readers.withLock { $0.append(session) } }
        if let position = text.flatMap(WALPosition.parse).map({ WALPosition.recordsEnd($0, pageSize: walPageSize) }) {
            primaryPositions.note(position)
        } else {
            primaryPositions.asked()
        }
    }

    /// Runs a read's block in a transaction on `session`; rolls it back when the block throws
    /// (closing the connection when even that fails).
    private func read<T>(on session: PostgresSession, _ body: (any StorageReader) throws -> T, onStandby: Bool) throws -> T {
        defer { session.connection.forgetAnswers() }
        do {
            let begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
            let transaction = PostgresTransaction(session: session, engine: self, quotedSchema: quotedSchema)
            transaction.onStandby = onStandby
            transaction.pendingBegin = begin
            transaction.beginning = .read(begin)
            let result = try body(transaction)
            // (Nothing to end when the block sent nothing.)
            if transaction.pendingBegin == nil {
                try session.send("COMMIT", wanted: false)
                try session.flush()
            }
            return result
        } catch {
            // A connection whose transaction cannot be rolled back is not used again. The answers
            // still on their way are read first, so that the ROLLBACK goes after a sync point
            // (a statement that failed among them would make the server skip it).
            if !session.isClosed, (try? session.settle()) == nil || (try? session.query("ROLLBACK")) == nil {
                session.abandonConnection()
            }
            throw error
        }
    }

    /// A write transaction, at `SERIALIZABLE`: writers of every process and machine run at once
    /// and the server makes them behave as if one ran after another, rolling back one that
    /// cannot (the store then runs it again). No row is written by every transaction.
    ///
    /// At most two round trips for a write of one statement: `BEGIN`, the gate's lock (and the
    /// read of the feed's state, when the store has none to assume) and the block's first
    /// statement go together; the feed's entry (with its number and the check of an assumed
    /// state), the notification and `COMMIT` go together. One, when that statement is an insert
    /// sent without waiting (``PostgresTransaction/insertsUnchecked``): all of it goes at once.
    public func withWriter<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        try withWriter(after: nil, leavingCommitInFlight: false, body).0
    }

    public var pipelinesCommits: Bool { true }

    /// A write transaction; after `previous`, on its connection, and with
    /// `leavingCommitInFlight` returning once its `COMMIT` is sent (see
    /// ``StorageEngine/withWriter(after:leavingCommitInFlight:_:)``). Its statements go in their
    /// own pipeline segment after the `COMMIT` before them, so that they run in a transaction of
    /// their own whatever that `COMMIT` met; that `COMMIT`'s answer comes with theirs, and is read
    /// before this transaction commits.
    public func withWriter<T>(after previous: (any CommitInFlight)?, leavingCommitInFlight: Bool,
                              _ body: (any StorageWriter) throws -> T) throws -> (T, (any CommitInFlight)?) {
        let preceding = previous as? PostgresCommitInFlight
        let writer: PostgresSession
        if let preceding, preceding.engine === self, preceding.adopt() {
            writer = preceding.session
        } else {
            if let previous, case .failed = previous.outcome() { throw PrecedingCommitFailed() }
            writer = try takeWriter()
        }
        var leftInFlight = false
        defer { if !leftInFlight { giveBack(writer) } }
        /// Whether the commit before this transaction failed (its answer waited for).
        func precedingFailed() -> Bool {
            guard let preceding, case .failed = preceding.outcome() else { return false }
            return true
        }
        let attempts = WriteAttempts.current
        let outer = attempts.begin(self, on: writer)
        defer { attempts.end(restoring: outer) }
        let transaction: PostgresTransaction
        do {
            transaction = try beginWrite(on: writer, alone: attempts.conflictsInARow(of: self) >= Self.runsAloneAfter)
            // A block's first run in a store's loop that runs it again after a conflict inserts
            // without looking for its keys; a later run (after a conflict, which such an insert of
            // a taken key is) looks, as does a transaction outside that loop (a schema upgrade's)
            // and every run of a store that does not run a block again.
            transaction.insertsUnchecked = WriteRun.isFirstOfRetried
        } catch {
            if precedingFailed() { throw PrecedingCommitFailed() }
            throw error
        }
        defer { writer.connection.forgetAnswers() }
        var committing = false
        do {
            let result = try body(transaction)
            // (The block caught the error that runs it again: nothing of the transaction commits.)
            if let again = transaction.runsAgain { throw again }
            try transaction.resolveBegin()
            if precedingFailed() { throw PrecedingCommitFailed() }
            // The notification is delivered to the store's listeners when the transaction commits
            // (see `subscribeToCommits`); it goes in the feed entry's statement when there is one.
            let feed = try transaction.sendPending(notifying: commitChannel)
            // Without an entry, the state the transaction assumed is checked on its own.
            let check = feed == nil ? try transaction.sendFeedStateCheck() : nil
            let notify = feed == nil ? try writer.send("NOTIFY \(PostgresSQL.quote(commitChannel))") : nil
            committing = true
            let commit = try writer.send("COMMIT")
            // Where the WAL is once the commit is in it: what a standby must have replayed for a
            // read to see this commit (asked in the same round trip). A commit of `.full` is
            // flushed when it returns, so the flushed position covers it (and no more than what
            // was flushed: other transactions' records still in flight are not waited for); one
            // of `.normal` may not be, so the insert position is taken.
            let position = standbys.isEmpty ? nil
                : try writer.send(durability == .full ? "SELECT pg_current_wal_flush_lsn()::text"
                                                      : "SELECT pg_current_wal_insert_lsn()::text")
            let sent = PostgresCommitSent(session: writer, connection: writer.connection,
                                          transaction: transaction, commit: commit, position: position,
                                          entry: feed, check: check, notify: notify)
            // A trim of the feed that an earlier commit in flight could not run goes after a
            // commit waited for.
            if leavingCommitInFlight, !trimOwed.load(ordering: .relaxed) {
                try writer.flush()
                attempts.succeeded(self)
                leftInFlight = true
                return (result, PostgresCommitInFlight(engine: self, sent: sent))
            }
            try readCommit(sent, followed: false)
            attempts.succeeded(self)
            return (result, nil)
        } catch {
            // After a commit that failed, rolled back (on a live connection) whatever it met: it
            // runs again after the one before.
            if error is PrecedingCommitFailed || precedingFailed() {
                if !writer.isClosed {
                    _ = try? writer.settle()
                    _ = try? writer.query("ROLLBACK")
                }
                throw PrecedingCommitFailed()
            }
            if let again = transaction.runsAgain {
                // Lost or rolled back before it committed, after inserts sent without waiting
                // (``PostgresTransaction/runsAgain``): rolled back here on a live connection, and
                // the block runs again (a lost connection is made again by the next write).
                if !writer.isClosed {
                    _ = try? writer.settle()
                    _ = try? writer.query("ROLLBACK")
                    if transaction.runsAgainForgettingStatements { try? writer.connection.forgetStatements() }
                }
                attempts.failed(self, conflicted: true, limit: Self.runsAloneAfter)
                throw again
            }
            if conflictRetries > 0, (committing && writer.connection.endedBeforeAnswering)
                || (transaction.sentUncheckedInserts && writer.refusedAsReadOnly
                    && (error as? StoreError)?.cause?.sqlState == PostgresSQLState.readOnlyTransaction) {
                // Nothing of the transaction was stored: the server ended the session before it
                // answered any of it (its notice, which comes after every answer it had, came
                // first), or refused an insert sent without waiting as read-only (a primary
                // demoted, which the next connection may not reach), which aborted the
                // transaction, its COMMIT with it, while the block saw the insert stored. The
                // block runs again on a new connection.
                if !writer.isClosed { writer.abandonConnection() }
                writer.conflicted = true
                attempts.failed(self, conflicted: true, limit: Self.runsAloneAfter)
                let reason = Self.reason(of: error, at: location)
                throw StoreError(.conflict, "\(location): the server ran none of the transaction (\(reason)); the "
                    + "block runs again on a new connection",
                    cause: .postgres(sqlState: PostgresSQLState.serializationFailure, message: reason))
            }
            let failure = (error as? StoreError).map(transaction.conflictOfUncheckedInsert)
            let error: any Error = failure ?? error
            // (A run alone that still failed goes back to shared mode.)
            attempts.failed(self, conflicted: writer.conflicted, limit: Self.runsAloneAfter)
            throw failedWrite(error, failure, on: writer, committing: committing)
        }
    }

    /// A commit's answers: the `COMMIT`'s, the WAL position after it, the feed's entry, the check
    /// of the feed's state and the notification; then the feed's trim when its number says so
    /// (on `session` when nothing follows on it, else owed to the next commit waited for).
    fileprivate func readCommit(_ sent: PostgresCommitSent, followed: Bool) throws {
        func wait(_ ticket: LibpqConnection.Ticket, _ sql: String) throws -> LibpqResult {
            try sent.session.wait(ticket, on: sent.connection, sql: sql)
        }
        _ = try wait(sent.commit, "COMMIT")
        if let position = sent.position {
            if let text = try? wait(position, "the WAL position").first?[0].string(),
               let reached = WALPosition.parse(text).map({ WALPosition.recordsEnd($0, pageSize: walPageSize) }) {
                lastCommitPosition.raise(to: reached)
                primaryPositions.note(reached)
                commitPositionUnknown.store(false, ordering: .releasing)
            } else {
                // Committed, but where the WAL is was not learned (the connection went after
                // COMMIT's answer): reads that must see it go to the primary until a commit's
                // position is known again.
                commitPositionUnknown.store(true, ordering: .releasing)
            }
        }
        let entry = try sent.entry.map { try wait($0, "the change feed's entry (the transaction was rolled back)") }
        if let check = sent.check { _ = try wait(check, "the check of the change feed's state (the transaction was rolled back)") }
        // A transaction that wrote the feed's state committed it: a state read before that (by a
        // transaction whose snapshot did not have it) is not kept.
        if sent.transaction.wroteFeedState { feedStateCache.forget() }
        if let notify = sent.notify { _ = try wait(notify, "the commit's notification (the transaction was rolled back)") }
        if let (keeping, slack) = sent.transaction.pendingTrim, let number = try entry?.first?[0].int64(),
           number % Int64(clamping: slack) == 0 || trimOwed.load(ordering: .relaxed) {
            if followed {
                trimOwed.store(true, ordering: .relaxed)
            } else {
                // Committed: a failure to trim is not the write's (the next trim does it).
                trimOwed.store(false, ordering: .relaxed)
                try? trimFeed(keeping: keeping, on: sent.session)
            }
        }
    }

    /// The outcome of a commit in flight (``PostgresCommitInFlight/outcome()``).
    fileprivate func outcome(of sent: PostgresCommitSent, followed: Bool) -> CommitOutcome {
        do {
            try readCommit(sent, followed: followed)
            return .committed
        } catch {
            let failure = (error as? StoreError).map(sent.transaction.conflictOfUncheckedInsert)
            let retryable = sent.connection.isAlive && PostgresSQLState.isConflict(failure?.cause?.sqlState)
            // (Counted as a conflicted run of its block, which runs again on this thread.)
            if retryable { WriteAttempts.current.failed(self, conflicted: true, limit: Self.runsAloneAfter) }
            // The session connected again since the COMMIT (the next write found its connection
            // gone): that connection is lost, and the new one is not this commit's to drop.
            let replaced = sent.session.connection !== sent.connection
            return .failed(failedWrite(failure ?? error, failure, on: sent.session, committing: true,
                                       rollBack: !followed, connectionReplaced: replaced),
                           retryable: retryable)
        }
    }

    /// Set when a commit in flight found the feed's trim due and another write followed on its
    /// connection: the next commit waited for trims.
    private let trimOwed = Atomic<Bool>(false)

    /// A write that failed, as the caller sees it; a live connection's transaction rolled back
    /// (unless `rollBack` is false: a write follows on the connection, and rolls back what it
    /// finds), a lost one dropped.
    private func failedWrite(_ error: any Error, _ failure: StoreError?, on writer: PostgresSession, committing: Bool,
                             rollBack: Bool = true, connectionReplaced: Bool = false) -> any Error {
        // Only a connection that is gone (or going: the server said so, 57P01) leaves the
        // transaction's outcome to the server. A refusal on a live connection (a write
        // refused as read-only, 25006, is `unavailable` too) is rolled back here, so that the
        // connection's next transaction is not refused as part of an aborted one.
        let lost = connectionReplaced || writer.isClosed
            || (failure?.code == .unavailable && failure?.cause?.sqlState != PostgresSQLState.readOnlyTransaction)
        guard lost else {
            if rollBack {
                _ = try? writer.settle()
                _ = try? writer.query("ROLLBACK")
            }
            return error
        }
        // A connection taken for lost that is still open (an error that said `unavailable`
        // without the server's 25006, a cause lost on the way up) may still be inside the
        // aborted transaction: it is dropped, never handed to the next write, whose
        // statements would all fail with 25P02. The next write connects again.
        if !connectionReplaced && !writer.isClosed { writer.abandonConnection() }
        let reason = Self.reason(of: error, at: location)
        if committing {
            return StoreError(.io, "\(location): the connection to the server was lost while the transaction "
                + "committed: whether it did is unknown (\(reason))")
        }
        if let failure, PostgresLocation.isConnectFailure(failure) {
            return StoreError(.unavailable, "\(location): no server that accepts writes could be reached; nothing "
                + "of the transaction was stored (\(reason))")
        }
        return StoreError(.unavailable, "\(location): the connection to the server was lost during the "
            + "transaction, which the server rolled back; nothing of it was stored (\(reason))")
    }

    /// What went wrong, without the location the message of a store error already begins with
    /// (a message names the location once).
    static func reason(of error: any Error, at location: PostgresLocation) -> String {
        guard let failure = error as? StoreError else { return "\(error)" }
        let prefix = "\(location): "
        return failure.message.hasPrefix(prefix) ? String(failure.message.dropFirst(prefix.count)) : failure.message
    }

    /// Begins a write transaction on the writer's connection, sent without waiting. A
    /// connection that was lost (the server restarted, an idle timeout, a failover) is replaced
    /// before anything of the transaction is sent: libpq tries the location's hosts in order,
    /// and with `target_session_attrs=read-write` takes the one that accepts writes.
    private func beginWrite(on writer: PostgresSession, alone: Bool) throws -> PostgresTransaction {
        writer.conflicted = false
        if writer.isClosed {
            logger.withLock { $0 }?.warning("PostgreSQL connection lost; reconnecting before the write",
                                            metadata: ["location": "\(location)"])
            try writer.reconnect()
        }
        let transaction = PostgresTransaction(session: writer, engine: self, quotedSchema: quotedSchema)
        writer.connection.watchFailures(from: nil)
        writer.connection.markUnanswered()
        writer.refusedAsReadOnly = false
        writer.metTakenKey = false
        transaction.beginning = .write(alone: alone)
        do {
            try sendBegin(transaction, alone: alone)
        } catch {
            WriteAttempts.current.failed(self, conflicted: false, limit: Self.runsAloneAfter)
            _ = try? writer.settle()
            _ = try? writer.query("ROLLBACK")
            throw error
        }
        return transaction
    }

    /// Queues a write transaction's first statements (sent with the block's first statement).
    func sendBegin(_ transaction: PostgresTransaction, alone: Bool) throws {
        let writer = transaction.session
        try writer.send("BEGIN ISOLATION LEVEL SERIALIZABLE", wanted: false)
        // The gate: every write transaction takes `_ds_gate` in ACCESS SHARE mode, which no
        // other writer's conflicts with; one whose block conflicted twice in a row takes it in
        // ACCESS EXCLUSIVE mode instead, waiting for the writers in flight and holding off new
        // ones, so that it cannot lose again (a writer on a hot item would otherwise starve
        // behind a faster one). `LOCK TABLE` takes no snapshot: the transaction's snapshot is
        // taken after the wait.
        // Waiting for it is bounded (`lock_timeout`: another program, a `pg_dump`, may hold the
        // table); a timeout is a conflict too, and the next run goes in shared mode again.
        transaction.begunAtEpoch = feedWatermark.epoch
        if alone {
            try writer.send("SET LOCAL lock_timeout = '\(Self.aloneWait)'", wanted: false)
            try writer.send(exclusiveGate, wanted: false)
            try writer.send("SET LOCAL lock_timeout TO DEFAULT", wanted: false)
        } else {
            try writer.send(sharedGate, wanted: false)
        }
        transaction.isWrite = true
        // The feed's state as last read, assumed and checked at commit (``FeedStateCache``);
        // read first when none was, after a check failed, or when a failed check could not run
        // the block again. A transaction begun again keeps the state it assumed (its block may
        // have used it).
        let cached = feedStateCache.assumed
        if let assumed = transaction.assumedFeedState ?? (conflictRetries > 0 ? cached.value : nil) {
            transaction.beginTicket = nil
            transaction.assume(feedState: assumed)
            return
        }
        transaction.feedStateGeneration = cached.generation
        var key = LibpqParameters()
        key.append(PostgresTransaction.feedStateKey)
        transaction.beginTicket = try writer.send(beginTicket, key)
    }

    /// Removes the feed's entries past the retention: all but the newest `keeping`, and never
    /// one above the watermark (a number below it whose transaction is still running would
    /// otherwise commit under the floor, unseen), with a probe of its own. After a commit, in
    /// statements of their own (not in a serializable transaction, whose reads of the feed
    /// would conflict with every writer's entry).
    private func trimFeed(keeping: UInt64, on session: PostgresSession) throws {
        guard let (released, _) = try probeFeed(on: session), released > 0, keeping >= 1 else { return }
        try session.query(feedSQL.trim, PostgresFeedSQL.trimBinds(released: released, keeping: keeping))
    }

    /// A probe of the feed outside any transaction, and a snapshot taken after it (see
    /// ``FeedWatermark``): the highest number final in that snapshot, and the snapshot.
    private func probeFeed(on session: PostgresSession) throws -> (released: UInt64, FeedWatermark.Snapshot)? {
        let feed = feedSQL
        let begun = feedWatermark.epoch
        let issued = try session.send(feed.issued)
        let holders = try session.send(feed.holders, feed.holderBinds)
        try session.flush()
        let current = try session.send("SELECT pg_current_snapshot()::text")
        guard let taken = try session.wait(issued, sql: feed.issued).first,
              let held = try session.wait(holders, sql: feed.holders).first,
              let row = try session.wait(current, sql: "pg_current_snapshot()").first else { return nil }
        let snapshot = try FeedWatermark.Snapshot(try row[0].string())
        let released = feedWatermark.released(
            in: snapshot, begun: begun,
            probe: FeedWatermark.Probe(issued: UInt64(clamping: try taken[0].int64()),
                                       holders: FeedWatermark.holders(try held[0].string())))
        return (released, snapshot)
    }

    public var conflictRetries: Int { location.writeRetries }

    /// A conflict the writer's own transaction met (its session saw the server's 40001 or 40P01),
    /// never one that a block rethrows from another store, whose commits a retry would repeat.
    public func isRetryableConflict(_ error: StoreError) -> Bool {
        PostgresSQLState.isConflict(error.cause?.sqlState) && WriteAttempts.current.lastConflicted(self)
    }

    /// The feed's watermark as a probe of its own finds it (which also releases what earlier
    /// probes kept), mixed with the snapshot's `xmax`, which moves whenever a transaction that
    /// wrote ends: a commit the feed does not record (the feed off) changes it too.
    public func commitCounter() throws -> UInt64 {
        try poller.withLock { session in
            if session == nil || session?.isClosed == true { session = try self.session(replacingLost: session != nil) }
            guard let session else { return 0 }
            guard let (released, snapshot) = try probeFeed(on: session) else { return 0 }
            let next = UInt64(snapshot.xmax)
            return released &+ next &* 0x9E37_79B9_7F4A_7C15
        }
    }

    public var hasUnreleasedCommits: Bool { feedWatermark.isWaiting }

    /// The channel every write transaction of the store notifies at commit: `ds_` and the
    /// hash of the schema's name, within PostgreSQL's 63 bytes whatever the name.
    var commitChannel: String { feedSQL.channel }

    /// Listens on ``commitChannel`` on a connection of its own (to the location's servers, or
    /// to `listen_host`), watched by a thread of its own: the commits of every process wake
    /// `wake`, and observers do not poll while the connection lives. `nil` with `listen=poll`.
    public func subscribeToCommits(_ wake: @escaping @Sendable () -> Void) -> (any CommitSubscription)? {
        let session: PostgresSession
        switch location.listener {
        case .poll: return nil
        case .sameServer: guard let made = try? PostgresSession(location, pipelined: false) else { return nil }
            session = made
        case let .direct(host, port):
            guard let made = try? PostgresSession(location, pipelined: false, overriding: (host, port)) else { return nil }
            session = made
        }
        do {
            try session.query("LISTEN \(PostgresSQL.quote(commitChannel))")
        } catch {
            return nil
        }
        return PostgresCommitSubscription(session, wake: wake)
    }

    public func close() throws {
        for session in allWriters.withLock({ all in defer { all.removeAll() }; return all }) { session.close() }
        idleWriters.withLock { $0.removeAll() }
        for session in readers.withLock({ all in defer { all.removeAll() }; return all }) { session.close() }
        for pool in standbys { pool.close() }
        poller.withLock { $0?.close() }
    }

    /// Drops the store: its tables and its function, then its schema, in one transaction and
    /// each with RESTRICT, so that nothing but the store goes. A schema that also holds what is
    /// not the store's (a user's table, view, type or function) is refused up front, naming it;
    /// anything else that depends on the store (a view in another schema over one of its
    /// tables, a foreign key to one) makes PostgreSQL refuse the drop, and nothing is dropped. A
    /// schema whose stored schema cannot be read is refused too.
    /// - Throws: `invalidArgument` naming what is in the way.
    public static func destroy(_ location: PostgresLocation) throws {
        let session = try PostgresSession(location)
        defer { session.close() }
        let s = PostgresSQL.quote(location.schema)
        try session.query("BEGIN")
        do {
            var name = LibpqParameters()
            name.append(location.schema)
            guard try !session.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", name).isEmpty else {
                try session.query("COMMIT")
                return
            }
            let tables = try session.query("SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = "
                + "c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r','p') ORDER BY 1", name).rows
                .compactMap { try? $0[0].string() }
            var stored = Schema(entities: [])
            if tables.contains("_ds_meta") {
                let reader = PostgresTransaction(session: session, engine: nil, quotedSchema: s)
                // An encrypted store is dropped without its key: its header names its tables.
                guard let header = try SealedEngine.$physicalSchemas.withValue(true, operation: {
                    try StoreHeader.read(location: location.description, supportedFormat: formatVersion,
                                         sealedSince: headerSealedSince, reader.metadata(forKey:))
                }) else {
                    throw StoreError(.corrupt, "\(location): the store's header is missing from _ds_meta")
                }
                stored = header.schema
            }
            let others = try objectsNotOfStore(session, location, schema: stored)
            guard others.isEmpty else {
                throw StoreError(.invalidArgument, "\(location) is not dropped: its schema also holds "
                    + others.prefix(3).joined(separator: ", ") + (others.count > 3 ? " and \(others.count - 3) more" : "")
                    + (others.count == 1 ? ", which is not the store's" : ", which are not the store's"))
            }
            if !tables.isEmpty {
                try session.query("DROP TABLE " + tables.map { "\(s).\(PostgresSQL.quote($0))" }.joined(separator: ", ")
                    + " RESTRICT")
            }
            try session.query("DROP SEQUENCE IF EXISTS \(s)._ds_feed_seq RESTRICT")
            try session.query("DROP FUNCTION IF EXISTS \(s)._ds_hash(text) RESTRICT")
            try session.query("DROP FUNCTION IF EXISTS \(s).\(PostgresRowSum.function)() RESTRICT")
            try session.query("DROP SCHEMA \(s) RESTRICT")
            try session.query("COMMIT")
        } catch let error as StoreError {
            _ = try? session.query("ROLLBACK")
            // 2BP01: dependent objects still exist (PostgreSQL names them in the detail).
            if error.cause?.sqlState == PostgresSQLState.dependentObjectsStillExist {
                throw StoreError(.invalidArgument, "\(location) is not dropped: something outside it depends on "
                    + "it (\(error.cause?.message ?? error.message)); nothing was dropped", cause: error.cause)
            }
            throw error
        }
    }

    /// The relations (tables, views, foreign tables, sequences) and functions of the store's
    /// PostgreSQL schema that are not the store's own, described ("the table notes"), sorted.
    static func objectsNotOfStore(_ location: PostgresLocation, schema: Schema) throws -> [String] {
        let session = try PostgresSession(location)
        defer { session.close() }
        return try objectsNotOfStore(session, location, schema: schema)
    }

    static func objectsNotOfStore(_ session: PostgresSession, _ location: PostgresLocation, schema: Schema) throws
        -> [String] {
        var name = LibpqParameters()
        name.append(location.schema)
        let kinds = ["r": "table", "p": "table", "v": "view", "m": "materialized view", "f": "foreign table",
                     "S": "sequence"]
        let relations = try session.query(
            "SELECT c.relname::text, c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                + "WHERE n.nspname = $1 AND c.relkind IN ('r','p','v','m','f','S')", name).rows
            .compactMap { row -> (String, String)? in
                guard let name = try? row[0].string(), let kind = try? row[1].string() else { return nil }
                return (name, kind)
            }
        let functions = try session.query(
            "SELECT p.proname::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1",
            name).rows.compactMap { try? $0[0].string() }
        // Types of their own (an enum, a domain, a range, a composite type): not a table's row
        // type or an array type, which come with their tables and types.
        let types = try session.query(
            "SELECT t.typname::text FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = $1 "
                + "AND t.typtype IN ('e','d','r','m','c') AND t.typcategory <> 'A' AND (t.typrelid = 0 OR EXISTS "
                + "(SELECT 1 FROM pg_class c WHERE c.oid = t.typrelid AND c.relkind = 'c'))", name).rows
            .compactMap { try? $0[0].string() }
        let entities = ((try? schema.resolved()) ?? schema).entities
        let expected = Set(entities.map { PostgresSQL.identifier($0.name) })
        return (relations.filter { !$0.0.hasPrefix("_ds_") && !expected.contains($0.0) }
            .map { "the \(kinds[$0.1] ?? "relation") \($0.0)" }
            + functions.filter { !$0.hasPrefix("_ds_") }.map { "the function \($0)" }
            + types.map { "the type \($0)" }
            + (try objectsOnStoreTables(session, name, entities))).sorted()
    }

    /// What a user added to the store's own tables, which dropping them would drop: a column, an
    /// index, a constraint, a trigger, a rule or a row-security policy the store did not make.
    private static func objectsOnStoreTables(_ session: PostgresSession, _ schemaName: LibpqParameters,
                                             _ entities: [EntitySchema]) throws -> [String] {
        var columns: [String: Set<String>] = [:]
        var indexes: [String: Set<String>] = [:]
        var foreignKeys: [String: Set<String>] = [:]
        for entity in entities {
            let table = PostgresSQL.identifier(entity.name)
            columns[table] = Set(entity.attributes.map { PostgresSQL.identifier($0.name) } + [PostgresRowSum.name])
            indexes[table] = Set(entity.indexes.map { PostgresSQL.identifier("\(entity.name).\($0.name)") })
            foreignKeys[table] = Set(entity.relationships.filter { $0.cardinality == .toOne }
                .map { PostgresSQL.identifier("\(entity.name).\($0.name)") })
        }
        func pairs(_ sql: String) throws -> [(table: String, name: String, kind: String)] {
            try session.query(sql, schemaName).rows.compactMap { row in
                guard let table = try? row[0].string(), let name = try? row[1].string(), columns[table] != nil else {
                    return nil
                }
                return (table, name, (try? row[2].string()) ?? "")
            }
        }
        let onTables = "JOIN pg_namespace n ON n.oid = t.relnamespace WHERE n.nspname = $1 AND t.relkind IN ('r','p')"
        let addedColumns = try pairs("SELECT t.relname::text, a.attname::text, '' FROM pg_attribute a JOIN pg_class t "
            + "ON t.oid = a.attrelid \(onTables) AND a.attnum > 0 AND NOT a.attisdropped")
            .filter { columns[$0.table]?.contains($0.name) == false }
            .map { "the column \($0.name) of the table \($0.table)" }
        // (An index that backs a constraint is named with its constraint.)
        let addedIndexes = try pairs("SELECT t.relname::text, i.relname::text, '' FROM pg_index x JOIN pg_class i ON "
            + "i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid \(onTables) AND NOT x.indisprimary "
            + "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)")
            .filter { indexes[$0.table]?.contains($0.name) == false }
            .map { "the index \($0.name) on the table \($0.table)" }
        let constraintKinds = ["c": "check constraint", "u": "unique constraint", "x": "exclusion constraint",
                               "f": "foreign key", "t": "constraint trigger"]
        let addedConstraints = try pairs("SELECT t.relname::text, c.conname::text, c.contype::text FROM pg_constraint c "
            + "JOIN pg_class t ON t.oid = c.conrelid \(onTables) AND c.contype IN ('c','u','x','f','t')")
            .filter { !($0.kind == "f" && foreignKeys[$0.table]?.contains($0.name) == true) }
            .map { "the \(constraintKinds[$0.kind] ?? "constraint") \($0.name) of the table \($0.table)" }
        let triggers = try pairs("SELECT t.relname::text, g.tgname::text, '' FROM pg_trigger g JOIN pg_class t ON "
            + "t.oid = g.tgrelid \(onTables) AND NOT g.tgisinternal AND g.tgconstraint = 0")
            .filter { $0.name != PostgresRowSum.name }
            .map { "the trigger \($0.name) on the table \($0.table)" }
        let rules = try pairs("SELECT t.relname::text, r.rulename::text, '' FROM pg_rewrite r JOIN pg_class t ON "
            + "t.oid = r.ev_class \(onTables)")
            .map { "the rule \($0.name) on the table \($0.table)" }
        let policies = try pairs("SELECT t.relname::text, p.polname::text, '' FROM pg_policy p JOIN pg_class t ON "
            + "t.oid = p.polrelid \(onTables)")
            .map { "the policy \($0.name) on the table \($0.table)" }
        return addedColumns + addedIndexes + addedConstraints + triggers + rules + policies
    }

    /// The tables of the stored schema's entities that the PostgreSQL schema does not hold, sorted.
    static func missingTables(_ location: PostgresLocation, schema: Schema) throws -> [String] {
        let session = try PostgresSession(location)
        defer { session.close() }
        var name = LibpqParameters()
        name.append(location.schema)
        let tables = Set(try session.query(tablesOfSchema, name).rows.compactMap { try? $0[0].string() })
        return Set(schema.entities.map { PostgresSQL.identifier($0.name) }).subtracting(tables).sorted()
    }

    /// Whether the store's schema exists.
    public static func exists(_ location: PostgresLocation) throws -> Bool {
        let session = try PostgresSession(location)
        defer { session.close() }
        var name = LibpqParameters()
        name.append(location.schema)
        return try !session.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", name).isEmpty
    }

    /// The tables, views and foreign tables of the schema `$1`, whoever may read them: from the
    /// catalog, not `information_schema`, whose views took the server about 2 ms to plan and run
    /// at every open (a copy into a new store opens three times).
    static let tablesOfSchema = "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        + "WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')"
}

/// SQL text: identifiers, DDL, and the mapping of values to PostgreSQL types.
enum PostgresSQL {
    /// The quoted identifier of a name: the name itself when it fits PostgreSQL's 63 bytes
    /// (NAMEDATALEN - 1), which would otherwise cut it and let two names that share their
    /// first 63 bytes collide; a longer name (the limits allow 64 bytes, and an index is named
    /// `Entity.index`) becomes its first bytes, `_` and 16 hex digits of its 64-bit FNV-1a hash,
    /// 63 bytes in all. The stored schema keeps the real names.
    static func quote(_ name: String) -> String {
        let identifier = identifier(name)
        guard identifier.utf8.contains(UInt8(ascii: "\"")) else { return "\"" + identifier + "\"" }
        return "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    static let maxIdentifierBytes = 63

    static func identifier(_ name: String) -> String {
        let bytes = Array(name.utf8)
        guard bytes.count > maxIdentifierBytes else { return name }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let digits = String(hash, radix: 16)
        let suffix = "_" + String(repeating: "0", count: 16 - digits.count) + digits
        // The prefix ends at a character boundary.
        var end = maxIdentifierBytes - suffix.utf8.count
        while end > 0, bytes[end] & 0xC0 == 0x80 { end -= 1 }
        return String(decoding: bytes[..<end], as: UTF8.self) + suffix
    }

    static func table(_ entity: EntitySchema, schema: String) -> String { "\(schema).\(quote(entity.name))" }

    static func columnType(_ type: ValueType) -> String {
        switch type {
        case .int, .date: return "bigint"
        case .double: return "float8"
        case .bool: return "boolean"
        case .string: return "text COLLATE \"C\""
        case .bytes: return "bytea"
        case .uuid: return "uuid"
        }
    }

    /// The type a bind is cast to where it meets a column of `type`.
    static func castType(_ type: ValueType) -> String {
        type == .string ? "text" : columnType(type)
    }

    /// The table of an entity: a column per attribute, then the row's checksum
    /// (``PostgresRowSum``); its trigger is made apart (``PostgresRowSum/createTrigger(_:schema:)``).
    static func createTable(_ entity: EntitySchema, schema: String) -> String {
        let columns = entity.attributes.map { attribute in
            quote(attribute.name) + " " + columnType(attribute.type) + (attribute.isOptional ? "" : " NOT NULL")
        }
        return "CREATE TABLE \(table(entity, schema: schema)) (" + columns.joined(separator: ", ")
            + ", \(PostgresRowSum.column) bigint, PRIMARY KEY (\(quote(entity.primaryKey))))"
    }

    /// The columns every select and insert of an entity's rows names: its attributes', then the
    /// row's checksum where the rows carry it.
    static func columns(_ entity: EntitySchema, sealed: Bool) -> String {
        entity.attributes.map { quote($0.name) }.joined(separator: ", ") + (sealed ? ", " + PostgresRowSum.column : "")
    }

    /// An index term: long strings and bytes by their SHA-256, which keeps every entry within
    /// PostgreSQL's limit of an index row.
    static func indexTerm(_ attribute: Attribute, schema: String) -> String {
        indexTerm(attribute, schema: schema, operand: quote(attribute.name))
    }

    /// The index term of `operand` (a column, or a bind cast to the column's type).
    static func indexTerm(_ attribute: Attribute, schema: String, operand: String) -> String {
        switch attribute.type {
        case .string: return "\(schema)._ds_hash(\(operand))"
        case .bytes: return "sha256(\(operand))"
        default: return operand
        }
    }

    static func createIndex(_ index: Index, of entity: EntitySchema, schema: String) -> String {
        let terms = index.attributes.compactMap { name in entity.attributes.first { $0.name == name } }
            .map { indexTerm($0, schema: schema) }
        return "CREATE \(index.isUnique ? "UNIQUE " : "")INDEX \(quote("\(entity.name).\(index.name)")) ON "
            + "\(table(entity, schema: schema)) (" + terms.map { "(\($0))" }.joined(separator: ", ") + ")"
    }

    /// Text for a string: NUL as `\u{1}\u{1}`, `\u{1}` as `\u{1}\u{2}`.
    static func escape(_ string: String) -> String {
        // Most text holds neither byte: looked for with memchr where the string is contiguous.
        let holdsEither = string.utf8.withContiguousStorageIfAvailable { bytes in
            bytes.baseAddress.map { memchr($0, 0, bytes.count) != nil || memchr($0, 1, bytes.count) != nil } ?? false
        }
        guard holdsEither ?? string.utf8.contains(where: { $0 < 2 }) else { return string }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(string.utf8.count + 4)
        for byte in string.utf8 {
            switch byte {
            case 0: bytes += [1, 1]
            case 1: bytes += [1, 2]
            default: bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func unescape(_ text: String) -> String? {
        let holdsEscape = text.utf8.withContiguousStorageIfAvailable { bytes in
            bytes.baseAddress.map { memchr($0, 1, bytes.count) != nil } ?? false
        }
        guard holdsEscape ?? text.utf8.contains(1) else { return text }
        var bytes: [UInt8] = []
        var escaped = false
        for byte in text.utf8 {
            if escaped {
                guard byte == 1 || byte == 2 else { return nil }
                bytes.append(byte - 1)
                escaped = false
            } else if byte == 1 {
                escaped = true
            } else {
                bytes.append(byte)
            }
        }
        return escaped ? nil : String(decoding: bytes, as: UTF8.self)
    }

    static func bind(_ value: Value, into binds: inout LibpqParameters) {
        switch value {
        case .null: binds.appendNull()
        case .bool(let b): binds.append(b)
        case .int(let i): binds.append(i)
        case .double(let d): binds.append(d)
        case .string(let s): binds.append(escape(s))
        case .bytes(let b): binds.append(bytes: b)
        case .date(let t): binds.append(t.microsecondsSinceEpoch)
        case .uuid(let u): binds.append(u)
        }
    }

    /// The column `column` of the result's row `row`, of `type`, as a field of a compact record
    /// when it reads as ``value(_:_:entity:index:)`` reads it without a conversion: `nil` when it
    /// does not read (a null for a required attribute, a wrong length, text that is not UTF-8),
    /// and for text that holds the store's escape byte. ``value(_:_:entity:index:)`` then reads it,
    /// and names what is wrong. Nothing is built: a text's or bytes' field points into the result.
    @inline(__always)
    static func field(_ result: OpaquePointer, _ row: Int32, _ column: Int32, _ type: ValueType,
                      optional: Bool) -> StoredField? {
        // libpq gives a null's length as 0, so only an empty value asks whether it is null.
        let length = PQgetlength(result, row, column)
        if length == 0 && PQgetisnull(result, row, column) != 0 { return optional ? StoredField(tag: .null) : nil }
        guard let base = PQgetvalue(result, row, column) else { return nil }
        let bytes = UnsafeRawBufferPointer(start: base, count: Int(length))
        switch type {
        case .int, .date:
            guard let n = try? LibpqCell.int64(bytes) else { return nil }
            return StoredField(tag: type == .int ? .int : .date, bits: UInt64(bitPattern: n))
        case .double:
            guard let d = try? LibpqCell.double(bytes) else { return nil }
            return StoredField(tag: .double, bits: d.bitPattern)
        case .bool:
            guard bytes.count == 1 else { return nil }
            return StoredField(tag: bytes[0] != 0 ? .trueValue : .falseValue)
        case .string:
            // No NUL (text holds none), no escape byte (unescaped by `value`), and UTF-8.
            guard bytes.count == 0 || memchr(base, 0, bytes.count) == nil && memchr(base, 1, bytes.count) == nil
                && UTF8Text.isValid(bytes) else { return nil }
            return StoredField(tag: .string, bytes: bytes)
        case .bytes: return StoredField(tag: .bytes, bytes: bytes)
        case .uuid: return bytes.count == 16 ? StoredField(tag: .uuid, bytes: bytes) : nil
        }
    }

    /// The value of `cell`, a column of `type`: the `index`th attribute of `entity`, named in errors.
    static func value(_ cell: LibpqCell, _ type: ValueType, entity: EntitySchema, index: Int) throws -> Value {
        guard !cell.isNull else { return .null }
        // The value's bytes, taken from libpq once.
        let raw = cell.raw
        let value: Value
        do throws(StoreError) {
            switch type {
            case .int: value = .int(try LibpqCell.int64(raw))
            case .date: value = .date(Timestamp(microsecondsSinceEpoch: try LibpqCell.int64(raw)))
            case .double: value = .double(try LibpqCell.double(raw))
            case .bool: value = .bool(try LibpqCell.bool(raw))
            case .string: value = .string(try LibpqCell.string(raw))
            case .bytes: value = .bytes(Array(raw))
            case .uuid: value = .uuid(try LibpqCell.uuid(raw))
            }
        } catch {
            throw StoreError(.corrupt, "\(entity.name).\(entity.attributes[index].name) cannot be read as \(type): "
                + error.message)
        }
        // Most text holds no escape: its bytes are looked at once, by memchr.
        guard case .string(let text) = value, let base = raw.baseAddress, memchr(base, 1, raw.count) != nil else {
            return value
        }
        guard let unescaped = unescape(text) else {
            throw StoreError(.corrupt, "\(entity.name).\(entity.attributes[index].name) holds text with a bad escape")
        }
        return .string(unescaped)
    }
}

/// A `LISTEN` on a connection of its own, watched by a thread that waits on its socket;
/// inactive once the connection is closed or lost.
final class PostgresCommitSubscription: CommitSubscription, @unchecked Sendable {
    private let active = Mutex(true)

    init(_ session: PostgresSession, wake: @escaping @Sendable () -> Void) {
        StoreThreads(label: "DataStore.PostgresListener").submit { [self] in
            watch(session, wake: wake)
        }
    }

    /// Waits for the socket to be readable (up to 200 ms, to see a cancel), then takes the
    /// notifications; ends when the connection is lost or the subscription cancelled.
    private func watch(_ session: PostgresSession, wake: @escaping @Sendable () -> Void) {
        let connection = session.connection
        while isActive {
            var descriptor = pollfd(fd: connection.socket, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 200)
            guard isActive else { break }
            if ready < 0, errno == EINTR { continue }
            if ready != 0 {
                let channels = connection.notifications()
                if !channels.isEmpty { wake() }
                if !connection.isAlive || descriptor.revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 { break }
            }
        }
        ended()
        wake()
        session.close()
    }

    var isActive: Bool { active.withLock { $0 } }

    func ended() { active.withLock { $0 = false } }

    func cancel() { ended() }
}
#endif

#if Postgres
/// What a write transaction's `COMMIT` went with: its connection and the tickets of the answers
/// still to read. (A value: a write that waits for its commit reads them without an object made
/// for them.)
struct PostgresCommitSent {
    let session: PostgresSession
    /// The connection the `COMMIT` went on (the session may connect again before it is read).
    let connection: LibpqConnection
    let transaction: PostgresTransaction
    let commit: LibpqConnection.Ticket
    let position: LibpqConnection.Ticket?
    let entry: LibpqConnection.Ticket?
    let check: LibpqConnection.Ticket?
    let notify: LibpqConnection.Ticket?
}

/// A write transaction's `COMMIT` sent on `session`'s connection, its answers not yet read.
final class PostgresCommitInFlight: CommitInFlight {
    let engine: PostgresEngine
    let sent: PostgresCommitSent
    var session: PostgresSession { sent.session }
    private var outcomeRead: CommitOutcome?
    /// Whether a write took the session to run after this commit (and gives it back).
    private var followed = false

    init(engine: PostgresEngine, sent: PostgresCommitSent) {
        self.engine = engine
        self.sent = sent
    }

    /// The next write takes the session, unless the outcome was already read (and the session
    /// given back).
    func adopt() -> Bool {
        guard outcomeRead == nil else { return false }
        followed = true
        return true
    }

    func outcome() -> CommitOutcome {
        if let outcomeRead { return outcomeRead }
        let read = engine.outcome(of: sent, followed: followed)
        outcomeRead = read
        if !followed { engine.giveBack(session) }
        return read
    }
}
#endif
