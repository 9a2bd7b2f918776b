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

    deinit { sqlite3_close_v2(db) }

    /// Runs `sql` (one statement or several); SQLite's result code.
    @discardableResult package func exec(_ sql: String) -> Int32 {
        sqlite3_exec(db, sql, nil, nil, nil)
    }

    package func prepare(_ sql: String) -> OpaquePointer {
        var statement: OpaquePointer?
        sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        return statement!
    }

    private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    package func insert(_ statement: OpaquePointer, _ i: Int) {
        sqlite3_reset(statement)
        sqlite3_bind_int64(statement, 1, Int64(i))
        var name = workload.name(i)
        name.withUTF8 { sqlite3_bind_text(statement, 2, UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), Int32($0.count), transient) }
        sqlite3_bind_int64(statement, 3, workload.score(i))
        sqlite3_bind_double(statement, 4, workload.ratio(i))
        workload.payload(i).withUnsafeBytes { sqlite3_bind_blob(statement, 5, $0.baseAddress, Int32($0.count), transient) }
        sqlite3_step(statement)
    }

    package static let insertSQL = "INSERT INTO \"Item\" (\"id\", \"name\", \"score\", \"ratio\", \"payload\") VALUES (?, ?, ?, ?, ?)"
    package static let columns = "SELECT \"id\", \"name\", \"score\", \"ratio\", \"payload\" FROM \"Item\""

    package func insertAll(from start: Int, count: Int, batch: Int) {
        let statement = prepare(Self.insertSQL)
        defer { sqlite3_finalize(statement) }
        var i = start
        while i < start + count {
            exec("BEGIN IMMEDIATE")
            for j in i..<min(start + count, i + batch) { insert(statement, j) }
            exec("COMMIT")
            i += batch
        }
    }

    /// Whether the row's columns hold what the table declares, checked as a C program checks a
    /// table it did not write before it reads it (SQLite keeps any type in any column of a table
    /// that is not STRICT). The store checks as much, and more: that a text is UTF-8, that a text
    /// or blob is within the store's limits.
    @inline(__always)
    package static func columnsHoldTheirTypes(_ statement: OpaquePointer) -> Bool {
        sqlite3_column_type(statement, 0) == SQLITE_INTEGER && sqlite3_column_type(statement, 1) == SQLITE_TEXT
            && sqlite3_column_type(statement, 2) == SQLITE_INTEGER && sqlite3_column_type(statement, 3) == SQLITE_FLOAT
            && sqlite3_column_type(statement, 4) == SQLITE_BLOB
    }

    package func row(_ statement: OpaquePointer) -> RawRow {
        guard Self.columnsHoldTheirTypes(statement) else { fatalError("a row of other types") }
        let nameLength = Int(sqlite3_column_bytes(statement, 1))
        let name = String(decoding: UnsafeBufferPointer(start: sqlite3_column_text(statement, 1), count: nameLength),
                          as: UTF8.self)
        let payloadLength = Int(sqlite3_column_bytes(statement, 4))
        let payload = Array(UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, 4), count: payloadLength))
        return RawRow(id: sqlite3_column_int64(statement, 0), name: name, score: sqlite3_column_int64(statement, 2),
                      ratio: sqlite3_column_double(statement, 3), payload: payload)
    }

    package func rows(_ statement: OpaquePointer) -> [RawRow] {
        var result: [RawRow] = []
        while sqlite3_step(statement) == SQLITE_ROW { result.append(row(statement)) }
        sqlite3_reset(statement)
        return result
    }

    package func read<T>(_ body: () -> T) -> T {
        exec("BEGIN")
        defer { exec("COMMIT") }
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
                guard Self.columnsHoldTheirTypes(statement) else { fatalError("a row of other types") }
                let name = UnsafeRawBufferPointer(start: sqlite3_column_text(statement, 1),
                                                  count: Int(sqlite3_column_bytes(statement, 1)))
                let payload = UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, 4),
                                                     count: Int(sqlite3_column_bytes(statement, 4)))
                total &+= RawRow.inPlaceSum(id: sqlite3_column_int64(statement, 0), score: sqlite3_column_int64(statement, 2),
                                            ratio: sqlite3_column_double(statement, 3), name: name, payload: payload)
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
        exec("BEGIN IMMEDIATE")
        for row in rows {
            sqlite3_reset(statement)
            sqlite3_bind_int64(statement, 1, row.id)
            var name = row.name
            name.withUTF8 { sqlite3_bind_text(statement, 2, UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), Int32($0.count), transient) }
            sqlite3_bind_int64(statement, 3, row.score)
            sqlite3_bind_double(statement, 4, row.ratio)
            row.payload.withUnsafeBytes { sqlite3_bind_blob(statement, 5, $0.baseAddress, Int32($0.count), transient) }
            sqlite3_step(statement)
        }
        exec("COMMIT")
    }
}
