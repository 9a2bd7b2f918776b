internal import CSQLite
@_spi(Backend) import DataStoreAPI
import Foundation

/// One SQLite connection and its cache of prepared statements. Not thread-safe: the engine
/// hands each connection to one transaction at a time.
final class SQLiteConnection {
    let handle: OpaquePointer
    let path: String
    private var statements: [String: SQLiteStatement] = [:]
    /// The last insert plan built over the engine's own SQL (``SQLiteTransaction``), or `nil` (a
    /// transaction over other SQL let it go). It holds a statement, so it goes before they do.
    var insertPlan: SQLiteInsertPlan?
    /// Statements of SQL built per request, least recently used first, at most
    /// ``requestStatementLimit``: a request repeated in a loop is prepared once, and distinct
    /// shapes (every `in` length, every prefix length) cannot grow the cache without bound.
    private var requestStatements: [(sql: String, statement: SQLiteStatement)] = []
    static let requestStatementLimit = 16

    /// The most parameters one statement may bind (`SQLITE_LIMIT_VARIABLE_NUMBER`, 32,766 by
    /// default since SQLite 3.32; a build may set it lower).
    private(set) lazy var maxVariables = Int(sqlite3_limit(handle, SQLITE_LIMIT_VARIABLE_NUMBER, -1))

    /// Whether the connection was opened with `SQLITE_OPEN_READONLY`.
    let isReadOnly: Bool
    private var isClosed = false
    /// Whether `_ds_feed` was seen in this connection (it is never dropped once created, but a
    /// rolled-back transaction may have created it, so a rollback forgets).
    private var feedTableSeen = false

    /// Opens a connection and reads the schema table once (so a file that is not a database
    /// fails here with SQLITE_NOTADB), changing nothing in the file; closes the handle again when
    /// that fails. ``configure(durability:)`` then sets WAL mode, once the file is known to be a
    /// store.
    ///
    /// Read-only, it is opened with `SQLITE_OPEN_READONLY` and never configured, so nothing in
    /// the file or its journal mode changes. A WAL database on read-only media (where SQLite can
    /// create neither `-shm` nor `-wal`) is then opened `immutable=1`, which is safe only because
    /// nothing can write it there either.
    init(path: String, create: Bool, readOnly: Bool = false) throws(StoreError) {
        self.path = path
        isReadOnly = readOnly
        do {
            handle = try Self.connect(path, create: create, readOnly: readOnly, immutable: false)
        } catch where readOnly && !FileManager.default.isWritableFile(atPath: Self.directory(of: path)) {
            handle = try Self.connect(path, create: false, readOnly: true, immutable: true)
        }
    }

    /// Opens, configures (extended result codes, busy timeout, no double-quoted strings, the
    /// folding collation) and reads the schema table once; closes the handle again on failure.
    private static func connect(_ path: String, create: Bool, readOnly: Bool,
                                immutable: Bool) throws(StoreError) -> OpaquePointer {
        let db = try open(path, create: create, readOnly: readOnly, immutable: immutable)
        func fail(_ rc: Int32, _ context: String) -> StoreError {
            let failure = SQLiteConnection.error(db, rc, path: path, context)
            sqlite3_close_v2(db)
            return failure
        }
        sqlite3_extended_result_codes(db, 1)
        sqlite3_busy_timeout(db, 5_000)
        var rc = ds_sqlite3_disable_double_quoted_strings(db)
        guard rc == SQLITE_OK else { throw fail(rc, "cannot turn off double-quoted string literals") }
        rc = sqlite3_create_collation_v2(db, foldingCollation, SQLITE_UTF8, nil, foldASCIICompare, nil)
        guard rc == SQLITE_OK else { throw fail(rc, "cannot register collation \(foldingCollation)") }
        rc = sqlite3_create_function_v2(db, hasElementFunction, 2,
                                        SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_DIRECTONLY, nil,
                                        hasElement, nil, nil, nil)
        guard rc == SQLITE_OK else { throw fail(rc, "cannot register the SQL function \(hasElementFunction)") }
        rc = SQLiteRowSum.register(on: db)
        guard rc == SQLITE_OK else { throw fail(rc, "cannot register the SQL function \(SQLiteRowSum.function)") }
        rc = sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", nil, nil, nil)
        if rc == SQLITE_ERROR || sqlite3_extended_errcode(db) == Self.ioErrorShortRead {
            // The header or the schema table cannot be read ("unsupported file format", a file
            // cut short): the file is damaged, whatever the code says.
            let cause = StoreError.Cause(library: "sqlite", code: sqlite3_extended_errcode(db),
                                         message: String(cString: sqlite3_errmsg(db)))
            sqlite3_close_v2(db)
            throw StoreError(.corrupt, "\(path) is damaged: its header or schema table cannot be read", cause: cause)
        }
        guard rc == SQLITE_OK else { throw fail(rc, "cannot read the schema") }
        return db
    }

