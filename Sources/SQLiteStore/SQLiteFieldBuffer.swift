internal import CSQLite
@_spi(Backend) import DataStoreAPI

/// A model's values as the model hands them over (``RowCodable/writeStoredFields(to:)``),
/// written one after another as a compact record's fields (``FieldWriter``: a tag and payload
/// each) into a buffer its insert plan keeps from one insert to the next. Each call only writes
/// its field; ``bind(_:kinds:keySlot:summed:)`` then checks every field against its attribute,
/// binds it (a text's or blob's bytes where they are in the buffer) and binds the row's sum,
/// taken in one call over the fields as they were written, which are the sum's input
/// (``SQLiteRowSum``).
///
/// Binding after the model's code has run, not as each value comes, leaves the statement as it
/// was while that code runs, and takes each text's or blob's bytes once (into the buffer)
/// where binding as they came copied them for SQLite and again for the sum.
struct SQLiteFieldBuffer: StoredFieldSink {
    /// The buffer: `capacity` bytes, of which `used` are fields.
    private(set) var base: UnsafeMutableRawPointer
    private(set) var capacity: Int
    private(set) var used = 0
    /// How many fields were written.
    private(set) var count = 0
    /// Where the last field that is not null ends: the row's sum is of the bytes before
    /// (``SQLiteRowSum``: trailing nulls are left out).
    private(set) var end = 0
    let keySlot: Int
    /// The key's value when it is not an int (an int key is read back from its field): a
    /// string's as the model gave it, not made again from its bytes.
    private var otherKey = Value.null
    /// Whether a text or blob was past ``Limits/maxValueBytes``: not copied into the buffer, and
    /// the insert goes the record's way, which refuses it.
    private(set) var oversized = false

    /// The first buffer's bytes: a row of a few short fields fits.
    static let initialCapacity = 256
    /// A buffer grown past this (a row with long texts or blobs) is let go after its insert.
    static let keptCapacity = 64 * 1024

    /// Fields written into `base` (`capacity` bytes, from `allocate(capacity:)`), which the
    /// buffer may replace with a larger one (``base`` is then the one to keep and free).
    init(base: UnsafeMutableRawPointer, capacity: Int, keySlot: Int) {
        (self.base, self.capacity, self.keySlot) = (base, capacity, keySlot)
    }

    static func allocate(capacity: Int) -> UnsafeMutableRawPointer {
        .allocate(byteCount: capacity, alignment: 8)
    }

    mutating func append(_ value: Value) throws {
        if count == keySlot { otherKey = value }
        switch value {
        case .null: writeTag(.null)
        case .bool(let b):
            writeTag(b ? .trueValue : .falseValue)
            end = used
        case .int(let i): writeNumber(.int, bits: UInt64(bitPattern: i))
        case .double(let d): writeNumber(.double, bits: d.bitPattern)
        case .date(let t): writeNumber(.date, bits: UInt64(bitPattern: t.microsecondsSinceEpoch))
        case .string(let s): writeText(s)
        case .bytes(let b):
            reserve(FieldWriter.size(ofBytes: b.count))
            let at = base + used
            used += b.withUnsafeBytes { FieldWriter.write(.bytes, bytes: $0, at: at) }
            end = used
        case .uuid(let u):
            reserve(17)
            let at = base + used
            used += withUnsafeBytes(of: u.uuid) { FieldWriter.write(.uuid, bytes: $0, at: at) }
            end = used
        }
        count += 1
    }

    mutating func appendInt(_ value: Int64) throws {
        writeNumber(.int, bits: UInt64(bitPattern: value))
        count += 1
    }

    mutating func appendDouble(_ value: Double) throws {
        writeNumber(.double, bits: value.bitPattern)
        count += 1
    }

    mutating func appendBytes(_ bytes: UnsafeRawBufferPointer) throws {
        write(.bytes, bytes)
        if count == keySlot { otherKey = .bytes(Array(bytes)) }
        count += 1
    }

    mutating func appendString(_ value: String) throws {
        writeText(value)
        if count == keySlot { otherKey = .string(value) }
        count += 1
    }

