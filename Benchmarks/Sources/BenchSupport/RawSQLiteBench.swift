import Foundation
import RawSQLite

/// The same work through the SQLite C API: prepared statements, WAL, synchronous=NORMAL.
package final class RawSQLiteBench {
    package let db: OpaquePointer
    package let workload: Workload

    package init(path: String, workload: Workload) {
        var handle: OpaquePointer?
        sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        db = handle!
        self.workload = workload
        exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
        exec(Workload.sqliteDDL)
    }

    deinit {
        for statement in [beginWrite, beginRead, commit].compactMap({ $0 }) { sqlite3_finalize(statement) }
        sqlite3_close_v2(db)
    }

    /// `BEGIN IMMEDIATE`, `BEGIN` and `COMMIT`, prepared once (as the store prepares them):
    /// `sqlite3_exec` parsed and prepared them again for every transaction, about 6,200
    /// instructions a one-insert transaction (callgrind, `profile-store raw-sqlite small`).
    private var beginWrite: OpaquePointer?, beginRead: OpaquePointer?, commit: OpaquePointer?

    private func step(_ statement: inout OpaquePointer?, _ sql: String) {
        if statement == nil { statement = prepare(sql) }
        sqlite3_step(statement)
        sqlite3_reset(statement)
    }

    package func begin(write: Bool = true) {
        write ? step(&beginWrite, "BEGIN IMMEDIATE") : step(&beginRead, "BEGIN")
    }

    package func commitTransaction() { step(&commit, "COMMIT") }

    /// Runs `sql` (one statement or several); SQLite's result code.
    @discardableResult package func exec(_ sql: String) -> Int32 {
        sqlite3_exec(db, sql, nil, nil, nil)
    }

    package func prepare(_ sql: String) -> OpaquePointer {
        var statement: OpaquePointer?
        sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        return statement!
    }

    package func insert(_ statement: OpaquePointer, _ i: Int) {
        sqlite3_reset(statement)
        bindAndStep(statement, id: Int64(i), name: workload.name(i), score: workload.score(i), ratio: workload.ratio(i),
                    payload: workload.payload(i))
    }

    /// Binds a row's values and its checksum (``RawRowSum``) to the insert, and steps it. The text
    /// and the blob are bound `SQLITE_STATIC` (a null destructor), as the store binds them: they
    /// stay where they are until the step is over. Until 6 December 2026 (evening) they were bound
    /// `SQLITE_TRANSIENT`, and SQLite copied both into memory of its own for every row.
    @inline(__always)
    private func bindAndStep(_ statement: OpaquePointer, id: Int64, name: String, score: Int64, ratio: Double,
                             payload: [UInt8]) {
        var name = name
        name.withUTF8 { name in
            payload.withUnsafeBytes { payload in
                sqlite3_bind_int64(statement, 1, id)
                sqlite3_bind_text(statement, 2, UnsafeRawPointer(name.baseAddress!).assumingMemoryBound(to: CChar.self),
                                  Int32(name.count), nil)
                sqlite3_bind_int64(statement, 3, score)
                sqlite3_bind_double(statement, 4, ratio)
                sqlite3_bind_blob(statement, 5, payload.baseAddress, Int32(payload.count), nil)
                let sum = RawRowSum.of(id: id, name: UnsafeRawBufferPointer(name), score: score, ratio: ratio, payload: payload)
                sqlite3_bind_int64(statement, 6, Int64(sum))
                sqlite3_step(statement)
            }
        }
    }

    package static let insertSQL =
        "INSERT INTO \"Item\" (\"id\", \"name\", \"score\", \"ratio\", \"payload\", \"_ds_sum\") VALUES (?, ?, ?, ?, ?, ?)"
    package static let columns = "SELECT \"id\", \"name\", \"score\", \"ratio\", \"payload\", \"_ds_sum\" FROM \"Item\""

    package func insertAll(from start: Int, count: Int, batch: Int) {
        let statement = prepare(Self.insertSQL)
        defer { sqlite3_finalize(statement) }
        var i = start
        while i < start + count {
            begin()
            for j in i..<min(start + count, i + batch) { insert(statement, j) }
            commitTransaction()
            i += batch
        }
    }

    /// The store's change feed table, as the store makes it at its first recorded commit.
    package static let feedDDL =
        "CREATE TABLE IF NOT EXISTS _ds_feed (seq INTEGER PRIMARY KEY, entry BLOB NOT NULL)"

    /// One-insert transactions that each also append to the feed table the entry the store's
    /// change feed writes for such a transaction (``RawFeedEntry``), as a C program keeping the
    /// same log would: the work of the store's small writes with the feed on, done in C.
    package func insertAllWithFeed(from start: Int, count: Int) {
        exec(Self.feedDDL)
        let statement = prepare(Self.insertSQL)
        let append = prepare("INSERT INTO _ds_feed (seq, entry) VALUES (?, ?)")
        defer {
            sqlite3_finalize(statement)
            sqlite3_finalize(append)
        }
        var entry = RawFeedEntry()
        var sequence = lastFeedSequence()
        for i in start..<(start + count) {
            begin()
            insert(statement, i)
            sequence += 1
            entry.withInsertOf(Int64(i), entity: WorkloadItem.entityName) { bytes in
                sqlite3_reset(append)
                sqlite3_bind_int64(append, 1, sequence)
                sqlite3_bind_blob(append, 2, bytes.baseAddress, Int32(bytes.count), nil)
                let rc = sqlite3_step(append)
                precondition(rc == SQLITE_DONE, "the raw side's feed entry \(sequence) was not stored "
                    + "(\(rc))")
            }
            commitTransaction()
        }
    }

    /// The current row's fields, checked as a C program checks a table it did not write before
    /// it reads it: each column's type (SQLite keeps any type in any column of a table that is
    /// not STRICT), and the row's checksum against its values (the layout's own check against a
    /// value damaged on the disk; a row without one, which another program wrote, is read
    /// unchecked, as the store reads it); `nil` when a check fails. The store checks as much, and
    /// more: that a text is UTF-8, that a text or blob is within the store's limits.
    @inline(__always)
    package static func fields(_ statement: OpaquePointer) -> RawFields? {
        guard sqlite3_column_type(statement, 0) == SQLITE_INTEGER && sqlite3_column_type(statement, 1) == SQLITE_TEXT
            && sqlite3_column_type(statement, 2) == SQLITE_INTEGER && sqlite3_column_type(statement, 3) == SQLITE_FLOAT
            && sqlite3_column_type(statement, 4) == SQLITE_BLOB else { return nil }
        let name = UnsafeRawBufferPointer(start: sqlite3_column_text(statement, 1),
                                          count: Int(sqlite3_column_bytes(statement, 1)))
        let payload = UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, 4),
                                             count: Int(sqlite3_column_bytes(statement, 4)))
        let fields = RawFields(id: sqlite3_column_int64(statement, 0), name: name,
                                         score: sqlite3_column_int64(statement, 2),
                                         ratio: sqlite3_column_double(statement, 3), payload: payload)
        switch sqlite3_column_type(statement, 5) {
        case SQLITE_INTEGER:
            let sum = RawRowSum.of(id: fields.id, name: name, score: fields.score, ratio: fields.ratio, payload: payload)
            return sqlite3_column_int64(statement, 5) == Int64(sum) ? fields : nil
        case SQLITE_NULL: return fields
        default: return nil
        }
    }

    package func row(_ statement: OpaquePointer) -> RawRow {
        guard let fields = Self.fields(statement) else { fatalError("a damaged row") }
        return RawRow(id: fields.id, name: String(decoding: fields.name, as: UTF8.self), score: fields.score,
                      ratio: fields.ratio, payload: Array(fields.payload))
    }

    package func rows(_ statement: OpaquePointer) -> [RawRow] {
        var result: [RawRow] = []
        while sqlite3_step(statement) == SQLITE_ROW { result.append(row(statement)) }
        sqlite3_reset(statement)
        return result
    }

    package func read<T>(_ body: () -> T) -> T {
        begin(write: false)
        defer { commitTransaction() }
        return body()
    }

    package func pointGets(_ keys: [Int]) -> Int {
        rowsFound(Self.columns + " WHERE \"id\" = ?", for: keys.lazy.map(Int64.init))
    }

    /// The rows `sql` returns for each value of its one parameter, all read in one transaction.
    private func rowsFound(_ sql: String, for values: some Sequence<Int64>) -> Int {
        let statement = prepare(sql)
        defer { sqlite3_finalize(statement) }
        return read {
            var found = 0
            for value in values {
                sqlite3_bind_int64(statement, 1, value)
                found += rows(statement).count
            }
            return found
        }
    }

    package func scan() -> Int {
        let statement = prepare(Self.columns + " ORDER BY \"id\"")
        defer { sqlite3_finalize(statement) }
        return read { rows(statement).count }
    }

    /// Every row in key order, each decoded and handed on, none kept.
    package func visit() -> Int {
        let statement = prepare(Self.columns + " ORDER BY \"id\"")
        defer { sqlite3_finalize(statement) }
        return read {
            var count = 0
            while sqlite3_step(statement) == SQLITE_ROW {
                consume(row(statement))
                count += 1
            }
            sqlite3_reset(statement)
            return count
        }
    }

    /// Every row in key order, its columns read in the statement and nothing built.
    package func visitInPlace() -> Int64 {
        let statement = prepare(Self.columns + " ORDER BY \"id\"")
        defer { sqlite3_finalize(statement) }
        return read {
            var total: Int64 = 0
            while sqlite3_step(statement) == SQLITE_ROW {
                guard let row = Self.fields(statement) else { fatalError("a damaged row") }
                total &+= RawRow.inPlaceSum(id: row.id, score: row.score, ratio: row.ratio, name: row.name,
                                            payload: row.payload)
            }
            sqlite3_reset(statement)
            return total
        }
    }

    package func indexedQueries() -> Int {
        rowsFound(Self.columns + " WHERE \"score\" = ? ORDER BY \"id\"", for: (0..<Workload.queriedScores).lazy.map(Int64.init))
    }

    package func unindexedQuery() -> Int {
        let statement = prepare(Self.columns + " WHERE \"ratio\" < ? ORDER BY \"id\"")
        defer { sqlite3_finalize(statement) }
        sqlite3_bind_double(statement, 1, Workload.ratioBound)
        return read { rows(statement).count }
    }

    /// Whether item `id` is stored here as the store at `path` stores it: every column, the
    /// row's checksum included, the same (that the raw side writes, and so reads, the store's
    /// layout).
    package func sameLayout(asStoreAt path: String, id: Int64) -> Bool {
        var other: OpaquePointer?
        defer { sqlite3_close_v2(other) }
        guard sqlite3_open_v2(path, &other, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else { return false }
        func row(_ db: OpaquePointer?) -> [String]? {
            var statement: OpaquePointer?
            guard sqlite3_prepare_v2(db, Self.columns + " WHERE \"id\" = ?", -1, &statement, nil) == SQLITE_OK else { return nil }
            defer { sqlite3_finalize(statement) }
            sqlite3_bind_int64(statement, 1, id)
            guard sqlite3_step(statement) == SQLITE_ROW else { return nil }
            return (Int32(0)..<6).map { column in
                let bytes = UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, column),
                                                   count: Int(sqlite3_column_bytes(statement, column)))
                return "\(sqlite3_column_type(statement, column)):\(Array(bytes))"
            }
        }
        let mine = row(db)
        return mine != nil && mine == row(other)
    }

    /// The feed table's last sequence number, 0 when it is empty.
    private func lastFeedSequence() -> Int64 {
        var statement: OpaquePointer?
        sqlite3_prepare_v2(db, "SELECT coalesce(max(seq), 0) FROM _ds_feed", -1, &statement, nil)
        defer { sqlite3_finalize(statement) }
        return sqlite3_step(statement) == SQLITE_ROW ? sqlite3_column_int64(statement, 0) : 0
    }

    /// Whether the last entry of the feed table here is laid out as the last one of the store at
    /// `path` (closed): the same bytes but for the commit's time (bytes 1 to 8) and the checksum
    /// (the last four, which cover the time), and on each side a checksum that is the CRC-32C of
    /// the bytes before it.
    package func sameLastFeedEntry(asStoreAt path: String) -> Bool {
        var other: OpaquePointer?
        defer { sqlite3_close_v2(other) }
        guard sqlite3_open_v2(path, &other, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else { return false }
        func entry(_ db: OpaquePointer?) -> [UInt8]? {
            var statement: OpaquePointer?
            let sql = "SELECT entry FROM _ds_feed ORDER BY seq DESC LIMIT 1"
            guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else { return nil }
            defer { sqlite3_finalize(statement) }
            guard sqlite3_step(statement) == SQLITE_ROW else { return nil }
            let bytes = UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, 0),
                                               count: Int(sqlite3_column_bytes(statement, 0)))
            guard bytes.count > 13 else { return nil }
            let end = bytes.count - 4
            let stored = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: end, as: UInt32.self))
            guard RawRowSum.of(UnsafeRawBufferPointer(rebasing: bytes[..<end])) == stored else { return nil }
            return [bytes[0]] + bytes[9..<end]
        }
        let mine = entry(db)
        return mine != nil && mine == entry(other)
    }

    /// Reads every row in key order (the read side of a raw copy).
    package func forEachRow(batch: Int, _ body: ([RawRow]) -> Void) {
        let statement = prepare(Self.columns + " ORDER BY \"id\"")
        defer { sqlite3_finalize(statement) }
        read {
            var page: [RawRow] = []
            while sqlite3_step(statement) == SQLITE_ROW {
                page.append(row(statement))
                if page.count == batch {
                    body(page)
                    page.removeAll(keepingCapacity: true)
                }
            }
            if !page.isEmpty { body(page) }
        }
    }

    /// Writes rows in one transaction per call (the write side of a raw copy).
    package func write(_ rows: [RawRow]) {
        let statement = prepare(Self.insertSQL)
        defer { sqlite3_finalize(statement) }
        begin()
        for row in rows {
            sqlite3_reset(statement)
            bindAndStep(statement, id: row.id, name: row.name, score: row.score, ratio: row.ratio, payload: row.payload)
        }
        commitTransaction()
    }
}
