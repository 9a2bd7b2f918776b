import Foundation

/// One item of a visit (``ReadAccessor/visit(_:_:)``), read where the store keeps it: LMDB's
/// map, SQLite's statement, the in-memory table's record. Nothing is built until a value is
/// asked for, and a string or bytes can be read in place (``withUTF8(_:_:)``,
/// ``withBytes(_:_:)``) without building anything.
///
/// A row is valid only inside the closure it is handed to: it is noncopyable and handed over
/// borrowed, so it cannot be kept, returned or captured. To keep an item, copy it out
/// (``record()``, or the values you need).
///
/// Every accessor names the attribute; a name the entity does not have throws
/// `unknownAttribute`, and a typed accessor asked for another type, or for a null, throws
/// `typeMismatch` naming the attribute (check ``isNull(_:)`` first for optional attributes, or
/// read ``value(_:)``).
public struct Row: ~Copyable {
    // One call into the backend's cursor per field read (``RowCursor/field(at:)``), and no generic
    // type built in an accessor, so that an accessor called unspecialized looks up no metadata
    // per row. A strong reference: read from an `unowned(unsafe)` one, each use retained and
    // released it.
    let access: RowAccess
    var cursor: any RowCursor { access.cursor }

    init(_ access: RowAccess) {
        self.access = access
    }

    /// The entity's attribute names, in schema order.
    public var attributeNames: [String] { cursor.layout.names }

    /// The slot of an attribute, or `unknownAttribute`.
    private func slot(_ name: String) throws(StoreError) -> Int {
        guard let slot = access.slot(name) else { throw cursor.unknown(name) }
        return slot
    }

    /// The field of a non-null attribute of `type`, or the error naming what it holds.
    private func field(_ name: String, _ type: ValueType) throws(StoreError) -> RowField {
        let slot = try slot(name)
        let field = access.cursor.field(at: slot)
        guard field.type == type else { throw cursor.mismatch(slot, type) }
        return field
    }

    /// The attribute's value (built: a string or bytes is copied out).
    public func value(_ name: String) throws(StoreError) -> Value { cursor.field(at: try slot(name)).value }

    /// Whether the attribute is null.
    public func isNull(_ name: String) throws(StoreError) -> Bool { cursor.field(at: try slot(name)).type == nil }

    /// An `int` attribute's value.
    public func int(_ name: String) throws(StoreError) -> Int64 { Int64(bitPattern: try field(name, .int).bits) }

    /// A `double` attribute's value.
    public func double(_ name: String) throws(StoreError) -> Double { Double(bitPattern: try field(name, .double).bits) }

    /// A `bool` attribute's value.
    public func bool(_ name: String) throws(StoreError) -> Bool { try field(name, .bool).bits != 0 }

    /// A `date` attribute's value.
    public func date(_ name: String) throws(StoreError) -> Timestamp {
        Timestamp(microsecondsSinceEpoch: Int64(bitPattern: try field(name, .date).bits))
    }

    /// A `string` attribute's value, as a new `String`.
    public func string(_ name: String) throws(StoreError) -> String {
        String(decoding: try field(name, .string).bytes, as: UTF8.self)
    }

    /// A `uuid` attribute's value.
    public func uuid(_ name: String) throws(StoreError) -> UUID {
        // 16 bytes: the cursor checked the row before handing it over.
        UUID(bytes: try field(name, .uuid).bytes) ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    }

    /// A `bytes` attribute's value, copied out.
    public func bytes(_ name: String) throws(StoreError) -> [UInt8] { Array(try field(name, .bytes).bytes) }

    /// Calls `body` with a `string` attribute's UTF-8 bytes where the store keeps them (valid
    /// inside `body` only): nothing is copied.
    public func withUTF8<R>(_ name: String, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try body(try field(name, .string).bytes)
    }

    /// Calls `body` with a `bytes` attribute's bytes where the store keeps them (valid inside
    /// `body` only): nothing is copied.
    public func withBytes<R>(_ name: String, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try body(try field(name, .bytes).bytes)
    }

