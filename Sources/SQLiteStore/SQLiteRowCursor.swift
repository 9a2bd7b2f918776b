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
    }

    /// The current row's fields as a compact record holds them, written by ``check()`` as it
    /// notes each (for the row's checksum), and how many bytes it has room for.
    @exclusivity(unchecked) private var written = UnsafeMutableRawPointer.allocate(byteCount: 256, alignment: 8)
    @exclusivity(unchecked) private var room = 256

    deinit {
        written.deallocate()
    }

    /// Room for `count` more bytes after the first `used`.
    @inline(__always)
    private func reserve(_ count: Int, after used: Int) {
        guard used + count > room else { return }
        let larger = UnsafeMutableRawPointer.allocate(byteCount: max(2 * room, used + count), alignment: 8)
        larger.copyMemory(from: written, byteCount: used)
        written.deallocate()
        (written, room) = (larger, max(2 * room, used + count))
    }

    /// Whether every column of the statement's row reads as its kind says, with exactly the
    /// checks of ``SQLiteStatement/holdsValue(_:_:)`` (its storage class, a bool's 0 or 1, a text's
    /// UTF-8 and a text's or blob's length within the limits, a uuid's 16 bytes); each column's
    /// field is noted in the table as it is checked, from the same `sqlite3_value_*` calls (one
    /// call for each of the column's type, number, pointer and length): what the visit checks
    /// before it hands the row over; then the row's checksum.
    func check() -> Bool {
        kinds.withUnsafeBufferPointer { kinds in
            // Where the fields written so far end, and where the last that is not null ends.
            var (at, end) = (0, 0)
            for i in kinds.indices {
                let kind = kinds[i]
                guard let cell = sqlite3_column_value(handle, Int32(i)) else {
                    guard kind.optional else { return false }
                    fields[i] = .null
                    reserve(1, after: at)
                    at += FieldWriter.write(tag: .null, at: written + at)
                    continue
                }
                let stored = sqlite3_value_type(cell)
                guard stored == kind.storage else {
                    guard stored == SQLITE_NULL, kind.optional else { return false }
                    fields[i] = .null
                    reserve(1, after: at)
                    at += FieldWriter.write(tag: .null, at: written + at)
                    continue
                }
                switch kind.type {
                case .bool:
                    let n = sqlite3_value_int64(cell)
                    guard n == 0 || n == 1 else { return false }
                    fields[i] = RowField(.bool, bits: UInt64(n))
                    reserve(1, after: at)
                    at += FieldWriter.write(tag: n == 1 ? .trueValue : .falseValue, at: written + at)
                case .int, .date:
                    let bits = UInt64(bitPattern: sqlite3_value_int64(cell))
                    fields[i] = RowField(kind.type, bits: bits)
                    reserve(FieldWriter.numberSize, after: at)
                    at += FieldWriter.write(kind.type == .int ? .int : .date, bits: bits, at: written + at)
                case .double:
                    let bits = sqlite3_value_double(cell).bitPattern
                    fields[i] = RowField(.double, bits: bits)
                    reserve(FieldWriter.numberSize, after: at)
                    at += FieldWriter.write(.double, bits: bits, at: written + at)
                case .string:
                    // The pointer first, then its length (SQLite's documented order).
                    guard let text = sqlite3_value_text(cell) else { return false }
                    let count = Int(sqlite3_value_bytes(cell))
                    let bytes = UnsafeRawBufferPointer(start: count > 0 ? UnsafeRawPointer(text) : nil, count: count)
                    guard count == 0 || count <= kind.maxBytes && UTF8Text.isValid(bytes) else { return false }
                    fields[i] = RowField(.string, bytes: bytes)
                    reserve(FieldWriter.size(ofBytes: count), after: at)
                    at += FieldWriter.write(.string, bytes: bytes, at: written + at)
                case .bytes, .uuid:
                    let pointer = sqlite3_value_blob(cell)
                    let count = Int(sqlite3_value_bytes(cell))
                    if kind.type == .uuid {
                        guard count == 16, pointer != nil else { return false }
                    } else {
                        guard count == 0 || pointer != nil && count <= kind.maxBytes else { return false }
                    }
                    let bytes = UnsafeRawBufferPointer(start: count > 0 ? pointer : nil, count: pointer == nil ? 0 : count)
                    fields[i] = RowField(kind.type, bytes: bytes)
                    reserve(FieldWriter.size(ofBytes: count), after: at)
                    at += FieldWriter.write(kind.type == .uuid ? .uuid : .bytes, bytes: bytes, at: written + at)
                }
                end = at
            }
            return !sealed || SQLiteStatement.sumMatches(handle, SQLiteRowSum.sum(written, end), column: Int32(kinds.count))
        }
    }

    func type(at slot: Int) -> ValueType { types[slot] }

    func field(at slot: Int) -> RowField { fields[slot] }
}
