internal import CChecksum
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
    /// Whether the row's checksum follows its columns (``SQLiteRowSum``).
    private let sealed: Bool
    /// The current row's fields (``check()``), one per column; their bytes are SQLite's, valid
    /// until the statement steps.
    private let fields: FieldTable
    var fieldTable: FieldTable? { fields }

    init(_ entity: EntitySchema, _ handle: OpaquePointer, plan: SQLiteRowPlan) {
        layout = entity.layout
        types = entity.attributes.map(\.type)
        entityName = entity.name
        self.handle = handle
        kinds = plan.kinds
        sealed = plan.sealed
        fields = FieldTable(count: kinds.count)
        sums = .allocate(capacity: max(kinds.count, 1))
    }

    /// The current row's fields as the row's checksum reads them (``ds_crc32c_field``: each
    /// field's tag and number, or where its bytes are in SQLite), one per column, summed in one
    /// call after the last column is checked.
    private let sums: UnsafeMutablePointer<ds_crc32c_field>

    deinit {
        sums.deallocate()
    }

    /// Whether every column of the statement's row reads as its kind says, with exactly the
    /// checks of ``SQLiteStatement/holdsValue(_:_:)`` (its storage class, a bool's 0 or 1, a text's
    /// UTF-8 and a text's or blob's length within the limits, a uuid's 16 bytes); each column's
    /// field is noted in the table as it is checked, from the same `sqlite3_value_*` calls (one
    /// call for each of the column's type, number, pointer and length): what the visit checks
    /// before it hands the row over; then the row's checksum (the CRC of the fields as a compact
    /// record holds them, up to the last that is not null), taken in one call over them.
    func check() -> Bool {
        let fields = self.fields
        let sums = self.sums
        let handle = self.handle
        return kinds.withUnsafeBufferPointer { kinds in
            // How many fields the sum takes: up to the last that is not null.
            var summed = 0
            for i in 0..<kinds.count {
                let kind = kinds[i]
                guard let value = sqlite3_column_value(handle, Int32(truncatingIfNeeded: i)) else {
                    guard kind.optional else { return false }
                    fields[i] = .null
                    sums[i] = Self.field(.null)
                    continue
                }
                let stored = sqlite3_value_type(value)
                guard stored == kind.storage else {
                    guard stored == SQLITE_NULL, kind.optional else { return false }
                    fields[i] = .null
                    sums[i] = Self.field(.null)
                    continue
                }
                switch kind.type {
                case .bool:
                    let n = sqlite3_value_int64(value)
                    guard n == 0 || n == 1 else { return false }
                    fields[i] = RowField(.bool, bits: UInt64(n))
                    sums[i] = Self.field(n == 1 ? .trueValue : .falseValue)
                case .int, .date:
                    let bits = UInt64(bitPattern: sqlite3_value_int64(value))
                    fields[i] = RowField(kind.type, bits: bits)
                    sums[i] = Self.field(kind.type == .int ? .int : .date, form: 1, bits: bits)
                case .double:
                    let bits = sqlite3_value_double(value).bitPattern
                    fields[i] = RowField(.double, bits: bits)
                    sums[i] = Self.field(.double, form: 1, bits: bits)
                case .string:
                    // The pointer first, then its length (SQLite's documented order).
                    guard let text = sqlite3_value_text(value) else { return false }
                    let count = Int(sqlite3_value_bytes(value))
                    let bytes = UnsafeRawBufferPointer(start: count > 0 ? UnsafeRawPointer(text) : nil, count: count)
                    guard count == 0 || count <= kind.maxBytes && UTF8Text.isValid(bytes) else { return false }
                    fields[i] = RowField(.string, bytes: bytes)
                    sums[i] = Self.field(.string, form: 2, bits: UInt64(count), bytes: bytes.baseAddress)
                case .bytes, .uuid:
                    let pointer = sqlite3_value_blob(value)
                    let count = Int(sqlite3_value_bytes(value))
                    if kind.type == .uuid {
                        guard count == 16, pointer != nil else { return false }
                    } else {
                        guard count == 0 || pointer != nil && count <= kind.maxBytes else { return false }
                    }
                    let bytes = UnsafeRawBufferPointer(start: count > 0 ? pointer : nil, count: pointer == nil ? 0 : count)
                    fields[i] = RowField(kind.type, bytes: bytes)
                    sums[i] = kind.type == .uuid ? Self.field(.uuid, form: 3, bytes: bytes.baseAddress)
                        : Self.field(.bytes, form: 2, bits: UInt64(bytes.count), bytes: bytes.baseAddress)
                }
                summed = i + 1
            }
            guard sealed else { return true }
            let sum = summed == 0 ? 0 : ds_crc32c_fields(0, sums, summed)
            return SQLiteStatement.sumMatches(handle, Int64(sum), column: Int32(truncatingIfNeeded: kinds.count))
        }
    }

    /// A field for the checksum (``ds_crc32c_field``): its tag, and by `form` its number (1), its
    /// length and bytes (2) or a uuid's 16 bytes (3).
    @inline(__always)
    private static func field(_ tag: FieldTag, form: UInt64 = 0, bits: UInt64 = 0,
                              bytes: UnsafeRawPointer? = nil) -> ds_crc32c_field {
        ds_crc32c_field(tag: UInt64(tag.rawValue), bits: bits, bytes: bytes, form: form)
    }

    func type(at slot: Int) -> ValueType { types[slot] }

    func field(at slot: Int) -> RowField { fields[slot] }
}
