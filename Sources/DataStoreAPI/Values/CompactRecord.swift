import Foundation

/// The tags of a stored field: a tag byte, then its payload (8 little-endian bytes for an int, a
/// double's bit pattern and a date's microseconds; a LEB128 length and the bytes for a string's
/// UTF-8 and bytes; 16 bytes for a uuid; nothing for null and the booleans). LMDB stores its
/// records as a format byte and these fields in schema order; a compact record keeps the same
/// fields.
@_spi(Backend) public enum FieldTag: UInt8 {
    case null = 0, falseValue, trueValue, int, double, string, bytes, date, uuid
}

/// The bytes of the compact records one result holds (``CompactArena``), one after another: for
/// each record an offset table (a little-endian `UInt32` per attribute and one past the last,
/// from the start of the record's fields) and then its fields (``FieldTag``), checked when they
/// were read from the store (tags against the attributes' types, lengths, UTF-8). Every record
/// of a chunk has the chunk's layout.
///
/// Written only at its tail, past every record a `Record` already refers to, so what a record
/// can see never changes under it (the same rule as ``ValueStorage``).
final class CompactChunk: ManagedBuffer<CompactChunk.Header, UInt8> {
    struct Header {
        let layout: RecordLayout
        /// The bytes written so far, from the start.
        var used: Int
    }

    static func make(layout: RecordLayout, capacity: Int) -> CompactChunk {
        unsafeDowncast(create(minimumCapacity: capacity) { _ in Header(layout: layout, used: 0) }, to: CompactChunk.self)
    }

    /// The layout of the chunk's records, read through the header's pointer: `header` itself is a
    /// class's stored property, whose every access is checked for exclusivity at run time.
    var layout: RecordLayout { withUnsafeMutablePointerToHeader { $0.pointee.layout } }

    /// The bytes written so far (written only by the arena that made the chunk).
    var used: Int {
        get { withUnsafeMutablePointerToHeader { $0.pointee.used } }
        set { withUnsafeMutablePointerToHeader { $0.pointee.used = newValue } }
    }
}

/// A compact record's chunk, as a record holds it. `Sendable` for the reason ``RecordValues`` is
/// (a `ManagedBuffer` subclass cannot be).
struct CompactChunkReference: @unchecked Sendable {
    let chunk: CompactChunk
}

/// A compact record's place: its chunk, where its offset table starts, and its field count.
struct CompactRow {
    let chunk: CompactChunk
    let start: Int
    let count: Int

    var layout: RecordLayout { chunk.layout }

    /// Calls `body` with the record's offset table's base and its fields' base.
    @inline(__always)
    func withBases<R>(_ body: (UnsafeRawPointer, UnsafeRawPointer) throws -> R) rethrows -> R {
        try chunk.withUnsafeMutablePointerToElements { elements in
            let table = UnsafeRawPointer(elements + start)
            return try body(table, table + 4 * (count + 1))
        }
    }

    @inline(__always)
    private static func offset(_ table: UnsafeRawPointer, _ index: Int) -> Int {
        Int(UInt32(littleEndian: table.loadUnaligned(fromByteOffset: 4 * index, as: UInt32.self)))
    }