    /// The row as a ``Record`` of its own, to keep.
    public func record() -> Record {
        let cursor = self.cursor
        var values: [Value] = []
        values.reserveCapacity(cursor.layout.names.count)
        for slot in cursor.layout.names.indices { values.append(cursor.field(at: slot).value) }
        return Record(layout: cursor.layout, values: values)
    }
}

/// One field of a cursor's current row, as the backend keeps it: its type (`nil` for null), its
/// number (an int's, date's or bool's bits as `Int64`, a double's bit pattern), or its bytes (a
/// string's UTF-8, bytes, a uuid's 16), which point into the backend's storage and are valid
/// until the cursor moves.
@_spi(Backend) public struct RowField {
    public var type: ValueType?
    public var bits: UInt64
    public var bytes: UnsafeRawBufferPointer

    @inlinable public static var null: RowField { RowField(type: nil, bits: 0, bytes: UnsafeRawBufferPointer(start: nil, count: 0)) }

    @inlinable public init(type: ValueType?, bits: UInt64, bytes: UnsafeRawBufferPointer) {
        self.type = type
        self.bits = bits
        self.bytes = bytes
    }

    /// A number field.
    @inlinable public init(_ type: ValueType, bits: UInt64) {
        self.init(type: type, bits: bits, bytes: UnsafeRawBufferPointer(start: nil, count: 0))
    }

    /// A string, bytes or uuid field.
    @inlinable public init(_ type: ValueType, bytes: UnsafeRawBufferPointer) {
        self.init(type: type, bits: 0, bytes: bytes)
    }

    /// The field's value, built.
    public var value: Value {
        switch type {
        case nil: return .null
        case .int: return .int(Int64(bitPattern: bits))
        case .bool: return .bool(bits != 0)
        case .date: return .date(Timestamp(microsecondsSinceEpoch: Int64(bitPattern: bits)))
        case .double: return .double(Double(bitPattern: bits))
        case .string: return .string(String(decoding: bytes, as: UTF8.self))
        case .bytes: return .bytes(Array(bytes))
        case .uuid: return UUID(bytes: bytes).map(Value.uuid) ?? .null
        }
    }
}

/// What the rows of one visit share: the backend's cursor, and the slots the visitor asked for in
/// the order it asked for them. A visitor reads the same names in the same order in every row:
/// each name is then found by one comparison of its two words (``RecordLayout/slot(of:)`` for
/// the first row, or when the order changes).
final class RowAccess {
    let cursor: any RowCursor
    private let layout: RecordLayout
    private typealias Words = (UInt64, UInt64)
    private let words: [Words]
    // `@exclusivity(unchecked)`: one visit, on one thread; no access to these overlaps another
    // (each accessor's lookup is over before the next begins). Defended by the `visit` lines of
    // Scripts/instruction-counts.txt.
    /// The slots asked for in the rows so far, in order; where this row is in them.
    @exclusivity(unchecked) private var order: [Int] = []
    @exclusivity(unchecked) private var position = 0

    init(_ cursor: any RowCursor) {
        self.cursor = cursor
        layout = cursor.layout
        words = layout.names.map { unsafeBitCast($0, to: Words.self) }
    }

    /// The next row begins: the lookups start again from the first name asked for.
    func startRow() { position = 0 }

    func slot(_ name: String) -> Int? {
        let position = self.position
        if position < order.count {
            let slot = order[position]
            if words[slot] == unsafeBitCast(name, to: Words.self) {
                self.position = position + 1
                return slot
            }
        }
        guard let slot = layout.slot(of: name) else { return nil }
        if position < order.count {
            order[position] = slot
        } else if order.count < 4 * words.count {
            order.append(slot)
        }
        self.position = position + 1
        return slot
    }
}