    /// Whether the database at `path` exists, is at most one page long and its schema table
    /// lists nothing (no table, index, view or trigger), read by a connection that only reads;
    /// `false` when it cannot be read. One page: a new database in WAL mode with nothing created
    /// yet; a store whose first page was damaged (its schema table emptied) is longer.
    static func holdsNoSchemaObject(_ path: String) -> Bool {
        guard FileManager.default.fileExists(atPath: path),
              let db = try? open(path, create: false, readOnly: true, immutable: false) else { return false }
        defer { sqlite3_close_v2(db) }
        guard let pages = scalar(db, "PRAGMA page_count"), pages <= 1 else { return false }
        return scalar(db, "SELECT count(*) FROM sqlite_master") == 0
    }

    /// When a connection that only reads cannot read the database at `path` because of a hot
    /// journal (`SQLITE_READONLY_ROLLBACK`), opens it with a connection that may write and reads
    /// its schema table: SQLite rolls the journal back before its first read. Nothing else is
    /// written, and nothing at all for any other failure.
    static func rollBackHotJournal(_ path: String) {
        guard let reader = try? open(path, create: false, readOnly: true, immutable: false) else { return }
        let refused = scalar(reader, "SELECT count(*) FROM sqlite_master") == nil
            && sqlite3_extended_errcode(reader) == readOnlyRollback
        sqlite3_close_v2(reader)
        guard refused, let db = try? open(path, create: false, readOnly: false, immutable: false) else { return }
        _ = scalar(db, "SELECT count(*) FROM sqlite_master")
        sqlite3_close_v2(db)
    }

    /// `SQLITE_READONLY_ROLLBACK`: a hot journal that a connection that only reads cannot roll
    /// back.
    private static let readOnlyRollback = SQLITE_READONLY | (3 << 8)

    /// The first column of the first row of `sql`, `nil` when it cannot be read.
    private static func scalar(_ db: OpaquePointer, _ sql: String) -> Int64? {
        var statement: OpaquePointer?
        defer { sqlite3_finalize(statement) }
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK,
              sqlite3_step(statement) == SQLITE_ROW else { return nil }
        return sqlite3_column_int64(statement, 0)
    }

    private static func directory(of path: String) -> String {
        PathNames.containingDirectory(of: path)
    }

