/// A model's values written one after another as a compact record's fields (a tag
/// and its payload each) into a buffer a store keeps from one insert to the next: what a store
/// that takes a model's values without a record gives `RowCodable.writeStoredFields(to:)`.
///
/// Each append only writes its field; the store then checks every field against its attribute
/// and stores it (SQLite binds a text's or blob's bytes where they are here). The appends are
/// inlinable, so that the code `@StoredModel` writes for a model is one function with each
/// value's write in it, rather than a call through a generic sink per value.
///
/// The buffer owns the bytes it writes into and lets them go when it grows into larger ones:
/// append only to the buffer given (`inout`), and keep no copy of it to use or restore after an
/// append, which may have let the copy's bytes go.
public struct StoredFieldBuffer: StoredFieldSink {
    /// The buffer: `capacity` bytes, of which `used` are fields.
    @usableFromInline var _base: UnsafeMutableRawPointer
    @usableFromInline var _capacity: Int
    @usableFromInline var _used = 0
    /// How many fields were written.
    @usableFromInline var _count = 0
    /// Where the last field that is not null ends: trailing nulls are not part of a row's sum.
    @usableFromInline var _end = 0
    /// Whether a text or blob was past ``Limits/maxValueBytes``: not copied into the buffer (the
    /// store refuses the row, or writes it the record's way, which names the value).
    @usableFromInline var _oversized = false

    /// ``Limits/maxValueBytes``, as a constant the inlined appends compare with (a static `let` of
    /// this module is read through an accessor from another).
    @inlinable static var maxValueBytes: Int { 16 * 1024 * 1024 }

    /// Fields written into `base` (`capacity` bytes, from ``allocate(capacity:)``), which the
    /// buffer may replace with a larger one (``base`` is then the one to keep and free).
    @_spi(Backend)
    public init(base: UnsafeMutableRawPointer, capacity: Int) {
        (_base, _capacity) = (base, capacity)
    }

    /// A buffer's bytes, for ``init(base:capacity:)``: freed with `deallocate()`.
    @_spi(Backend)
    public static func allocate(capacity: Int) -> UnsafeMutableRawPointer {
        .allocate(byteCount: capacity, alignment: 8)
    }

    /// The buffer's bytes: the one given, or a larger one that replaced it.
    @_spi(Backend) public var base: UnsafeMutableRawPointer { _base }
    /// The bytes ``base`` has.
    @_spi(Backend) public var capacity: Int { _capacity }
    /// The bytes the fields take, from ``base``.
    @_spi(Backend) public var used: Int { _used }
    /// How many fields were written.
    @_spi(Backend) public var count: Int { _count }
    /// Where the last field that is not null ends.
    @_spi(Backend) public var end: Int { _end }
    /// Whether a text or blob past ``Limits/maxValueBytes`` was handed over (and not written).
    @_spi(Backend) public var oversized: Bool { _oversized }

    @inline(__always)
    public mutating func append(_ value: Value) throws {
        switch value {
        case .null: writeTag(0)
        case .bool(let b):
            writeTag(b ? 2 : 1)
            _end = _used
        case .int(let i): writeNumber(3, bits: UInt64(bitPattern: i))
        case .double(let d): writeNumber(4, bits: d.bitPattern)
        case .date(let t): writeNumber(7, bits: UInt64(bitPattern: t.microsecondsSinceEpoch))
        case .string(let s): writeText(s)
        case .bytes(let b): b.withUnsafeBytes { write(6, $0) }
        case .uuid(let u):
            reserve(17)
            _base.storeBytes(of: UInt8(8), toByteOffset: _used, as: UInt8.self)
            withUnsafeBytes(of: u.uuid) { (_base + _used + 1).copyMemory(from: $0.baseAddress!, byteCount: 16) }
            _used += 17
            _end = _used
        }
        _count += 1
    }

    @inlinable
    public mutating func appendInt(_ value: Int64) throws {
        writeNumber(3, bits: UInt64(bitPattern: value))
        _count += 1
    }

    @inlinable
    public mutating func appendDouble(_ value: Double) throws {
        writeNumber(4, bits: value.bitPattern)
        _count += 1
    }

    @inlinable
    public mutating func appendBytes(_ bytes: UnsafeRawBufferPointer) throws {
        write(6, bytes)
        _count += 1
    }

    @inlinable
    public mutating func appendString(_ value: String) throws {
        writeText(value)
        _count += 1
    }

    /// Writes a text's field (tag 5) from a string's UTF-8: a native string's bytes copied from
    /// where they are, another's one by one.
    @inlinable @inline(__always)
    mutating func writeText(_ value: String) {
        let count = value.utf8.count
        guard count <= Self.maxValueBytes else {
            _oversized = true
            return
        }
        let at = header(5, count: count)
        let copied: Void? = value.utf8.withContiguousStorageIfAvailable { source in
            if let start = source.baseAddress, count > 0 { at.copyMemory(from: start, byteCount: count) }
        }
        if copied == nil {
            _ = UnsafeMutableRawBufferPointer(start: at, count: count).initializeMemory(as: UInt8.self, from: value.utf8)
        }
        _used += count
        _end = _used
    }

    /// Writes a blob's field (tag 6): its tag, LEB128 length and bytes.
    @inlinable @inline(__always)
    mutating func write(_ tag: UInt8, _ bytes: UnsafeRawBufferPointer) {
        guard bytes.count <= Self.maxValueBytes else {
            _oversized = true
            return
        }
        let at = header(tag, count: bytes.count)
        if let source = bytes.baseAddress, bytes.count > 0 { at.copyMemory(from: source, byteCount: bytes.count) }
        _used += bytes.count
        _end = _used
    }

    /// Makes room for a field of `count` bytes and writes its tag and LEB128 length: where its
    /// bytes go (``_used`` is moved past the header only).
    @inlinable @inline(__always)
    mutating func header(_ tag: UInt8, count: Int) -> UnsafeMutableRawPointer {
        reserve(11 + count)
        _base.storeBytes(of: tag, toByteOffset: _used, as: UInt8.self)
        _used += 1 + LEB128.write(UInt64(count), at: _base + _used + 1)
        return _base + _used
    }

    /// Writes a field that is its tag alone (a null, which leaves ``end`` where it was, or a bool).
    @inlinable @inline(__always)
    mutating func writeTag(_ tag: UInt8) {
        reserve(1)
        _base.storeBytes(of: tag, toByteOffset: _used, as: UInt8.self)
        _used += 1
    }

    /// Writes a number's field: its tag and 8 little-endian bytes.
    @inlinable @inline(__always)
    mutating func writeNumber(_ tag: UInt8, bits: UInt64) {
        reserve(9)
        _base.storeBytes(of: tag, toByteOffset: _used, as: UInt8.self)
        _base.storeBytes(of: bits.littleEndian, toByteOffset: _used + 1, as: UInt64.self)
        _used += 9
        _end = _used
    }

    @inlinable @inline(__always)
    mutating func reserve(_ size: Int) {
        if _capacity - _used < size { grow(to: _used + size) }
    }

    /// Moves the fields into a buffer of at least `size` bytes. A store that bound parameters into
    /// the old one binds every parameter anew before it uses them again.
    @usableFromInline @inline(never)
    mutating func grow(to size: Int) {
        let capacity = Swift.max(size, 2 * _capacity)
        let larger = Self.allocate(capacity: capacity)
        larger.copyMemory(from: _base, byteCount: _used)
        _base.deallocate()
        (_base, _capacity) = (larger, capacity)
    }
}