    /// The bytes of all the fields.
    func withFields<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withBases { table, fields in try body(UnsafeRawBufferPointer(start: fields, count: Self.offset(table, count))) }
    }

    /// The value of the field at `slot`, built (a string or bytes is copied out).
    func value(at slot: Int) -> Value {
        precondition(slot >= 0 && slot < count, "a record's value index out of range")
        return withBases { table, fields in
            let start = Self.offset(table, slot), end = Self.offset(table, slot + 1)
            let field = UnsafeRawBufferPointer(start: fields + start, count: end - start)
            return Self.value(of: field)
        }
    }

    /// The value of one field, tag and payload, that was checked when it was stored here.
    static func value(of field: UnsafeRawBufferPointer) -> Value {
        switch FieldTag(rawValue: field[0]) {
        case .null, nil: return .null
        case .falseValue: return .bool(false)
        case .trueValue: return .bool(true)
        case .int: return .int(Int64(bitPattern: fixed(field)))
        case .double: return .double(Double(bitPattern: fixed(field)))
        case .date: return .date(Timestamp(microsecondsSinceEpoch: Int64(bitPattern: fixed(field))))
        case .string: return .string(String(decoding: payload(field), as: UTF8.self))
        case .bytes: return .bytes(Array(payload(field)))
        case .uuid:
            return .uuid(UUID(bytes: UnsafeRawBufferPointer(rebasing: field[1...]))
                ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        }
    }

    @inline(__always)
    private static func fixed(_ field: UnsafeRawBufferPointer) -> UInt64 {
        UInt64(littleEndian: field.loadUnaligned(fromByteOffset: 1, as: UInt64.self))
    }

    /// A string's or bytes' payload: what follows the tag and the LEB128 length.
    @inline(__always)
    private static func payload(_ field: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        var start = 1
        while field[start] & 0x80 != 0 { start += 1 }
        return UnsafeRawBufferPointer(rebasing: field[(start + 1)...])
    }

    /// Calls `body` with each field, in order, read in place.
    func forEachField(_ body: (Int, RowField) -> Void) {
        withBases { table, fields in
            for slot in 0..<count {
                let start = Self.offset(table, slot), end = Self.offset(table, slot + 1)
                body(slot, Self.field(of: UnsafeRawBufferPointer(start: fields + start, count: end - start)))
            }
        }
    }

    /// One field, tag and payload, as a row's field: its type, number bits or bytes in place.
    static func field(of field: UnsafeRawBufferPointer) -> RowField {
        switch FieldTag(rawValue: field[0]) {
        case .null, nil: return .null
        case .falseValue: return RowField(.bool, bits: 0)
        case .trueValue: return RowField(.bool, bits: 1)
        case .int: return RowField(.int, bits: fixed(field))
        case .double: return RowField(.double, bits: fixed(field))
        case .date: return RowField(.date, bits: fixed(field))
        case .string: return RowField(.string, bytes: payload(field))
        case .bytes: return RowField(.bytes, bytes: payload(field))
        case .uuid: return RowField(.uuid, bytes: UnsafeRawBufferPointer(rebasing: field[1...]))
        }
    }

    /// Whether the two records' chunks have equal layouts, each read where its chunk keeps it.
    static func sameLayout(_ a: CompactRow, _ b: CompactRow) -> Bool {
        a.chunk.withUnsafeMutablePointerToHeader { x in
            b.chunk.withUnsafeMutablePointerToHeader { y in x.pointee.layout == y.pointee.layout }
        }
    }

    /// Whether both hold the same fields byte for byte: then, and only then, their values are
    /// equal (``Value``'s `==` compares strings by their UTF-8 and doubles by their bits, as
    /// their fields hold them).
    static func sameFields(_ a: CompactRow, _ b: CompactRow) -> Bool {
        guard a.count == b.count else { return false }
        return a.withBases { ta, fa in
            b.withBases { tb, fb in
                let size = offset(ta, a.count)
                guard size == offset(tb, b.count), memcmp(ta, tb, 4 * (a.count + 1)) == 0 else { return false }
                return memcmp(fa, fb, size) == 0
            }
        }
    }

    /// The values, in order, in storage of their own.
    func values() -> RecordValues {
        RecordValues((0..<count).lazy.map { value(at: $0) })
    }
}

/// Builds the compact records of one result into shared chunks (growing to ``bytesPerChunk``),
/// for results that keep their records (fetches, scans, point gets): a record is then its
/// stored fields copied once, an offset table, and a reference, in place of a value per field
/// and an array per string or bytes.
///
/// A record kept after the others are gone keeps its chunk alive: at most ``bytesPerChunk``
/// bytes, or the record's own size when it is larger.
@_spi(Backend) public struct CompactArena {
    /// Bytes per shared chunk (32 KiB: below the allocator's threshold for a mapping of its own).
    public static let bytesPerChunk = 32 * 1_024
    private var chunk: CompactChunk?
    private var capacity = 0
    /// How big the next chunk is: a point get's first record takes no more than it needs, and
    /// each chunk after is twice the last, up to ``bytesPerChunk``.
    private var nextCapacity = 0