    private static func open(_ path: String, create: Bool, readOnly: Bool,
                             immutable: Bool) throws(StoreError) -> OpaquePointer {
        var db: OpaquePointer?
        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI
        flags |= readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0)
        let target = immutable ? "file:" + Self.uriEscaped(path) + "?immutable=1" : Self.uriEscaped(path, plain: true)
        let rc = sqlite3_open_v2(target, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(db)
            throw openError(rc, path: path, message: message)
        }
        return db
    }

    /// The path as SQLite reads it with `SQLITE_OPEN_URI`: a plain path that begins with
    /// `file:` would be read as a URI, so it is given as one; in a URI, `%`, `?` and `#` are
    /// escaped.
    private static func uriEscaped(_ path: String, plain: Bool = false) -> String {
        if plain && !path.hasPrefix("file:") { return path }
        var escaped = ""
        for character in path {
            switch character {
            case "%": escaped += "%25"
            case "?": escaped += "%3f"
            case "#": escaped += "%23"
            default: escaped.append(character)
            }
        }
        return plain ? "file:" + escaped : escaped
    }

    /// WAL mode (readers see a snapshot while a write runs) and the durability setting.
    func configure(durability: Durability) throws(StoreError) {
        try execute("PRAGMA journal_mode=WAL")
        try execute("PRAGMA synchronous=\(durability == .full ? "FULL" : "NORMAL")")
    }

    deinit {
        try? close()
    }

    /// Finalizes the cached statements and closes the connection.
    /// - Throws: SQLite's error when it cannot close (a statement still running).
    func close() throws(StoreError) {
        guard !isClosed else { return }
        isClosed = true
        insertPlan = nil
        statements.removeAll()
        recentStatements.removeAll()
        requestStatements.removeAll()
        own = own.map { _ in nil }
        let rc = sqlite3_close(handle)
        if rc != SQLITE_OK {
            let failure = error(rc, "cannot close the connection")
            sqlite3_close_v2(handle)
            throw failure
        }
    }

    private static func openError(_ rc: Int32, path: String, message: String) -> StoreError {
        let cause = StoreError.Cause(library: "sqlite", code: rc, message: message)
        let directory = PathNames.directory(of: path)
        if rc & 0xFF == SQLITE_CANTOPEN, FileManager.default.fileExists(atPath: path),
           !FileManager.default.isReadableFile(atPath: path) {
            return StoreError(.readOnly, "\(path): permission denied: cannot read the file", cause: cause)
        }
        if !FileManager.default.fileExists(atPath: directory.isEmpty ? "." : directory) {
            return StoreError(.notFound, "\(path): directory \(directory) does not exist", cause: cause)
        }
        if rc & 0xFF == SQLITE_READONLY || rc & 0xFF == SQLITE_PERM
            || !FileManager.default.isWritableFile(atPath: directory.isEmpty ? "." : directory) {
            return StoreError(.readOnly, "\(path): cannot open for writing", cause: cause)
        }
        return StoreError(.io, "\(path): cannot open", cause: cause)
    }

    /// The collation of case-insensitive sorts: ASCII letters folded, then bytes and lengths
    /// compared as memcmp does. SQLite's own NOCASE stops at the first NUL byte both strings
    /// share and then compares lengths, which is not the canonical order. Registered on every
    /// connection and used only in `ORDER BY`, so the file stays readable without it.
    static let foldingCollation = "DS_FOLD_ASCII"

    /// `SQLITE_CONSTRAINT_PRIMARYKEY` and `SQLITE_CONSTRAINT_ROWID`: extended result codes are
    /// macros that Swift does not import ("(SQLITE_CONSTRAINT | (6<<8))" in sqlite3.h).
    static let constraintPrimaryKey = SQLITE_CONSTRAINT | (6 << 8)
    static let constraintRowID = SQLITE_CONSTRAINT | (10 << 8)
    /// `SQLITE_CONSTRAINT_FOREIGNKEY`.
    static let constraintForeignKey = SQLITE_CONSTRAINT | (3 << 8)
    /// `SQLITE_IOERR_SHORT_READ`: a read past the end of a file cut short.
    static let ioErrorShortRead = SQLITE_IOERR | (2 << 8)

    /// Turns a SQLite result code into the package's error, keeping the code and message.
    /// - Parameter cause: SQLite's code and message as they were when the call failed, when they
    ///   were kept; read from the connection otherwise.
    func error(_ rc: Int32, _ context: String, cause: StoreError.Cause? = nil) -> StoreError {
        Self.error(handle, rc, path: path, context, cause: cause)
    }

    /// SQLite's extended code and message of the last call on the connection that failed.
    static func cause(_ handle: OpaquePointer) -> StoreError.Cause {
        StoreError.Cause(library: "sqlite", code: sqlite3_extended_errcode(handle), message: String(cString: sqlite3_errmsg(handle)))
    }

    static func error(_ handle: OpaquePointer, _ rc: Int32, path: String, _ context: String,
                      cause given: StoreError.Cause? = nil) -> StoreError {
        let cause = given ?? Self.cause(handle)
        let extended = cause.code
        let message = "\(path): \(context)"
        switch rc & 0xFF {
        case SQLITE_BUSY, SQLITE_LOCKED: return StoreError(.busy, message, cause: cause)
        case SQLITE_FULL: return StoreError(.storeFull, message + ": the disk is full", cause: cause)
        case SQLITE_CORRUPT: return StoreError(.corrupt, message + ": the database file is damaged", cause: cause)
        case SQLITE_NOTADB: return StoreError(.notAStore, "\(path) is not a SQLite database", cause: cause)
        case SQLITE_READONLY, SQLITE_PERM: return StoreError(.readOnly, message, cause: cause)
        case SQLITE_CONSTRAINT where extended == constraintForeignKey:
            return StoreError(.referenceViolation, message + ": a foreign key points at a row that does not exist",
                              cause: cause)
        case SQLITE_CONSTRAINT: return StoreError(.uniqueViolation, message, cause: cause)
        case SQLITE_TOOBIG: return StoreError(.limitExceeded, message, cause: cause)
        case SQLITE_NOMEM:
            // A damaged page or record can claim a size SQLite then fails to allocate (an
            // allocation over its 2 GiB ceiling fails at once). With memory to spare, that is what
            // happened: no value of a store's is larger than its limits let it be.
            if let available = availableMemory(), available >= spareMemory {
                return StoreError(.corrupt, message + ": SQLite could not allocate what the file asks for, with "
                    + "\(available >> 20) MiB of memory free: the database file is damaged", cause: cause)
            }
            return StoreError(.io, message + ": out of memory", cause: cause)
        default: return StoreError(.io, message, cause: cause)
        }
    }

    /// The memory free that makes an allocation SQLite could not make one a damaged file asked
    /// for: twice the largest row a store holds (``Limits/maxAttributes`` values of
    /// ``Limits/maxValueBytes``, 1 GiB).
    static let spareMemory = 2 << 30

    /// `MemAvailable` of /proc/meminfo in bytes, or `nil` where it cannot be read.
    static func availableMemory() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("MemAvailable:") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 2, let kibibytes = Int(fields[1]) else { return nil }
            return kibibytes << 10
        }
        return nil
    }

    /// An uncached prepared statement, for SQL run once (as GRDB's `makeStatement`).
    func makeStatement(_ sql: String) throws(StoreError) -> SQLiteStatement {
        try SQLiteStatement(connection: self, sql: sql, persistent: false)
    }

    /// A prepared statement for SQL built per request, from a small LRU cache.
    func requestStatement(_ sql: String) throws(StoreError) -> SQLiteStatement {
        if let index = requestStatements.lastIndex(where: { $0.sql == sql }) {
            // A statement a visitor is still stepping (a request made inside `forEach`) is left
            // alone: this request gets one of its own.
            if sqlite3_stmt_busy(requestStatements[index].statement.handle) != 0 { return try makeStatement(sql) }
            let hit = requestStatements.remove(at: index)
            requestStatements.append(hit)
            return hit.statement
        }
        let statement = try makeStatement(sql)
        if requestStatements.count >= Self.requestStatementLimit { requestStatements.removeFirst() }
        requestStatements.append((sql, statement))
        return statement
    }

    /// How many statements are cached (fixed SQL and the request LRU).
    var cachedStatementCount: Int { statements.count + requestStatements.count }

    /// A cached prepared statement for `sql`, which must be one of the fixed statements.
    ///
    /// The last few found are looked up first by comparing the text, which for the same string
    /// (an entity's insert SQL, a literal) compares its storage and not its bytes: a small write
    /// transaction finds its insert and the change feed's insert without hashing their text.
    func statement(_ sql: String) throws(StoreError) -> SQLiteStatement {
        let cached: SQLiteStatement
        // The lengths first: two SQL texts of a transaction's statements seldom have one, and
        // comparing two long texts' bytes is what a miss cost.
        if let recent = recentStatements.first(where: { $0.sql.utf8.count == sql.utf8.count && $0.sql == sql }) {
            cached = recent.statement
        } else if let found = statements[sql] {
            cached = found
            remember(sql, found)
        } else {
            let statement = try SQLiteStatement(connection: self, sql: sql)
            statements[sql] = statement
            remember(sql, statement)
            return statement
        }
        // Busy: a visitor is stepping it (see `requestStatement`).
        if sqlite3_stmt_busy(cached.handle) != 0 { return try makeStatement(sql) }
        return cached
    }

    /// The fixed statements found last, newest last; at most four.
    private var recentStatements: [(sql: String, statement: SQLiteStatement)] = []

    private func remember(_ sql: String, _ statement: SQLiteStatement) {
        if recentStatements.count == 4 { recentStatements.removeFirst() }
        recentStatements.append((sql, statement))
    }

    /// The statements every transaction runs, kept by position so that finding one hashes no
    /// SQL text (a small write transaction runs three of them: begin, the feed's insert, commit).
    enum OwnStatement: Int, CaseIterable {
        case beginWrite, beginRead, commit, appendFeedEntry

        var sql: String {
            switch self {
            case .beginWrite: return "BEGIN IMMEDIATE"
            case .beginRead: return "BEGIN"
            case .commit: return "COMMIT"
            case .appendFeedEntry: return "INSERT INTO _ds_feed (seq, entry) VALUES (?, ?)"
            }
        }
    }

    // `@exclusivity(unchecked)`: a connection is used by one thread at a time, and each access to
    // `own` ends before the next begins (none spans a call). Checked at run time, each lookup
    // cost about 75 instructions (callgrind, `profile-store sqlite small 20000`).
    @exclusivity(unchecked) private var own = [SQLiteStatement?](repeating: nil, count: OwnStatement.allCases.count)

    /// One of the connection's own statements, prepared at its first use.
    func statement(_ which: OwnStatement) throws(StoreError) -> SQLiteStatement {
        if let statement = own[which.rawValue] { return statement }
        let statement = try SQLiteStatement(connection: self, sql: which.sql)
        own[which.rawValue] = statement
        return statement
    }

    /// The main database's data version (`SQLITE_FCNTL_DATA_VERSION`), which "changes whenever
    /// any change occurs to the corresponding database file, either through SQL statements on
    /// the same database connection or through transactions committed by separate database
    /// connections possibly in other processes" (sqlite3.h). Another connection's commit shows
    /// once this connection's next transaction has taken its lock. `nil` when SQLite cannot
    /// tell. A call into the pager: `PRAGMA data_version`, a statement, took about 860
    /// instructions a write transaction (callgrind, `profile-store sqlite small 20000`).
    func fileDataVersion() -> UInt32? {
        var version: UInt32 = 0
        // A null name is the main database ("main", looked up by name, took about 110 more a call).
        return sqlite3_file_control(handle, nil, SQLITE_FCNTL_DATA_VERSION, &version) == SQLITE_OK ? version : nil
    }

    /// The write transactions this connection committed (``transaction(write:_:)``), and
    /// ``fileDataVersion()`` read just after the last of them committed: `nil` before the first,
    /// and after a write transaction that did not commit.
    private(set) var writeCommits: UInt64 = 0
    private(set) var dataVersionAfterCommit: UInt32?

    /// Runs one statement (cached), ignoring rows.
    func execute(_ sql: String, _ values: [Value] = []) throws(StoreError) {
        try statement(sql).run(values)
    }

    /// Runs a query and returns the first column of the first row as an integer.
    func scalar(_ sql: String, _ values: [Value] = []) throws(StoreError) -> Int64? {
        let statement = try statement(sql)
        try statement.bind(values)
        defer { sqlite3_reset(statement.handle) }
        return try statement.step() && !statement.isNull(at: 0) ? statement.int64(at: 0) : nil
    }

    var changes: Int { Int(sqlite3_changes(handle)) }

    /// Whether the change feed's table exists.
    func hasFeedTable() throws(StoreError) -> Bool {
        if feedTableSeen { return true }
        let found = try scalar("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '_ds_feed'") == 1
        feedTableSeen = found
        return found
    }

    /// Runs `body` in a transaction: `BEGIN IMMEDIATE` for writes (so a write never fails with
    /// SQLITE_BUSY half-way), a deferred `BEGIN` plus one read for reads (which starts the WAL
    /// snapshot at once). Commits when `body` returns, rolls back when it throws.
    func transaction<T>(write: Bool, _ body: () throws -> T) throws -> T {
        try statement(write ? .beginWrite : .beginRead).runWithoutParameters()
        do {
            if !write { _ = try scalar("SELECT count(*) FROM sqlite_master") }
            let result = try body()
            try statement(.commit).runWithoutParameters()
            if write {
                writeCommits &+= 1
                dataVersionAfterCommit = fileDataVersion()
            }
            return result
        } catch {
            if sqlite3_get_autocommit(handle) == 0 { try? execute("ROLLBACK") }
            feedTableSeen = false
            if write { dataVersionAfterCommit = nil }
            throw error
        }
    }
}