/// What a backend implements to hand rows to a visit without building records: the current
/// row's fields by slot (the entity's attribute order), read where the backend keeps them.
/// The backend checks each row as a decode would (types, nulls of required attributes, UTF-8)
/// before handing it over, so that the accessors need not: a field, when not null, is of the
/// attribute's type.
@_spi(Backend) public protocol RowCursor: AnyObject {
    /// The entity's attribute names, in slot order.
    var layout: RecordLayout { get }
    /// The entity's name, for errors.
    var entityName: String { get }
    /// The slot's attribute type.
    func type(at slot: Int) -> ValueType
    /// The slot's field in the current row.
    func field(at slot: Int) -> RowField
}

extension RowCursor {
    /// `typeMismatch` for a slot asked for as `type`.
    public func mismatch(_ slot: Int, _ type: ValueType) -> StoreError {
        let what = field(at: slot).type.map { "holds \($0)" } ?? "is null"
        return StoreError(.typeMismatch, "attribute '\(layout.names[slot])' of '\(entityName)' \(what), not \(type)")
    }

    /// `unknownAttribute` for a name the entity does not have.
    public func unknown(_ name: String) -> StoreError {
        StoreError(.unknownAttribute, "entity '\(entityName)' has no attribute '\(name)'")
    }
}

/// A cursor over records: what a backend without a cursor of its own visits (the default
/// ``StorageReader/visit(_:in:_:)``), and what a visit of records already read hands over. A
/// string's, bytes' or uuid's bytes are copied into a buffer of the slot's own (kept from row to
/// row: nothing is allocated per row once it is large enough), where they stay for the row.
@_spi(Backend) public final class RecordRowCursor: RowCursor {
    public let layout: RecordLayout
    public let entityName: String
    private let types: [ValueType]
    private var values = RecordValues()
    /// The current row as the record it is.
    private var current = Record()
    /// Per slot: a buffer for its bytes, and its capacity.
    private var buffers: [(UnsafeMutableRawPointer?, Int)]

    public init(_ entity: EntitySchema) {
        layout = entity.layout
        types = entity.attributes.map(\.type)
        entityName = entity.name
        buffers = Array(repeating: (nil, 0), count: types.count)
    }

    deinit {
        for (buffer, _) in buffers { buffer?.deallocate() }
    }

    /// Makes `record` (of the cursor's entity) the current row.
    public func load(_ record: Record) {
        current = record
        loaded = false
    }

    /// The current record's values in slot order, taken at the first field read of the row (a
    /// typed decode of the record reads none).
    private var loaded = false

    /// Lets go of the current row (a backend refills a record in place only when nothing else
    /// holds its values).
    public func unload() {
        values = RecordValues()
        current = Record()
        loaded = false
    }

    public func type(at slot: Int) -> ValueType { types[slot] }

    /// `bytes` copied into the slot's buffer.
    private func kept(_ slot: Int, _ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        var (buffer, capacity) = buffers[slot]
        if buffer == nil || capacity < bytes.count {
            buffer?.deallocate()
            capacity = max(bytes.count, 32)
            buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 8)
            buffers[slot] = (buffer, capacity)
        }
        let target = buffer.unsafelyUnwrapped
        target.copyMemory(from: source, byteCount: bytes.count)
        return UnsafeRawBufferPointer(start: target, count: bytes.count)
    }

    public func field(at slot: Int) -> RowField {
        if !loaded {
            values = current.values(inOrderOf: layout) ?? current.values(in: layout)
            loaded = true
        }
        switch values[slot] {
        case .null: return .null
        case .int(let i): return RowField(.int, bits: UInt64(bitPattern: i))
        case .bool(let b): return RowField(.bool, bits: b ? 1 : 0)
        case .date(let t): return RowField(.date, bits: UInt64(bitPattern: t.microsecondsSinceEpoch))
        case .double(let d): return RowField(.double, bits: d.bitPattern)
        case .string(var s): return RowField(.string, bytes: s.withUTF8 { kept(slot, UnsafeRawBufferPointer($0)) })
        case .bytes(let b): return RowField(.bytes, bytes: b.withUnsafeBytes { kept(slot, $0) })
        case .uuid(let u): return RowField(.uuid, bytes: withUnsafeBytes(of: u.uuid) { kept(slot, $0) })
        }
    }
}
