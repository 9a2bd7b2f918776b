import CSQLite
import Foundation

/// A SQLite database a test fixture writes through the C API, as another program would.
public final class FixtureDatabase {
    let handle: OpaquePointer
    private var isOpen = true

    public init(_ path: String) throws {
        var db: OpaquePointer?
        guard sqlite3_open(path, &db) == SQLITE_OK, let db else {
            sqlite3_close(db)
            throw FixtureError("cannot open \(path)")
        }
        handle = db
    }

    deinit { close() }

    public func close() {
        guard isOpen else { return }
        sqlite3_close(handle)
        isOpen = false
    }

    public func exec(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(handle, sql, nil, nil, &message) == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? "?"
            sqlite3_free(message)
            throw FixtureError("\(text): \(sql)")
        }
    }

    /// Runs `sql` once with `values` bound: Int, Double, String (with its length, NULs kept),
    /// [UInt8], anything else null.
    public func insert(_ sql: String, _ values: [Any?]) throws {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK else {
            throw FixtureError(String(cString: sqlite3_errmsg(handle)) + ": " + sql)
        }
        defer { sqlite3_finalize(statement) }
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            switch value {
            case let v as Int: sqlite3_bind_int64(statement, index, Int64(v))
            case let v as Double: sqlite3_bind_double(statement, index, v)
            case let v as String:
                let bytes = Array(v.utf8)
                _ = bytes.withUnsafeBufferPointer { buffer in
                    buffer.withMemoryRebound(to: CChar.self) {
                        sqlite3_bind_text(statement, index, $0.baseAddress, Int32($0.count), transient)
                    }
                }
            case let v as [UInt8]: _ = v.withUnsafeBytes {
                    sqlite3_bind_blob(statement, index, $0.baseAddress, Int32($0.count), transient)
                }
            default: sqlite3_bind_null(statement, index)
            }
        }
        guard sqlite3_step(statement) == SQLITE_DONE else {
            throw FixtureError(String(cString: sqlite3_errmsg(handle)) + ": " + sql)
        }
    }
}
