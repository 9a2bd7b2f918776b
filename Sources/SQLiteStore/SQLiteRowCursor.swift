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

    /// Whether every column of the statement's row reads as its kind says, with exactly the
    /// checks of ``SQLiteStatement/holdsValue(_:_:)`` (its storage class, a bool's 0 or 1, a text's
    /// UTF-8 and a text's or blob's length within the limits, a uuid's 16 bytes); each column's
    /// field is noted in the table as it is checked, from the same `sqlite3_value_*` calls (one
    /// call for each of the column's type, number, pointer and length): what the visit checks
    /// before it hands the row over.
    func check() -> Bool {
        kinds.withUnsafeBufferPointer { kinds in
            for i in kinds.indices {
                let kind = kinds[i]
                guard let cell = sqlite3_column_value(handle, Int32(i)) else {
                    guard kind.optional else { return false }
                    fields[i] = .null
                    continue
                }
                let stored = sqlite3_value_type(cell)
                guard stored == kind.storage else {
                    guard stored == SQLITE_NULL, kind.optional else { return false }
                    fields[i] = .null
                    continue
                }
                switch kind.type {
                case .bool:
                    let n = sqlite3_value_int64(cell)
                    guard n == 0 || n == 1 else { return false }
                    fields[i] = RowField(.bool, bits: UInt64(n))
                case .int, .date: fields[i] = RowField(kind.type, bits: UInt64(bitPattern: sqlite3_value_int64(cell)))
                case .double: fields[i] = RowField(.double, bits: sqlite3_value_double(cell).bitPattern)
                case .string:
                    // The pointer first, then its length (SQLite's documented order).
                    guard let text = sqlite3_value_text(cell) else { return false }
                    let count = Int(sqlite3_value_bytes(cell))
                    let bytes = UnsafeRawBufferPointer(start: count > 0 ? UnsafeRawPointer(text) : nil, count: count)
                    guard count == 0 || count <= kind.maxBytes && UTF8Text.isValid(bytes) else { return false }
                    fields[i] = RowField(.string, bytes: bytes)
                case .bytes, .uuid:
                    let pointer = sqlite3_value_blob(cell)
                    let count = Int(sqlite3_value_bytes(cell))
                    if kind.type == .uuid {
                        guard count == 16, pointer != nil else { return false }
                    } else {
                        guard count == 0 || pointer != nil && count <= kind.maxBytes else { return false }
                    }
                    fields[i] = RowField(kind.type, bytes: UnsafeRawBufferPointer(start: count > 0 ? pointer : nil,
                                                                                 count: pointer == nil ? 0 : count))
                }
            }
            return true
        }
    }

    func type(at slot: Int) -> ValueType { types[slot] }

    func field(at slot: Int) -> RowField { fields[slot] }
}