/// The `DS_FOLD_ASCII` collation (see ``SQLiteConnection/foldingCollation``): SQLite passes
/// both strings as pointers and byte counts, NUL bytes included.
private func foldASCIICompare(_: UnsafeMutableRawPointer?, _ count1: Int32, _ bytes1: UnsafeRawPointer?,
                              _ count2: Int32, _ bytes2: UnsafeRawPointer?) -> Int32 {
    let a = UnsafeRawBufferPointer(start: bytes1, count: Int(count1))
    let b = UnsafeRawBufferPointer(start: bytes2, count: Int(count2))
    return Int32(Value.compareBytes(a, b, foldingASCIICase: true))
}

extension SQLiteConnection {
    /// The SQL function `Filter.hasElement` runs: `_ds_has_element(text, element)`, where
    /// `element` is the JSON text of the scalar looked for; 1 when the text is a JSON array of
    /// scalars that holds it (read by ``JSONScalarArray``, as every backend reads it), else 0.
    static let hasElementFunction = "_ds_has_element"
}

private func hasElement(_ context: OpaquePointer?, _ count: Int32,
                        _ arguments: UnsafeMutablePointer<OpaquePointer?>?) {
    guard count == 2, let arguments, sqlite3_value_type(arguments[0]) == SQLITE_TEXT,
          let text = sqlite3_value_text(arguments[0]), let needle = sqlite3_value_text(arguments[1]) else {
        sqlite3_result_int(context, 0)
        return
    }
    let bytes = UnsafeBufferPointer(start: text, count: Int(sqlite3_value_bytes(arguments[0])))
    // The element looked for, read back from its JSON text once per statement: SQLite keeps it
    // with the constant argument (sqlite3_set_auxdata) for the statement's other rows.
    let element: Value?
    if let kept = sqlite3_get_auxdata(context, 1) {
        element = Unmanaged<ElementLookedFor>.fromOpaque(kept).takeUnretainedValue().value
    } else {
        let needleBytes = UnsafeBufferPointer(start: needle, count: Int(sqlite3_value_bytes(arguments[1])))
        let wrapped = [0x5B] + Array(needleBytes) + [0x5D]
        element = wrapped.withUnsafeBufferPointer { JSONScalarArray.elements($0) }?.first
        let kept = Unmanaged.passRetained(ElementLookedFor(element)).toOpaque()
        sqlite3_set_auxdata(context, 1, kept) { pointer in
            if let pointer { Unmanaged<ElementLookedFor>.fromOpaque(pointer).release() }
        }
    }
    guard let element else {
        sqlite3_result_int(context, 0)
        return
    }
    sqlite3_result_int(context, JSONScalarArray.holds(bytes, element) ? 1 : 0)
}

/// The element a `_ds_has_element` call looks for, kept by SQLite for the statement's rows.
private final class ElementLookedFor {
    let value: Value?
    init(_ value: Value?) { self.value = value }
}