    /// Writes a text's field (``write(_:_:)``) from a string's UTF-8.
    @inline(__always)
    private mutating func writeText(_ value: String) {
        let count = value.utf8.count
        guard count <= Limits.maxValueBytes else {
            oversized = true
            return
        }
        reserve(FieldWriter.size(ofBytes: count))
        let at = base + used
        let header = FieldWriter.writeHeader(.string, count: count, at: at)
        // A native string's bytes copied from where they are; another's copied one by one.
        let copied: Void? = value.utf8.withContiguousStorageIfAvailable { source in
            if let start = source.baseAddress, count > 0 { (at + header).copyMemory(from: start, byteCount: count) }
        }
        if copied == nil {
            _ = UnsafeMutableRawBufferPointer(start: at + header, count: count).initializeMemory(as: UInt8.self, from: value.utf8)
        }
        used += header + count
        end = used
    }

    /// Writes a field that is its tag alone (a null, which leaves ``end`` where it was, or a bool).
    @inline(__always)
    private mutating func writeTag(_ tag: FieldTag) {
        reserve(1)
        used += FieldWriter.write(tag: tag, at: base + used)
    }

    /// Writes a number's field: its tag and 8 bytes.
    @inline(__always)
    private mutating func writeNumber(_ tag: FieldTag, bits: UInt64) {
        reserve(FieldWriter.numberSize)
        used += FieldWriter.write(tag, bits: bits, at: base + used)
        end = used
    }

    /// Writes a text's or blob's field: its tag, LEB128 length and bytes.
    @inline(__always)
    private mutating func write(_ tag: FieldTag, _ bytes: UnsafeRawBufferPointer) {
        guard bytes.count <= Limits.maxValueBytes else {
            oversized = true
            return
        }
        reserve(FieldWriter.size(ofBytes: bytes.count))
        let at = base + used
        let header = FieldWriter.writeHeader(tag, count: bytes.count, at: at)
        if let source = bytes.baseAddress, bytes.count > 0 { (at + header).copyMemory(from: source, byteCount: bytes.count) }
        used += header + bytes.count
        end = used
    }

    /// The row's sum (``SQLiteRowSum``) of the fields written.
    var sum: Int64 { SQLiteRowSum.sum(base, end) }

    @inline(__always)
    private mutating func reserve(_ size: Int) {
        if capacity - used < size { grow(to: used + size) }
    }

    /// Moves the fields into a buffer of at least `size` bytes. The statement's parameters may
    /// still point into the old one, from the row bound before: the statement is not stepped
    /// again before ``bind(_:kinds:keySlot:summed:)`` binds every parameter anew.
    @inline(never)
    private mutating func grow(to size: Int) {
        let larger = Self.allocate(capacity: max(size, 2 * capacity))
        larger.copyMemory(from: base, byteCount: used)
        base.deallocate()
        (base, capacity) = (larger, max(size, 2 * capacity))
    }

