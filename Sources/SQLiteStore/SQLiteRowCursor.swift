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
        pending = .allocate(byteCount: 11 * max(kinds.count, 1) + Self.copiedBytes, alignment: 8)
    }

    /// The part of the current row's fields that ``check()`` has not yet summed: each field as a
    /// compact record holds it (``FieldWriter``), a short text's or blob's bytes copied in, a
    /// longer one's summed where SQLite keeps them. Room for every field's tag and number or
    /// length (11 bytes at most) after ``copiedBytes``, so that it never grows.
    private let pending: UnsafeMutableRawPointer
    /// How many bytes ``pending`` holds at most after a short text or blob is copied into it
    /// (summed with the fields around it in one call); after that, each field adds 11 at most.
    static let copiedBytes = 256
    /// The longest text or blob copied.
    static let copiedField = 64

    deinit {
        pending.deallocate()
    }

    /// Whether every column of the statement's row reads as its kind says, with exactly the
    /// checks of ``SQLiteStatement/holdsValue(_:_:)`` (its storage class, a bool's 0 or 1, a text's
    /// UTF-8 and a text's or blob's length within the limits, a uuid's 16 bytes); each column's
    /// field is noted in the table as it is checked, from the same `sqlite3_value_*` calls (one
    /// call for each of the column's type, number, pointer and length): what the visit checks
    /// before it hands the row over; then the row's checksum, taken as the fields go (the CRC of
    /// the fields written as a compact record holds them, up to the last that is not null).
    func check() -> Bool {
        let fields = self.fields
        let pending = self.pending
        let handle = self.handle
        return kinds.withUnsafeBufferPointer { kinds in
            // The CRC of the fields before `pending`'s; how many bytes `pending` holds; where the
            // last field in it that is not null ends (0: none, the sum is `summed`).
            var summed: UInt32 = 0
            var (at, end) = (0, 0)
            for i in 0..<kinds.count {
                let kind = kinds[i]
                guard let value = sqlite3_column_value(handle, Int32(truncatingIfNeeded: i)) else {
                    guard kind.optional else { return false }
                    fields[i] = .null
                    at &+= FieldWriter.write(tag: .null, at: pending + at)
                    continue
                }
                let stored = sqlite3_value_type(value)
                guard stored == kind.storage else {
                    guard stored == SQLITE_NULL, kind.optional else { return false }
                    fields[i] = .null
                    at &+= FieldWriter.write(tag: .null, at: pending + at)
                    continue
                }
                switch kind.type {
                case .bool:
                    let n = sqlite3_value_int64(value)
                    guard n == 0 || n == 1 else { return false }
                    fields[i] = RowField(.bool, bits: UInt64(n))
                    at &+= FieldWriter.write(tag: n == 1 ? .trueValue : .falseValue, at: pending + at)
                    end = at
                case .int, .date:
                    let bits = UInt64(bitPattern: sqlite3_value_int64(value))
                    fields[i] = RowField(kind.type, bits: bits)
                    at &+= FieldWriter.write(kind.type == .int ? .int : .date, bits: bits, at: pending + at)
                    end = at
                case .double:
                    let bits = sqlite3_value_double(value).bitPattern
                    fields[i] = RowField(.double, bits: bits)
                    at &+= FieldWriter.write(.double, bits: bits, at: pending + at)
                    end = at
                case .string:
                    // The pointer first, then its length (SQLite's documented order).
                    guard let text = sqlite3_value_text(value) else { return false }
                    let count = Int(sqlite3_value_bytes(value))
                    let bytes = UnsafeRawBufferPointer(start: count > 0 ? UnsafeRawPointer(text) : nil, count: count)
                    guard count == 0 || count <= kind.maxBytes && UTF8Text.isValid(bytes) else { return false }
                    fields[i] = RowField(.string, bytes: bytes)
                    at &+= FieldWriter.writeHeader(.string, count: count, at: pending + at)
                    (summed, at, end) = append(bytes, summed, at)
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
                    at &+= FieldWriter.writeHeader(kind.type == .uuid ? .uuid : .bytes, count: bytes.count, at: pending + at)
                    (summed, at, end) = append(bytes, summed, at)
                }
            }
            guard sealed else { return true }
            let sum = end == 0 ? summed : ds_crc32c(summed, pending, end)
            return SQLiteStatement.sumMatches(handle, Int64(sum), column: Int32(truncatingIfNeeded: kinds.count))
        }
    }

    /// A text's or blob's bytes after its header in ``pending``: copied there when short and
    /// there is room (the row then takes one CRC call, not one per field and piece), else summed
    /// with what `pending` holds and where they are. The sum so far, and `pending`'s new count
    /// and end (``check()``).
    @inline(__always)
    private func append(_ bytes: UnsafeRawBufferPointer, _ summed: UInt32, _ at: Int) -> (UInt32, Int, Int) {
        let count = bytes.count
        guard count <= Self.copiedField, at &+ count <= Self.copiedBytes else {
            return (SQLiteRowSum.crc(summed, pending, at, then: bytes), 0, 0)
        }
        if let source = bytes.baseAddress, count > 0 { (pending + at).copyMemory(from: source, byteCount: count) }
        return (summed, at &+ count, at &+ count)
    }

    func type(at slot: Int) -> ValueType { types[slot] }

    func field(at slot: Int) -> RowField { fields[slot] }
}