    public init() {}

    /// A record of `layout` holding `fields` (each attribute's field, in order): `walk` checks
    /// them and writes where each starts, and where the last ends, into the table it is given
    /// (offsets from the start of `fields`), and returns `false` when they cannot be read (then
    /// no record is made, and `nil` is returned).
    public mutating func record(layout: RecordLayout, fields: UnsafeRawBufferPointer,
                                _ walk: (inout OffsetTable) -> Bool) -> Record? {
        record(layout: layout, size: fields.count) { destination, offsets in
            guard walk(&offsets) else { return false }
            if let source = fields.baseAddress, fields.count > 0 {
                destination.copyMemory(from: source, byteCount: fields.count)
            }
            return true
        }
    }

    /// A compact record of `layout` holding `values` (one per name, in order), or `nil` when
    /// their count is not the layout's or they are too large for a compact record.
    public mutating func record(layout: RecordLayout, values: some Collection<Value>) -> Record? {
        guard values.count == layout.names.count else { return nil }
        let size = values.reduce(0) { $0 + FieldWriter.size(of: $1) }
        return record(layout: layout, size: size) { base, offsets in
            var at = 0
            for value in values {
                offsets.append(at)
                at += FieldWriter.write(value, at: base + at)
            }
            offsets.append(at)
            return true
        }
    }

    /// A record of `layout` whose fields `write` writes (``FieldWriter``) at the pointer it is
    /// given, `size` bytes in all, with where each starts, and where the last ends, in the
    /// table; `false` when the row cannot be read (then no record is made, and `nil` is returned).
    public mutating func record(layout: RecordLayout, size fieldBytes: Int,
                                _ write: (UnsafeMutableRawPointer, inout OffsetTable) -> Bool) -> Record? {
        let count = layout.names.count
        let size = 4 * (count + 1) + fieldBytes
        guard fieldBytes <= Int(UInt32.max), size <= Int(Int32.max) else { return nil }
        if chunk == nil || chunk.unsafelyUnwrapped.layout !== layout || capacity - chunk.unsafelyUnwrapped.used < size {
            nextCapacity = nextCapacity == 0 ? size : min(2 * nextCapacity, Self.bytesPerChunk)
            capacity = max(nextCapacity, size)
            chunk = CompactChunk.make(layout: layout, capacity: capacity)
        }
        let storage = chunk.unsafelyUnwrapped
        let start = storage.used
        let complete = storage.withUnsafeMutablePointerToElements { elements -> Bool in
            let table = UnsafeMutableRawPointer(elements + start)
            var offsets = OffsetTable(base: table, count: count + 1)
            return write(table + 4 * (count + 1), &offsets) && offsets.written == count + 1
        }
        guard complete else { return nil }
        storage.used = start + size
        return Record(compact: CompactRow(chunk: storage, start: start, count: count))
    }
}

/// The offset table of the record ``CompactArena/record(layout:fields:_:)`` is making: written
/// once per entry, in order.
@_spi(Backend) public struct OffsetTable {
    @usableFromInline let base: UnsafeMutableRawPointer
    @usableFromInline let count: Int
    @usableFromInline var written = 0

    init(base: UnsafeMutableRawPointer, count: Int) {
        self.base = base
        self.count = count
    }

    /// Appends the next entry: where the next field starts (or, last, where the fields end).
    @inlinable
    public mutating func append(_ offset: Int) {
        precondition(written < count, "more offsets than the record's layout has fields")
        base.storeBytes(of: UInt32(truncatingIfNeeded: offset).littleEndian, toByteOffset: 4 * written, as: UInt32.self)
        written += 1
    }
}

