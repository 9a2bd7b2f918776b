import BenchSupport
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// The same work through postgres-nio directly, used synchronously as PostgresStore uses it
/// (each query's future waited on from the caller's thread): the same table and index as the
/// store creates, `COPY … FROM STDIN` for bulk loads, prepared statements with binds, one
/// REPEATABLE READ READ ONLY transaction per read, rows decoded into the same Swift values.
final class RawPostgresBench: @unchecked Sendable {
    static let logger = Logger(label: "bench.raw-postgres")
    let connection: PostgresConnection
    let schema: String
    let workload: Workload
    var table: String { "\"\(schema)\".\"Item\"" }

    init(host: String, schema: String, workload: Workload) throws {
        let configuration = PostgresConnection.Configuration(unixSocketPath: host + "/.s.PGSQL.5432",
                                                             username: "postgres", password: nil,
                                                             database: "datastore")
        connection = try PostgresConnection.connect(on: PostgresConnection.defaultEventLoopGroup.any(),
                                                    configuration: configuration, id: 1,
                                                    logger: Self.logger).wait()
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
            + "\"score\" bigint NOT NULL, \"ratio\" float8 NOT NULL, \"payload\" bytea NOT NULL, PRIMARY KEY (\"id\"))"
    }

    func close() {
        _ = try? query("DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE")
        try? connection.close().wait()
    }

    @discardableResult
    func query(_ sql: String, _ binds: PostgresBindings = PostgresBindings()) throws -> [PostgresRow] {
        try connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: Self.logger).wait().rows
    }

    /// Rows `start..<start+count` in COPY's text format.
    func copyText(_ start: Int, _ count: Int, into buffer: inout ByteBuffer) {
        let hex = Array("0123456789abcdef".utf8)
        for i in start..<(start + count) {
            buffer.writeString("\(i)\t\(workload.name(i))\t\(workload.score(i))\t\(workload.ratio(i))\t\\\\x")
            for byte in workload.payload(i) {
                buffer.writeInteger(hex[Int(byte >> 4)])
                buffer.writeInteger(hex[Int(byte & 15)])
            }
            buffer.writeInteger(UInt8(0x0A))
        }
    }

    /// `COPY FROM STDIN` of `count` rows, `batch` rows per transaction.
    func copyAll(from start: Int, count: Int, batch: Int) throws {
        var i = start
        while i < start + count {
            let end = min(start + count, i + batch)
            try query("BEGIN")
            try query("SET LOCAL search_path TO \"\(schema)\"")
            let connection = self.connection
            let (first, n) = (i, end - i)
            try blocking {
                try await connection.copyFrom(table: "Item", columns: ["id", "name", "score", "ratio", "payload"],
                                              logger: Self.logger) { writer in
                    var buffer = ByteBuffer()
                    var row = first
                    while row < first + n {
                        let chunk = min(first + n - row, 1_000)
                        self.copyText(row, chunk, into: &buffer)
                        row += chunk
                        try await writer.write(buffer)
                        buffer.clear()
                    }
                }
            }
            try query("COMMIT")
            i = end
        }
    }

    func binds(_ i: Int) -> PostgresBindings {
        var binds = PostgresBindings()
        binds.append(Int64(i))
        binds.append(workload.name(i))
        binds.append(workload.score(i))
        binds.append(workload.ratio(i))
        binds.append(ByteBuffer(bytes: workload.payload(i)))
        return binds
    }

    /// One INSERT per transaction.
    func smallTransactions(from start: Int) throws {
        for i in start..<(start + Workload.smallTransactions) {
            try query("BEGIN")
            try query("INSERT INTO \(table) (\"id\", \"name\", \"score\", \"ratio\", \"payload\") VALUES ($1, $2, $3, $4, $5)",
                      binds(i))
            try query("COMMIT")
        }
    }

    func row(_ row: PostgresRow) throws -> RawRow {
        let cells = row.makeRandomAccess()
        return RawRow(id: try cells[0].decode(Int64.self), name: try cells[1].decode(String.self),
                      score: try cells[2].decode(Int64.self), ratio: try cells[3].decode(Double.self),
                      payload: Array(try cells[4].decode(ByteBuffer.self).readableBytesView))
    }

    var columns: String { "SELECT \"id\", \"name\", \"score\", \"ratio\", \"payload\" FROM \(table)" }

    func snapshot<T>(_ body: () throws -> T) throws -> T {
        try query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        defer { _ = try? query("COMMIT") }
        return try body()
    }

    func pointGets(_ keys: [Int]) throws -> Int {
        try snapshot {
            try keys.reduce(0) { total, key in
                var binds = PostgresBindings()
                binds.append(Int64(key))
                return total + (try query(columns + " WHERE \"id\" = $1", binds).map(row).count)
            }
        }
    }

    func scan() throws -> Int {
        try snapshot { try query(columns + " ORDER BY \"id\"").map(row).count }
    }

    func indexedQueries() throws -> Int {
        try snapshot {
            try (0..<Workload.queriedScores).reduce(0) { total, score in
                var binds = PostgresBindings()
                binds.append(Int64(score))
                return total + (try query(columns + " WHERE \"score\" = $1 ORDER BY \"id\"", binds).map(row).count)
            }
        }
    }

    func unindexedQuery() throws -> Int {
        var binds = PostgresBindings()
        binds.append(Workload.ratioBound)
        return try snapshot { try query(columns + " WHERE \"ratio\" < $1 ORDER BY \"id\"", binds).map(row).count }
    }
}

/// Runs an async call to its end from synchronous code.
func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = BlockingResult<T>()
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        do { box.result = .success(try await body()) } catch { box.result = .failure(error) }
        done.signal()
    }
    done.wait()
    return try box.result!.get()
}

/// What a blocked-on task returned: written by the task before it signals, read after.
final class BlockingResult<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}
