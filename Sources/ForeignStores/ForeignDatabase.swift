internal import CSQLite
@_spi(Backend) import DataStoreAPI
import Foundation

/// A SQLite database that this toolkit did not write (a Core Data store, a GRDB or SQLite.swift
/// database), opened so that nothing of the user's files is ever written.
///
/// SQLite writes beside a WAL database even to read it: a read-only connection creates the
/// `-wal` and `-shm` files when they are missing and writes read marks into `-shm`. So a
/// database in WAL mode, or one with a `-wal` or a hot `-journal` beside it, is read from a
/// **snapshot**: the file and its `-wal`/`-journal` are copied into a private directory, and
/// SQLite replays the copy's log there, as Core Data would see the store, without checkpointing
/// the original. A database in rollback-journal mode with no journal is read in place,
/// `mode=ro`: readers there take shared locks and write nothing. The copy is checked to be
/// stable (size and modification time of each file the same before and after); a store that
/// changes while it is copied is copied again, up to five times. The snapshot is removed when the
/// database is closed; one left by a killed process is removed by the next snapshot taken.
final class ForeignDatabase: @unchecked Sendable {
    let path: String
    let handle: OpaquePointer
    /// The file SQLite reads: the snapshot's copy (its hot journal rolled back) or `path`.
    private let readPath: String
    /// The private directory of the snapshot, removed on close.
    private let snapshotDirectory: String?
    private let lock = NSRecursiveLock()
    private var isClosed = false

