internal import CSQLite
@_spi(Backend) import DataStoreAPI

/// A visit's row read in the statement: each column where SQLite keeps it (its page cache or
/// the statement's buffer), checked by ``SQLiteStatement/holdsRow(_:)`` before the row is
/// handed over. Nothing is built per row.
final class SQLiteRowCursor: RowCursor {
    let layout: RecordLayout
    let types: [ValueType]
    let entityName: String
    private let handle: OpaquePointer
    private let kinds: [SQLiteColumnKind]
    // `@exclusivity(unchecked)`: one visit, on one thread; `check()` sets it between rows.
    /// Bit `i` set: column `i` is null in this row (the first 64 columns; the others are asked).
    @exclusivity(unchecked) private var nulls: UInt64 = 0

    init(_ entity: EntitySchema, _ handle: OpaquePointer, kinds: [SQLiteColumnKind]) {
        layout = entity.layout
        types = entity.attributes.map(\.type)
        entityName = entity.name
        self.handle = handle
        self.kinds = kinds
    }

    /// Whether every column of the statement's row reads as its kind says
    /// (``SQLiteStatement/holdsValue(_:_:)``), checked without building a value, noting which
    /// are null: what the visit checks before it hands the row over.
    func check() -> Bool {
        var nulls: UInt64 = 0
        let complete = kinds.withUnsafeBufferPointer { kinds in
            for i in kinds.indices {
                let cell = sqlite3_column_value(handle, Int32(i))
                guard SQLiteStatement.holdsValue(cell, kinds[i]) else { return false }
                if i < 64, cell.map(sqlite3_value_type) ?? SQLITE_NULL == SQLITE_NULL { nulls |= 1 << UInt64(i) }
            }
            return true
        }
        self.nulls = nulls
        return complete
    }

    func slot(of name: String) -> Int? { layout.slot(of: name) }

    func type(at slot: Int) -> ValueType { types[slot] }

    func isNull(at slot: Int) -> Bool {
        slot < 64 ? nulls & (1 << UInt64(slot)) != 0 : sqlite3_column_type(handle, Int32(slot)) == SQLITE_NULL
    }

    func int64(at slot: Int) -> Int64 { sqlite3_column_int64(handle, Int32(slot)) }

    func double(at slot: Int) -> Double { sqlite3_column_double(handle, Int32(slot)) }

    func withBytes<R>(at slot: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let column = Int32(slot)
        // The pointer first, then its length (SQLite's documented order).
        let pointer = types[slot] == .string ? UnsafeRawPointer(sqlite3_column_text(handle, column))
            : sqlite3_column_blob(handle, column)
        let count = Int(sqlite3_column_bytes(handle, column))
        return try body(UnsafeRawBufferPointer(start: count > 0 ? pointer : nil, count: pointer == nil ? 0 : count))
    }
}