    /// Checks each field against its attribute's kind as ``Value/isStoredAsIs(by:optional:isKey:)``
    /// checks a record's value (its type, null only where optional, a double that is a number,
    /// a text or blob within its limit, a text key within the key's), binds it to its parameter
    /// (a text's or blob's bytes, and a uuid's, where they are in the buffer, which must not
    /// change until the statement has stepped) and, when `summed`, binds the row's sum after
    /// them: the key's value, or `nil` when a field is not one the attribute holds as it is
    /// (nothing is left bound; the insert goes the record's way, which converts it or names it).
    /// - Throws: the statement's error for a parameter SQLite refused (nothing is left bound).
    func bind(_ statement: SQLiteStatement, kinds: UnsafeBufferPointer<SQLiteColumnKind>, keySlot: Int,
              summed: Bool) throws -> Value? {
        let handle = statement.handle
        if sqlite3_stmt_busy(handle) != 0 { sqlite3_reset(handle) }
        guard count == kinds.count, !oversized else { return unbound(handle) }
        var at = 0
        var intKey: Int64?
        for i in 0..<kinds.count {
            let kind = kinds[i]
            let field = UnsafeRawPointer(base + at)
            let index = Int32(i + 1)
            let rc: Int32
            switch field.load(as: UInt8.self) {
            case FieldTag.null.rawValue:
                guard kind.optional else { return unbound(handle) }
                rc = sqlite3_bind_null(handle, index)
                at += 1
            case FieldTag.falseValue.rawValue, FieldTag.trueValue.rawValue:
                guard kind.type == .bool else { return unbound(handle) }
                rc = sqlite3_bind_int64(handle, index, field.load(as: UInt8.self) == FieldTag.trueValue.rawValue ? 1 : 0)
                at += 1
            case FieldTag.int.rawValue:
                guard kind.type == .int else { return unbound(handle) }
                let value = Int64(littleEndian: field.loadUnaligned(fromByteOffset: 1, as: Int64.self))
                rc = sqlite3_bind_int64(handle, index, value)
                if i == keySlot { intKey = value }
                at += FieldWriter.numberSize
            case FieldTag.double.rawValue:
                let value = Double(bitPattern: UInt64(littleEndian: field.loadUnaligned(fromByteOffset: 1, as: UInt64.self)))
                guard kind.type == .double, !value.isNaN else { return unbound(handle) }
                rc = sqlite3_bind_double(handle, index, value)
                at += FieldWriter.numberSize
            case FieldTag.date.rawValue:
                guard kind.type == .date else { return unbound(handle) }
                rc = sqlite3_bind_int64(handle, index, Int64(littleEndian: field.loadUnaligned(fromByteOffset: 1, as: Int64.self)))
                at += FieldWriter.numberSize
            case FieldTag.uuid.rawValue:
                guard kind.type == .uuid else { return unbound(handle) }
                rc = sqlite3_bind_blob(handle, index, field + 1, 16, sqliteStatic)
                at += 17
            case let tag:
                // A text or blob: its LEB128 length, then its bytes.
                var (length, shift, header) = (0, 0, 1)
                while true {
                    let byte = field.load(fromByteOffset: header, as: UInt8.self)
                    length |= Int(byte & 0x7F) << shift
                    header += 1
                    if byte & 0x80 == 0 { break }
                    shift += 7
                }
                let bytes = field + header
                if tag == FieldTag.string.rawValue {
                    guard kind.type == .string,
                          length <= Limits.maxStringKeyBytes || length <= Limits.maxValueBytes && i != keySlot
                    else { return unbound(handle) }
                    rc = length == 0 ? sqlite3_bind_text(handle, index, "", 0, sqliteStatic)
                        : sqlite3_bind_text(handle, index, bytes.assumingMemoryBound(to: CChar.self), Int32(length), sqliteStatic)
                } else {
                    guard kind.type == .bytes, length <= Limits.maxValueBytes else { return unbound(handle) }
                    // An empty blob bound from a pointer would be NULL; zeroblob(0) is an empty blob.
                    rc = length == 0 ? sqlite3_bind_zeroblob(handle, index, 0)
                        : sqlite3_bind_blob(handle, index, bytes, Int32(length), sqliteStatic)
                }
                at += header + length
            }
            guard rc == SQLITE_OK else { throw refused(statement, rc, index) }
        }
        if summed {
            let index = Int32(kinds.count + 1)
            let rc = sqlite3_bind_int64(handle, index, sum)
            guard rc == SQLITE_OK else { throw refused(statement, rc, index) }
        }
        return intKey.map(Value.int) ?? otherKey
    }

    /// Nothing left bound: parameters bound so far point into the buffer.
    private func unbound(_ handle: OpaquePointer) -> Value? {
        sqlite3_clear_bindings(handle)
        return nil
    }

    @inline(never)
    private func refused(_ statement: SQLiteStatement, _ rc: Int32, _ index: Int32) -> StoreError {
        let error = statement.bindError(rc, index)
        sqlite3_clear_bindings(statement.handle)
        return error
    }
}
