internal import CSQLite
@_spi(Backend) import DataStoreAPI

/// A visit's row read in the statement: each column where SQLite keeps it (its page cache or
/// the statement's buffer), checked by ``check()`` before the row is
/// handed over. Nothing is built per row.
final class SQLiteRowCursor: RowCursor {
    let layout: RecordLayout
    let types: [ValueType]
    let entityName: String
    private let handle: OpaquePointer
    private let kinds: [SQLiteColumnKind]
    /// The current row's fields (``check()``), one per column; their bytes are SQLite's, valid
    /// until the statement steps.
    private let fields: FieldTable
    var fieldTable: FieldTable? { fields }

    init(_ entity: EntitySchema, _ handle: OpaquePointer, kinds: [SQLiteColumnKind]) {
        layout = entity.layout
        types = entity.attributes.map(\.type)
        entityName = entity.name
        self.handle = handle
        self.kinds = kinds
        fields = FieldTable(count: kinds.count)
    }

    /// Whether every column of the statement's row reads as its kind says
    /// (``SQLiteStatement/holdsValue(_:_:)``), checked without building a value; the row's fields
    /// are noted as it goes (`sqlite3_value_*` on each column's value, as a read of a record
    /// does): what the visit checks before it hands the row over.
    func check() -> Bool {
        kinds.withUnsafeBufferPointer { kinds in
            for i in kinds.indices {
                let cell = sqlite3_column_value(handle, Int32(i))
                guard SQLiteStatement.holdsValue(cell, kinds[i]) else { return false }
                guard let cell, sqlite3_value_type(cell) != SQLITE_NULL else {
                    fields[i] = .null
                    continue
                }
                let type = kinds[i].type
                switch type {
                case .int, .date, .bool: fields[i] = RowField(type, bits: UInt64(bitPattern: sqlite3_value_int64(cell)))
                case .double: fields[i] = RowField(.double, bits: sqlite3_value_double(cell).bitPattern)
                case .string, .bytes, .uuid:
                    // The pointer first, then its length (SQLite's documented order).
                    let pointer = type == .string ? UnsafeRawPointer(sqlite3_value_text(cell)) : sqlite3_value_blob(cell)
                    let count = Int(sqlite3_value_bytes(cell))
                    fields[i] = RowField(type, bytes: UnsafeRawBufferPointer(start: count > 0 ? pointer : nil,
                                                                            count: pointer == nil ? 0 : count))
                }
            }
            return true
        }
    }

    func type(at slot: Int) -> ValueType { types[slot] }

    func field(at slot: Int) -> RowField { fields[slot] }
}