    init(path: String) throws(StoreError) {
        self.path = path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw StoreError(.notFound, "\(path) does not exist")
        }
        guard !isDirectory.boolValue else {
            // SQLite says only "disk I/O error" for a directory.
            throw StoreError(.notAStore, "\(path) is a directory, not a SQLite database file; name the database "
                + "file in it (a Core Data or SwiftData store is its .sqlite or .store file)")
        }
        let logs = ["-wal", "-journal"].map { path + $0 }.filter { Self.size($0) ?? 0 > 0 }
        if Self.headerSaysWAL(path) || !logs.isEmpty {
            let (directory, copy) = try Self.snapshot(path)
            snapshotDirectory = directory
            readPath = copy
            do {
                handle = try Self.open("file:" + Self.uriEscaped(copy), flags: SQLITE_OPEN_READWRITE, path: path)
            } catch {
                try? FileManager.default.removeItem(atPath: directory)
                throw error
            }
        } else {
            snapshotDirectory = nil
            readPath = path
            handle = try Self.open("file:" + Self.uriEscaped(path) + "?mode=ro", flags: SQLITE_OPEN_READONLY,
                                   path: path)
        }
    }

    deinit { close() }

    /// What the file is, for `inspect`: its journal and what lives only in its `-wal` or
    /// `-journal`, read from the file's header and its companions as found (never written).
    func journalFacts() -> [String] {
        var facts = [Self.headerSaysWAL(path) ? "journal: WAL" : "journal: rollback (DELETE)"]
        let wal = Self.size(path + "-wal") ?? 0, journal = Self.size(path + "-journal") ?? 0
        if wal > 0 {
            facts.append("-wal: \(wal) bytes of changes not yet checkpointed into the file, read with it from a "
                + "private snapshot")
        } else if journal > 0 {
            facts.append("-journal: \(journal) bytes of an interrupted transaction, rolled back in a private "
                + "snapshot")
        } else {
            facts.append("everything is in the file (no -wal or -journal holds changes)")
        }
        return facts
    }

    func close() {
        lock.lock()
        defer { lock.unlock() }
        guard !isClosed else { return }
        isClosed = true
        sqlite3_close_v2(handle)
        if let snapshotDirectory { try? FileManager.default.removeItem(atPath: snapshotDirectory) }
    }

    /// Runs `body` with the connection to itself (one reader at a time: SQLite's own mutex is off).
    func withConnection<T>(_ body: () throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        guard !isClosed else { throw StoreError(.closed, "\(path) is closed") }
        return try body()
    }

    // MARK: Opening

    private static func open(_ uri: String, flags: Int32, path: String) throws(StoreError) -> OpaquePointer {
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(uri, &db, flags | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(db)
            throw StoreError(.io, "\(path) cannot be opened: \(message)")
        }
        sqlite3_extended_result_codes(db, 1)
        sqlite3_busy_timeout(db, 5_000)
        // A collation the writing app registered (`COLLATE unicase`) and this reader does not
        // have: stood in for by byte order (BINARY), so that its tables are read. The stored
        // bytes are what is copied, and every scan here orders its keys COLLATE BINARY.
        sqlite3_collation_needed(db, nil) { _, db, _, name in
            guard let db, let name else { return }
            sqlite3_create_collation_v2(db, name, SQLITE_UTF8, nil, { _, count1, bytes1, count2, bytes2 in
                let common = Int(min(count1, count2))
                if common > 0, let bytes1, let bytes2 {
                    let order = memcmp(bytes1, bytes2, common)
                    if order != 0 { return order < 0 ? -1 : 1 }
                }
                return count1 == count2 ? 0 : count1 < count2 ? -1 : 1
            }, nil)
        }
        let check = sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", nil, nil, nil)
        guard check == SQLITE_OK else {
            let message = String(cString: sqlite3_errmsg(db))
            sqlite3_close_v2(db)
            throw check & 0xff == SQLITE_NOTADB
                ? StoreError(.notAStore, "\(path) is not a readable SQLite database: \(message)")
                : StoreError(.corrupt, "\(path) is damaged: \(message); nothing was read")
        }
        return db
    }

    /// Whether the file's header names WAL mode (bytes 18 and 19 are 2).
    private static func headerSaysWAL(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        guard let header = try? handle.read(upToCount: 20), header.count == 20 else { return false }
        return header[18] == 2 || header[19] == 2
    }

    /// Refuses a damaged file before anything reads its tables, naming it as damaged: a file cut
    /// short (smaller than the pages its header counts, as a full disk or an interrupted copy
    /// leaves it), or one in which SQLite's `PRAGMA quick_check` finds damage.
    ///
    /// The header checked is that of the file SQLite reads: the snapshot's copy, once its hot
    /// journal is rolled back. With a `-wal` that holds frames, the database's size is the
    /// log's, not the header's (a checkpoint cut short leaves a header ahead of the file, which
    /// the log makes whole), so only `quick_check` decides.
    /// - Throws: `corrupt` naming the file and what is wrong.
    func requireIntact() throws(StoreError) {
        if (Self.size(readPath + "-wal") ?? 0) == 0, let handle = FileHandle(forReadingAtPath: readPath) {
            defer { try? handle.close() }
            if let header = try? handle.read(upToCount: 100), header.count == 100,
               header.prefix(16).elementsEqual(Array("SQLite format 3\u{0}".utf8)) {
                func word(_ offset: Int) -> Int64 {
                    header[offset..<offset + 4].reduce(Int64(0)) { $0 << 8 | Int64($1) }
                }
                let raw = Int64(header[16]) << 8 | Int64(header[17])
                let pageSize = raw == 1 ? 65_536 : raw
                let pages = word(28)
                // The count is valid only when the header's version-valid-for number equals its
                // change counter (older writers leave it stale).
                if pages > 0, word(92) == word(24), let size = Self.size(readPath), size < pages * pageSize {
                    throw StoreError(.corrupt, "\(path) is damaged: it is cut short (\(size) bytes, where its header "
                        + "counts \(pages) pages of \(pageSize) bytes, \(pages * pageSize) bytes); nothing was read")
                }
            }
        }
        let result: [String]
        do {
            result = try rows("PRAGMA quick_check").compactMap { $0.first?.stringValue }
        } catch {
            throw StoreError(.corrupt, "\(path) is damaged: \(error.message); nothing was read")
        }
        guard result == ["ok"] else {
            throw StoreError(.corrupt, "\(path) is damaged: " + result.prefix(3).joined(separator: "; ")
                + "; nothing was read")
        }
    }

    private static func size(_ path: String) -> Int64? {
        (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int64
    }

    /// Size and modification time of the file and its logs: what must not change while they are
    /// copied.
    private static func identity(_ path: String) -> [String] {
        [path, path + "-wal", path + "-journal"].map { file in
            var info = stat()
            guard stat(file, &info) == 0 else { return "-" }
            return "\(info.st_size).\(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)"
        }
    }

    /// Removes the snapshots of processes that are gone (killed before they could remove their own).
    private static func removeAbandonedSnapshots() {
        let temporary = NSTemporaryDirectory()
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: temporary)) ?? []
        where entry.hasPrefix("datastore-snapshot-") {
            let parts = entry.split(separator: "-")
            guard parts.count > 2, let pid = Int32(parts[2]), pid != getpid(), kill(pid, 0) != 0, errno == ESRCH
            else { continue }
            try? FileManager.default.removeItem(atPath: (temporary as NSString).appendingPathComponent(entry))
        }
    }

    /// Copies the database and its logs into a new private directory; returns it and the copy.
    private static func snapshot(_ path: String) throws(StoreError) -> (directory: String, copy: String) {
        removeAbandonedSnapshots()
        let directory = NSTemporaryDirectory() + "datastore-snapshot-\(getpid())-\(UUID().uuidString)"
        let copy = directory + "/" + (path as NSString).lastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw StoreError(.io, "cannot make a directory for a snapshot of \(path): \(error.localizedDescription)")
        }
        for _ in 0..<5 {
            let before = identity(path)
            do {
                for suffix in ["", "-wal", "-journal"] {
                    try? FileManager.default.removeItem(atPath: copy + suffix)
                    if FileManager.default.fileExists(atPath: path + suffix) {
                        try FileManager.default.copyItem(atPath: path + suffix, toPath: copy + suffix)
                    }
                }
            } catch {
                try? FileManager.default.removeItem(atPath: directory)
                throw StoreError(.io, "cannot copy \(path) to read a snapshot of it: \(error.localizedDescription)")
            }
            if identity(path) == before { return (directory, copy) }
        }
        try? FileManager.default.removeItem(atPath: directory)
        throw StoreError(.busy, "\(path) changed each of five times it was copied to be read: it is being written; "
            + "read it while the app that writes it is stopped")
    }

    /// The path as a URI's path: `%`, `?` and `#` escaped.
    static func uriEscaped(_ path: String) -> String {
        var escaped = ""
        for character in path {
            switch character {
            case "%": escaped += "%25"
            case "?": escaped += "%3f"
            case "#": escaped += "%23"
            default: escaped.append(character)
            }
        }
        return escaped
    }

    // MARK: Statements

    /// Prepares `sql`.
    func prepare(_ sql: String) throws(StoreError) -> ForeignStatement {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            throw StoreError(.corrupt, "\(path): cannot read it with \(sql): \(String(cString: sqlite3_errmsg(handle)))")
        }
        return ForeignStatement(statement, database: self, sql: sql)
    }

    /// Every row of `sql` with `values` bound, each as its values.
    func rows(_ sql: String, _ values: [Value] = []) throws(StoreError) -> [[Value]] {
        let statement = try prepare(sql)
        try statement.bind(values)
        var rows: [[Value]] = []
        while try statement.step() {
            rows.append((0..<statement.columnCount).map { statement.rawValue(at: $0) })
        }
        return rows
    }

    /// The names of the database's tables.
    func tableNames() throws(StoreError) -> [String] {
        try rows("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").compactMap {
            if case .string(let name) = $0[0] { return name } else { return nil }
        }
    }

    /// Quotes an identifier for SQL.
    static func quoted(_ name: String) -> String { "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }

    func message(_ context: String) -> String { "\(path): \(context): \(String(cString: sqlite3_errmsg(handle)))" }
}

