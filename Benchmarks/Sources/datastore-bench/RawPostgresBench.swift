import BenchSupport
import Foundation
import RawLibpq

/// The same work through libpq called from C (`Sources/RawLibpq`): the same table and index as
/// the store creates (its rows' checksum column `_ds_sum` included, written and read as the store
/// writes and reads it, though the raw side computes and checks no checksum: it writes the key
/// there), binary parameters and results, `COPY … FROM STDIN` for bulk loads, one
/// REPEATABLE READ READ ONLY transaction per read, small transactions as `BEGIN; INSERT;
/// COMMIT` with each statement waited for (three round trips) or pipelined (one).
final class RawPostgresBench {
    let connection: OpaquePointer
    let schema: String
    let workload: Workload
    var table: String { "\"\(schema)\".\"Item\"" }

    init(host: String, schema: String, workload: Workload) throws {
        guard let made = raw_pg_connect("host=\(host) user=postgres dbname=datastore") else {
            throw BenchError("raw libpq cannot connect to \(host)")
        }
        connection = made
        self.schema = schema
        self.workload = workload
        try query("DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE")
        try query("CREATE SCHEMA \"\(schema)\"")
        try query(Self.ddl(schema))
        try query("CREATE INDEX \"Item.byScore\" ON \(table) ((\"score\"))")
    }

    /// DDL identical to what PostgresStore creates for ``Workload/schema``.
    static func ddl(_ schema: String) -> String {
        "CREATE TABLE \"\(schema)\".\"Item\" (\"id\" bigint NOT NULL, \"name\" text COLLATE \"C\" NOT NULL, "
            + "\"score\" bigint NOT NULL, \"ratio\" float8 NOT NULL, \"payload\" bytea NOT NULL, \"_ds_sum\" bigint, "
            + "PRIMARY KEY (\"id\"))"
    }

    func close() {
        _ = try? query("DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE")
        raw_pg_close(connection)
    }

    func query(_ sql: String) throws {
        guard raw_pg_exec(connection, sql) == 0 else { throw BenchError("raw libpq: \(sql) failed") }
    }

    /// Rows `start..<start+count` in COPY's text format.
    func copyText(_ start: Int, _ count: Int, into buffer: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        for i in start..<(start + count) {
            buffer += "\(i)\t\(workload.name(i))\t\(workload.score(i))\t\(workload.ratio(i))\t\\\\x".utf8
            for byte in workload.payload(i) {
                buffer.append(hex[Int(byte >> 4)])
                buffer.append(hex[Int(byte & 15)])
            }
            buffer += "\t\(i)\n".utf8
        }
    }

    /// `COPY FROM STDIN` of `count` rows, `batch` rows per transaction.
    func copyAll(from start: Int, count: Int, batch: Int) throws {
        var i = start
        var text: [UInt8] = []
        while i < start + count {
            let end = min(start + count, i + batch)
            text.removeAll(keepingCapacity: true)
            copyText(i, end - i, into: &text)
            let sql = "COPY \(table) (\"id\", \"name\", \"score\", \"ratio\", \"payload\", \"_ds_sum\") FROM STDIN"
            guard raw_pg_copy(connection, sql, text, text.count) == 0 else { throw BenchError("raw COPY failed") }
            i = end
        }
    }

    /// One INSERT per transaction: `BEGIN`, `INSERT`, `COMMIT`, each waited for, or pipelined.
    func smallTransactions(from start: Int, count: Int = Workload.smallTransactions, pipelined: Bool = false) throws {
        let names = (start..<(start + count)).map { Array(workload.name($0).utf8) }
        let payloads = (start..<(start + count)).map { workload.payload($0) }
        let scores = (start..<(start + count)).map { workload.score($0) }
        let ratios = (start..<(start + count)).map { workload.ratio($0) }
        let sql = "INSERT INTO \(table) (\"id\", \"name\", \"score\", \"ratio\", \"payload\", \"_ds_sum\") "
            + "VALUES ($1, $2, $3, $4, $5, $1)"
        let status = withPointers(names) { namePointers in
            withPointers(payloads) { payloadPointers in
                raw_pg_small_transactions(connection, sql, Int64(start), Int64(count), pipelined ? 1 : 0,
                                          namePointers, names.map(\.count), scores, ratios,
                                          payloadPointers, payloads.map(\.count))
            }
        }
        guard status == 0 else { throw BenchError("raw small transactions failed") }
    }

    var columns: String { "SELECT \"id\", \"name\", \"score\", \"ratio\", \"payload\", \"_ds_sum\" FROM \(table)" }

    func pointGets(_ keys: [Int]) throws -> Int {
        let rows = raw_pg_point_gets(connection, columns + " WHERE \"id\" = $1", keys.map(Int64.init), Int64(keys.count))
        guard rows >= 0 else { throw BenchError("raw point gets failed") }
        return Int(rows)
    }

    private func select(_ sql: String, kind: Int32 = 0, first: Int64 = 0, value: Double = 0, repeat: Int64 = 1) throws
        -> Int
    {
        let rows = raw_pg_select(connection, sql, kind, first, value, `repeat`)
        guard rows >= 0 else { throw BenchError("raw select failed: \(sql)") }
        return Int(rows)
    }

    func scan() throws -> Int { try select(columns + " ORDER BY \"id\"") }

    func indexedQueries() throws -> Int {
        try select(columns + " WHERE \"score\" = $1 ORDER BY \"id\"", kind: 1, first: 0,
                   repeat: Int64(Workload.queriedScores))
    }

    func unindexedQuery() throws -> Int {
        try select(columns + " WHERE \"ratio\" < $1 ORDER BY \"id\"", kind: 2, value: Workload.ratioBound)
    }

    /// The rows of the table.
    func count() throws -> Int { try select("SELECT 1 FROM \(table)") }
}

/// Stable pointers to each array's bytes for the length of `body`.
private func withPointers<R>(_ arrays: [[UInt8]], _ body: ([UnsafePointer<UInt8>?]) -> R) -> R {
    let buffers = arrays.map { array -> UnsafeMutableBufferPointer<UInt8> in
        let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(1, array.count))
        _ = buffer.initialize(from: array)
        return buffer
    }
    defer { for buffer in buffers { buffer.deallocate() } }
    return body(buffers.map { UnsafePointer($0.baseAddress) })
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