/// LEB128, as fields and feed entries write lengths and numbers: 7 bits a byte, the lowest
/// first, each byte but the last with its high bit set. Not SPI, so that public inlinable code
/// (``StoredFieldBuffer``'s appends) may write it too.
@usableFromInline enum LEB128 {
    /// Writes `value` at `base`. - Returns: the bytes written (at most 10).
    @inlinable @inline(__always)
    static func write(_ value: UInt64, at base: UnsafeMutableRawPointer) -> Int {
        var n = value
        var offset = 0
        repeat {
            let low = UInt8(n & 0x7F)
            n >>= 7
            base.storeBytes(of: n == 0 ? low : low | 0x80, toByteOffset: offset, as: UInt8.self)
            offset += 1
        } while n != 0
        return offset
    }
}

/// Writes fields (``FieldTag``) where a compact record or a stored LMDB record keeps them.
@_spi(Backend) public enum FieldWriter {
    /// The bytes of a string's or bytes' field: the tag, the LEB128 length, the bytes.
    @inlinable
    public static func size(ofBytes count: Int) -> Int { 1 + lengthSize(count) + count }

    /// The bytes of a field of 8 bytes (an int, a double, a date).
    public static let numberSize = 9

    /// The bytes of the LEB128 encoding of `length`.
    @inlinable
    public static func lengthSize(_ length: Int) -> Int { leb128Size(UInt64(length)) }

    /// The bytes of the LEB128 encoding of `value` (``writeLEB128(_:at:)``).
    @inlinable @inline(__always)
    public static func leb128Size(_ value: UInt64) -> Int {
        var n = value >> 7
        var size = 1
        while n != 0 {
            size += 1
            n >>= 7
        }
        return size
    }

    /// Writes `value` in LEB128 at `base`: 7 bits a byte, the lowest first, each byte but the
    /// last with its high bit set. - Returns: the bytes written (at most 10).
    @inlinable @inline(__always)
    public static func writeLEB128(_ value: UInt64, at base: UnsafeMutableRawPointer) -> Int {
        LEB128.write(value, at: base)
    }

    /// The bytes of a value's field.
    @inlinable
    public static func size(of value: Value) -> Int {
        switch value {
        case .null, .bool: return 1
        case .int, .double, .date: return numberSize
        case .string(let s): return size(ofBytes: s.utf8.count)
        case .bytes(let b): return size(ofBytes: b.count)
        case .uuid: return 17
        }
    }

    /// Writes a value's field at `base`, which has room for ``size(of:)`` bytes.
    /// - Returns: the bytes written.
    @inlinable @inline(__always)
    public static func write(_ value: Value, at base: UnsafeMutableRawPointer) -> Int {
        switch value {
        case .null: return write(tag: .null, at: base)
        case .bool(let b): return write(tag: b ? .trueValue : .falseValue, at: base)
        case .int(let i): return write(.int, bits: UInt64(bitPattern: i), at: base)
        case .double(let d): return write(.double, bits: d.bitPattern, at: base)
        case .date(let t): return write(.date, bits: UInt64(bitPattern: t.microsecondsSinceEpoch), at: base)
        case .string(var s): return s.withUTF8 { write(.string, bytes: UnsafeRawBufferPointer($0), at: base) }
        case .bytes(let b): return b.withUnsafeBytes { write(.bytes, bytes: $0, at: base) }
        case .uuid(let u): return withUnsafeBytes(of: u.uuid) { write(.uuid, bytes: $0, at: base) }
        }
    }

    /// Writes a tag alone (null, false, true). - Returns: the bytes written.
    @inlinable
    public static func write(tag: FieldTag, at base: UnsafeMutableRawPointer) -> Int {
        base.storeBytes(of: tag.rawValue, as: UInt8.self)
        return 1
    }

    /// Writes a tag and 8 little-endian bytes. - Returns: the bytes written.
    @inlinable
    public static func write(_ tag: FieldTag, bits: UInt64, at base: UnsafeMutableRawPointer) -> Int {
        base.storeBytes(of: tag.rawValue, as: UInt8.self)
        base.storeBytes(of: bits.littleEndian, toByteOffset: 1, as: UInt64.self)
        return numberSize
    }