/// A prepared statement of a ``ForeignDatabase``.
final class ForeignStatement {
    let handle: OpaquePointer
    let database: ForeignDatabase
    let sql: String

    init(_ handle: OpaquePointer, database: ForeignDatabase, sql: String) {
        self.handle = handle
        self.database = database
        self.sql = sql
    }

    deinit { sqlite3_finalize(handle) }

    var columnCount: Int32 { sqlite3_column_count(handle) }

    func bind(_ values: [Value]) throws(StoreError) {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .int(let i): rc = sqlite3_bind_int64(handle, index, i)
            case .string(let s):
                // With its length: a key may hold a NUL, where a C string would end.
                var text = s
                rc = text.withUTF8 { utf8 in
                    utf8.withMemoryRebound(to: CChar.self) { chars in
                        guard let base = chars.baseAddress else {
                            return sqlite3_bind_text(handle, index, "", 0, transientDestructor)
                        }
                        return sqlite3_bind_text(handle, index, base, Int32(chars.count), transientDestructor)
                    }
                }
            case .double(let d): rc = sqlite3_bind_double(handle, index, d)
            case .bytes(let b): rc = b.withUnsafeBytes {
                    sqlite3_bind_blob(handle, index, $0.baseAddress, Int32($0.count), transientDestructor)
                }
            case .uuid(let u): rc = withUnsafeBytes(of: u.uuid) {
                    sqlite3_bind_blob(handle, index, $0.baseAddress, 16, transientDestructor)
                }
            case .bool(let b): rc = sqlite3_bind_int64(handle, index, b ? 1 : 0)
            case .null, .date: rc = sqlite3_bind_null(handle, index)
            }
            guard rc == SQLITE_OK else { throw StoreError(.io, database.message("cannot bind a value of \(sql)")) }
        }
    }

    /// The next row; `false` after the last.
    func step() throws(StoreError) -> Bool {
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw StoreError(.corrupt, database.message("cannot read \(sql)"))
        }
    }

    /// The column's storage class: `SQLITE_INTEGER`, `_FLOAT`, `_TEXT`, `_BLOB` or `_NULL`.
    func storageClass(at column: Int32) -> Int32 { sqlite3_column_type(handle, column) }
    func int64(at column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    func double(at column: Int32) -> Double { sqlite3_column_double(handle, column) }
    func text(at column: Int32) -> String {
        guard let text = sqlite3_column_text(handle, column) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }
    func bytes(at column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let blob = sqlite3_column_blob(handle, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: blob, count: count))
    }

    /// The column as SQLite holds it: int, double, string, bytes or null.
    func rawValue(at column: Int32) -> Value {
        switch storageClass(at: column) {
        case SQLITE_INTEGER: return .int(int64(at: column))
        case SQLITE_FLOAT: return .double(double(at: column))
        case SQLITE_TEXT: return .string(text(at: column))
        case SQLITE_BLOB: return .bytes(bytes(at: column))
        default: return .null
        }
    }
}

private let transientDestructor = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
