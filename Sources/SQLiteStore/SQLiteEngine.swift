internal import CSQLite
@_spi(Backend) import DataStoreAPI
import Foundation
import Synchronization

/// The SQLite backend: an ordinary database file with one table per entity (a column per
/// attribute, real SQL indexes) and a `_ds_meta` table holding the format version and schema.
///
/// WAL mode, one writer connection (writes are serialized by ``Store``) and a pool of reader
/// connections, so reads run concurrently with a write and see a WAL snapshot.
///
/// `@unchecked Sendable`: the writer connection is used only by the write transaction that
/// ``Store`` serializes under its write lock, and closed with that lock held; the readers live
/// in ``SQLiteReaderPool``, which guards them with a condition variable.
@_spi(Backend) public final class SQLiteEngine: StorageEngine, CommitCounting, CommitNotifying,
    @unchecked Sendable {
    /// The format this code writes; a store of a newer format is refused. Format 1 had no row
    /// checksums (``SQLiteRowSum``): a writable open adds and fills them, in one transaction; a
    /// read-only one reads the rows as they are. Formats 1 and 2 wrote the header without its
    /// checksum (``StoreHeader``): a writable open writes it again, in the same transaction.
    static let formatVersion = 3
    /// The first format whose header carries its checksum.
    static let headerSealedSince = 3

    public let schema: Schema
    /// The database file.
    public let path: String
    let options: SQLiteOptions
    private let writer: SQLiteConnection
    private let readers: SQLiteReaderPool
    private let statements: NameIndex<SQLiteEntitySQL>
    /// The connection observers poll with `PRAGMA data_version`, opened at first use.
    private let poller = Mutex<SQLiteConnection?>(nil)

    /// Opens the store at `path`, creating it (with `schema`) when the file does not exist.
    ///
    /// - Parameter schema: the schema the store must hold; `nil` opens an existing store with the
    ///   schema it holds.
    /// - Throws: `notFound` (missing directory, or missing file with no schema), `notAStore` (not
    ///   a SQLite database, or a database that is not a store), `incompatibleFormat`,
    ///   `schemaMismatch`, `readOnly`, `corrupt`.
    public init(path: String, schema requested: Schema?, options: SQLiteOptions = SQLiteOptions()) throws {
        self.path = path
        self.options = options
        let exists = FileManager.default.fileExists(atPath: path)
        if !exists && requested == nil {
            throw StoreError(.notFound, "\(path) does not exist")
        }
        var isDirectory: ObjCBool = false
        if exists, FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw StoreError(.notAStore, "\(path) is a directory, not a SQLite store file")
        }
        let connection = try SQLiteConnection(path: path, create: !options.readOnly, readOnly: options.readOnly)
        writer = connection
        var storedFormat: Int
        (schema, storedFormat) = try Self.prepare(connection, requested: options.readOnly ? nil : requested, path: path)
        if storedFormat < Self.formatVersion && !options.readOnly {
            try Self.upgrade(connection, schema, path: path, from: storedFormat)
            storedFormat = Self.formatVersion
        }
        if options.readOnly, let requested {
            _ = try Schema.resolve(stored: schema, requested: requested, location: path)
        }
        if !options.readOnly {
            try connection.configure(durability: options.durability)
            // The relationships' foreign keys, checked by SQLite at each commit as well as by
            // the store above it; off while the migration engine fills the store.
            if !MigrationGate.defersReferenceChecks, schema.entities.contains(where: { !$0.relationships.isEmpty }) {
                try connection.execute("PRAGMA foreign_keys=ON")
            }
        }
        let sealed = storedFormat >= 2
        statements = NameIndex(schema.entities.map { ($0.name, SQLiteEntitySQL($0, sealed: sealed)) })
        readers = SQLiteReaderPool(path: path, durability: options.durability, capacity: options.maxReaders.value,
                                   timeout: options.readerTimeout, readOnly: options.readOnly)
    }

    /// Checks (or creates) the metadata and tables, in one write transaction.
    /// - Returns: the schema, and the format of the store (this code's for a new one).
    private static func prepare(_ db: SQLiteConnection, requested: Schema?, path: String) throws -> (Schema, Int) {
        try db.transaction(write: requested != nil) {
            let hasMeta = try db.scalar("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '_ds_meta'")
            if hasMeta != 1 {
                let tables = try db.scalar("SELECT count(*) FROM sqlite_master") ?? 0
                if tables > 0 {
                    let coreData = try db.scalar("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name "
                        + "IN ('Z_PRIMARYKEY', 'Z_METADATA')") == 2
                    throw StoreError(.notAStore, "\(path) is a SQLite database but not a DataStore store (no _ds_meta "
                        + "table); to copy its data, read it as "
                        + (coreData ? "a Core Data store, coredata:\(path)" : "a plain SQLite database, plain-sqlite:\(path)"))
                }
            }
            var stored: Schema?
            var format = formatVersion
            if hasMeta == 1 {
                let transaction = SQLiteTransaction(connection: db, statements: [:])
                guard let header = try StoreHeader.read(location: path, supportedFormat: formatVersion,
                                                        sealedSince: headerSealedSince, transaction.metadata(forKey:)) else {
                    throw StoreError(.corrupt, "\(path): the store's header is missing from _ds_meta")
                }
                (format, stored) = header
            }
            let (schema, isNew) = try Schema.resolve(stored: stored, requested: requested, location: path)
            if isNew {
                try create(schema, in: db)
            } else {
                try checkTables(schema, in: db, path: path, sealed: format >= 2)
            }
            return (schema, format)
        }
    }

    /// Brings a store of an older format to this one, in one transaction: from format 1, each
    /// table's checksum column added and filled; from 1 and 2, the header written with its
    /// checksum. A row whose columns do not read as its attributes' types stops it, named, and
    /// leaves the store as it was.
    private static func upgrade(_ db: SQLiteConnection, _ schema: Schema, path: String, from storedFormat: Int) throws {
        try db.transaction(write: true) {
            for entity in schema.entities where storedFormat < 2 {
                let table = SQLiteQuery.quote(entity.name)
                try db.execute("ALTER TABLE \(table) ADD COLUMN \(SQLiteRowSum.column) INTEGER")
                try SQLiteRowSum.reseal(entity, table: entity.name, in: db)
                try SQLiteRowSum.createTrigger(entity, in: db)
                let unreadable = try db.makeStatement("SELECT \(SQLiteQuery.quote(entity.primaryKey)) FROM \(table) "
                    + "WHERE \(SQLiteRowSum.column) IS NULL LIMIT 1")
                if try unreadable.step() {
                    let key = String(decoding: unreadable.bytes(at: 0), as: UTF8.self)
                    throw StoreError(.corrupt, "\(path): \(entity.name)[\(key)] does not read as its attributes' types; "
                        + "the store cannot be upgraded to row checksums until it is repaired (see migrate-store check)")
                }
            }
            let transaction = SQLiteTransaction(connection: db, statements: [:])
            try StoreHeader.write(schema, format: formatVersion) { try transaction.setMetadata($1, forKey: $0) }
        }
    }

    /// Checks that every table the stored schema names has every column it names: a table
    /// changed outside the package (a column dropped or renamed with the `sqlite3` shell) must
    /// not be read as if it were whole.
    private static func checkTables(_ schema: Schema, in db: SQLiteConnection, path: String, sealed: Bool) throws {
        for entity in schema.entities {
            let statement = try db.makeStatement("SELECT name FROM pragma_table_info(?)")
            try statement.bind([.string(entity.name)])
            var columns = Set<String>()
            while try statement.step() {
                columns.insert(String(decoding: statement.bytes(at: 0), as: UTF8.self))
            }
            guard !columns.isEmpty else {
                throw StoreError(.schemaMismatch, "\(path): table \(entity.name) of the stored schema is missing")
            }
            for attribute in entity.attributes where !columns.contains(attribute.name) {
                throw StoreError(.schemaMismatch, "\(path): table \(entity.name) has no column \(attribute.name), "
                    + "which the stored schema names (was the table changed outside DataStore?)")
            }
            if sealed && !columns.contains("_ds_sum") {
                throw StoreError(.schemaMismatch, "\(path): table \(entity.name) has no column _ds_sum, which holds "
                    + "each row's checksum (was the table changed outside DataStore?)")
            }
        }
    }

    private static func create(_ schema: Schema, in db: SQLiteConnection) throws {
        try db.execute("CREATE TABLE _ds_meta (key TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL)")
        for entity in schema.entities {
            try createTable(entity, in: db)
            for index in entity.indexes { try createIndex(index, of: entity, in: db) }
        }
        let transaction = SQLiteTransaction(connection: db, statements: [:])
        try StoreHeader.write(schema, format: formatVersion) { try transaction.setMetadata($1, forKey: $0) }
    }

    /// Creates the table of an entity, without its indexes.
    static func createTable(_ entity: EntitySchema, in db: SQLiteConnection) throws {
        let columns = entity.attributes.map { attribute in
            var column = SQLiteQuery.quote(attribute.name) + columnType(attribute.type)
            if attribute.name == entity.primaryKey { column += " PRIMARY KEY" }
            if !attribute.isOptional { column += " NOT NULL" }
            return column
        }
        // Each to-one's foreign key, deferred to the commit as the store's own check is.
        let references = entity.relationships.filter { $0.cardinality == .toOne }.map { relationship in
            "FOREIGN KEY (\(SQLiteQuery.quote(relationship.name))) REFERENCES \(SQLiteQuery.quote(relationship.destination)) "
                + "DEFERRABLE INITIALLY DEFERRED"
        }
        // An int primary key is SQLite's rowid (its order is the canonical signed order); string
        // and uuid keys use a WITHOUT ROWID table ordered by the BINARY collation (memcmp).
        let withoutRowID = entity.primaryKeyAttribute.type == .int ? "" : " WITHOUT ROWID"
        // The row's checksum (SQLiteRowSum) last, after the attributes.
        let sum = SQLiteRowSum.column + " INTEGER"
        try db.execute("CREATE TABLE \(SQLiteQuery.quote(entity.name)) (\((columns + [sum] + references).joined(separator: ", ")))"
            + withoutRowID)
        try SQLiteRowSum.createTrigger(entity, in: db)
    }

    /// The SQL name of an index: `Entity.index`.
    static func indexName(_ index: Index, of entity: EntitySchema) -> String {
        SQLiteQuery.quote("\(entity.name).\(index.name)")
    }

    static func createIndex(_ index: Index, of entity: EntitySchema, in db: SQLiteConnection) throws {
        try db.execute("CREATE \(index.isUnique ? "UNIQUE " : "")INDEX \(indexName(index, of: entity)) ON "
            + "\(SQLiteQuery.quote(entity.name)) (" + index.attributes.map(SQLiteQuery.quote).joined(separator: ", ") + ")")
    }

    /// Column types. Doubles get no declared type: a REAL column stores integral doubles as
    /// integers and returns -0.0 as 0.0, and values must round-trip bit for bit.
    static func columnType(_ type: ValueType) -> String {
        switch type {
        case .bool, .int, .date: return " INTEGER"
        case .double: return ""
        case .string: return " TEXT"
        case .bytes, .uuid: return " BLOB"
        }
    }

    public func withReader<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        let connection = try readers.acquire()
        defer { readers.release(connection) }
        return try connection.transaction(write: false) {
            try body(SQLiteTransaction(connection: connection, statements: statements))
        }
    }

    public func withWriter<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        guard !writer.isReadOnly else {
            throw StoreError(.readOnly, "\(path) is open read-only; it cannot be written")
        }
        return try writer.transaction(write: true) { try body(SQLiteTransaction(connection: writer, statements: statements)) }
    }

    /// `PRAGMA data_version` of a connection that never writes: it changes whenever another
    /// connection, of this process or another, commits.
    public func commitCounter() throws -> UInt64 {
        try poller.withLock { connection in
            let reader = try connection ?? SQLiteConnection(path: path, create: false, readOnly: true)
            connection = reader
            return UInt64(bitPattern: try reader.scalar("PRAGMA data_version") ?? 0)
        }
    }

    /// Every commit, of any process, writes the write-ahead log: observers sleep until the
    /// kernel reports a write to it (``FileCommitWatch``).
    public func subscribeToCommits(_ wake: @escaping @Sendable () -> Void) -> (any CommitSubscription)? {
        FileCommitWatch.watch(path + "-wal", wake: wake)
    }

    /// Closes every reader, checkpoints the WAL into the database (unless read-only) and closes
    /// the writer connection.
    /// - Throws: the first error of the checkpoint or of closing a connection.
    public func close() throws {
        poller.withLock { $0 = nil }
        try readers.closeAll()
        if !writer.isReadOnly {
            do {
                try writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            } catch {
                try? writer.close()
                throw error
            }
        }
        try writer.close()
    }

    /// Runs `PRAGMA integrity_check` on the store at `path`, opened read-only, then reads every
    /// row of every entity, each checked as a read checks it (its columns against the schema,
    /// its checksum).
    /// - Returns: `ok`, and the rows read.
    /// - Throws: `corrupt` with SQLite's first findings, or naming every damaged row; or the
    ///   error of opening the file.
    static func integrityCheck(path: String) throws -> (String, items: Int) {
        let engine = try SQLiteEngine(path: path, schema: nil, options: SQLiteOptions(readOnly: true))
        defer { try? engine.close() }
        let statement = try engine.writer.makeStatement("PRAGMA integrity_check(20)")
        var findings: [String] = []
        while try statement.step() { findings.append(String(decoding: statement.bytes(at: 0), as: UTF8.self)) }
        guard findings == ["ok"] else {
            let lines = findings.flatMap { $0.split(separator: "\n") }
                .map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty && !$0.hasPrefix("*** in database") }
            throw StoreError(.corrupt, "\(path) is damaged: PRAGMA integrity_check found: "
                + lines.prefix(3).joined(separator: "; "))
        }
        try engine.checkTablesAgainstSchema()
        var damage: [String] = []
        var unsealed = 0
        let items = try engine.writer.transaction(write: false) {
            let transaction = SQLiteTransaction(connection: engine.writer, statements: engine.statements)
            return try engine.schema.entities.reduce(0) {
                $0 + (try transaction.checkRows($1, damage: &damage, unsealed: &unsealed))
            }
        }
        if !damage.isEmpty { throw StoreError.damagedRecords(path, damage, checked: items) }
        guard unsealed > 0 else { return ("ok", items) }
        return ("ok; \(unsealed) row\(unsealed == 1 ? "" : "s") written by another program, without a checksum", items)
    }

    /// Throws `corrupt` when the file holds a table or index that its stored schema does not
    /// explain, or lacks one it names: a schema damaged into listing fewer entities would
    /// otherwise hide tables full of rows from every read and copy.
    private func checkTablesAgainstSchema() throws {
        let statement = try writer.makeStatement("SELECT type, name FROM sqlite_master WHERE type IN ('table', 'index') "
            + "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_ds\\_%' ESCAPE '\\'")
        var present: Set<String> = []
        while try statement.step() {
            present.insert(String(decoding: statement.bytes(at: 0), as: UTF8.self) + " "
                + String(decoding: statement.bytes(at: 1), as: UTF8.self))
        }
        var expected: Set<String> = []
        for entity in schema.entities {
            expected.insert("table \(entity.name)")
            for index in entity.indexes { expected.insert("index \(entity.name).\(index.name)") }
        }
        let unexplained = present.subtracting(expected).sorted()
        let missing = expected.subtracting(present).sorted()
        guard unexplained.isEmpty && missing.isEmpty else {
            let found = unexplained.map { "\($0) that the stored schema does not name" }
                + missing.map { "no \($0) although the stored schema names it" }
            throw StoreError(.corrupt, "\(path) is damaged: it holds " + found.prefix(3).joined(separator: "; ")
                + (found.count > 3 ? "; and \(found.count - 3) more" : ""))
        }
    }

    /// How many prepared statements the writer connection caches (for tests of the bound).
    var cachedStatementCount: Int { writer.cachedStatementCount }

    /// The query plan SQLite chooses for a request (`EXPLAIN QUERY PLAN`), one line per step.
    func queryPlan(_ request: FetchRequest) throws -> [String] {
        guard let entity = schema.entity(named: request.entity) else { return [] }
        let select = SQLiteQuery.select(request, entity, columns: SQLiteEntitySQL(entity).columns)
        return try writer.transaction(write: false) {
            let statement = try writer.statement("EXPLAIN QUERY PLAN " + select.sql)
            try statement.bind(select.bindings.map { if case .value(let v) = $0 { return v }; return .null })
            defer { sqlite3_reset(statement.handle) }
            var lines: [String] = []
            while try statement.step() {
                lines.append(String(cString: sqlite3_column_text(statement.handle, 3)))
            }
            return lines
        }
    }
}

extension SQLiteEngine: RestartableWriting {
    /// A write transaction for a schema upgrade: SQLite never restarts one; it runs without the
    /// engine's prepared SQL, which describes the stored schema rather than the steps' schemas.
    public func restartableWrite<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        guard !writer.isReadOnly else {
            throw StoreError(.readOnly, "\(path) is open read-only; it cannot be written")
        }
        return try writer.transaction(write: true) { try body(SQLiteTransaction(connection: writer, statements: [:])) }
    }
}