    /// Writes the part of a field before its bytes: a tag and the LEB128 length `count` (none
    /// for a uuid, at most 11 bytes in all). - Returns: the bytes written.
    @inlinable
    public static func writeHeader(_ tag: FieldTag, count: Int, at base: UnsafeMutableRawPointer) -> Int {
        base.storeBytes(of: tag.rawValue, as: UInt8.self)
        return tag == .uuid ? 1 : 1 + writeLEB128(UInt64(count), at: base + 1)
    }

    /// Writes a tag, the LEB128 length of `bytes` (none for a uuid) and the bytes.
    /// - Returns: the bytes written.
    @inlinable
    public static func write(_ tag: FieldTag, bytes: UnsafeRawBufferPointer, at base: UnsafeMutableRawPointer) -> Int {
        let offset = writeHeader(tag, count: bytes.count, at: base)
        if let source = bytes.baseAddress, bytes.count > 0 {
            (base + offset).copyMemory(from: source, byteCount: bytes.count)
        }
        return offset + bytes.count
    }
}

/// One field of a row as a store reads it, before it is copied into a compact record: its tag,
/// and its number or where its bytes are (valid as long as the store's row is: until its
/// statement steps, or while its result lives). A reader checks each column once and makes one
/// of these; ``CompactArena/record(layout:fields:sumMatches:)`` then copies them into a record.
@_spi(Backend) public struct StoredField {
    public var tag: FieldTag
    public var bits: UInt64
    public var bytes: UnsafeRawBufferPointer

    @inlinable
    public init(tag: FieldTag, bits: UInt64 = 0, bytes: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0)) {
        self.tag = tag
        self.bits = bits
        self.bytes = bytes
    }

    /// The bytes the field takes in a compact record (``FieldWriter``).
    @inlinable
    public var size: Int {
        switch tag {
        case .null, .falseValue, .trueValue: return 1
        case .int, .double, .date: return FieldWriter.numberSize
        case .string, .bytes: return FieldWriter.size(ofBytes: bytes.count)
        case .uuid: return 17
        }
    }

    /// The field's value, built (a string or bytes copied out).
    public var value: Value {
        switch tag {
        case .null: return .null
        case .falseValue: return .bool(false)
        case .trueValue: return .bool(true)
        case .int: return .int(Int64(bitPattern: bits))
        case .date: return .date(Timestamp(microsecondsSinceEpoch: Int64(bitPattern: bits)))
        case .double: return .double(Double(bitPattern: bits))
        case .string: return .string(String(decoding: bytes, as: UTF8.self))
        case .bytes: return .bytes(Array(bytes))
        case .uuid: return UUID(bytes: bytes).map(Value.uuid) ?? .null
        }
    }

    /// Writes the field at `base`, which has room for ``size`` bytes. - Returns: the bytes written.
    @inlinable
    public func write(at base: UnsafeMutableRawPointer) -> Int {
        switch tag {
        case .null, .falseValue, .trueValue: return FieldWriter.write(tag: tag, at: base)
        case .int, .double, .date: return FieldWriter.write(tag, bits: bits, at: base)
        case .string, .bytes, .uuid: return FieldWriter.write(tag, bytes: bytes, at: base)
        }
    }
}

extension CompactArena {
    /// A record of `layout` holding `fields` (one per name, in order, each checked by its
    /// reader), or `nil` when `sumMatches` refuses the checksum of its fields (``RecordSum``: the
    /// CRC-32C of the fields up to the last that is not null) or they are too large for a compact
    /// record. The fields are written once, into the record, and the sum is taken over them there;
    /// with `summed` false (a row that carries no sum) no sum is taken and `sumMatches` is not called.
    @inlinable
    public mutating func record(layout: RecordLayout, fields: UnsafeBufferPointer<StoredField>, summed: Bool,
                                sumMatches: (Int64) -> Bool) -> Record? {
        var size = 0
        for field in fields { size += field.size }
        return record(layout: layout, size: size) { base, offsets in
            var (at, end) = (0, 0)
            for field in fields {
                offsets.append(at)
                at += field.write(at: base + at)
                if field.tag != .null { end = at }
            }
            offsets.append(at)
            return !summed || sumMatches(RecordSum.of(UnsafeRawPointer(base), count: end))
        }
    }
}
