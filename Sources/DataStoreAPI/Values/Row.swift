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
    // A field is read from the cursor's field table (``FieldTable``) by code inlined into the
    // caller: a name found by one comparison of its two words, a type compared, a load. A cursor
    // without a table is asked for the field (``RowCursor/field(at:)``). A strong reference: read
    // from an `unowned(unsafe)` one, each use retained and released it.
    @usableFromInline let access: RowAccess
    var cursor: any RowCursor { access.cursor }

    init(_ access: RowAccess) {
        self.access = access
    }

    /// The entity's attribute names, in schema order.
    public var attributeNames: [String] { cursor.layout.names }

    /// The field of a non-null attribute of `type`, or the error naming what it holds.
    @inlinable @inline(__always)
    func field(_ name: String, _ type: ValueType) throws(StoreError) -> UnsafeMutablePointer<RowCell> {
        let cell = try access.cell(name)
        guard cell.pointee.type == type else { throw access.mismatch(name, type) }
        return cell
    }

    /// The attribute's value (built: a string or bytes is copied out).
    public func value(_ name: String) throws(StoreError) -> Value { try access.cell(name).pointee.value }

    /// Whether the attribute is null.
    @inlinable @inline(__always) public func isNull(_ name: String) throws(StoreError) -> Bool { try access.cell(name).pointee.type == nil }

    /// An `int` attribute's value.
    @inlinable @inline(__always) public func int(_ name: String) throws(StoreError) -> Int64 {
        Int64(bitPattern: try field(name, .int).pointee.bits)
    }

    /// A `double` attribute's value.
    @inlinable @inline(__always) public func double(_ name: String) throws(StoreError) -> Double {
        Double(bitPattern: try field(name, .double).pointee.bits)
    }

    /// A `bool` attribute's value.
    @inlinable @inline(__always) public func bool(_ name: String) throws(StoreError) -> Bool { try field(name, .bool).pointee.bits != 0 }

    /// A `date` attribute's value.
    @inlinable @inline(__always) public func date(_ name: String) throws(StoreError) -> Timestamp {
        Timestamp(microsecondsSinceEpoch: Int64(bitPattern: try field(name, .date).pointee.bits))
    }

    /// A `string` attribute's value, as a new `String`.
    @inlinable @inline(__always) public func string(_ name: String) throws(StoreError) -> String {
        String(decoding: try field(name, .string).pointee.bytes, as: UTF8.self)
    }

    /// A `uuid` attribute's value.
    public func uuid(_ name: String) throws(StoreError) -> UUID {
        // 16 bytes: the cursor checked the row before handing it over.
        UUID(bytes: try field(name, .uuid).pointee.bytes) ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    }

    /// A `bytes` attribute's value, copied out.
    @inlinable @inline(__always) public func bytes(_ name: String) throws(StoreError) -> [UInt8] {
        Array(try field(name, .bytes).pointee.bytes)
    }

    /// Calls `body` with a `string` attribute's UTF-8 bytes where the store keeps them (valid
    /// inside `body` only): nothing is copied.
    @inlinable @inline(__always) public func withUTF8<R>(_ name: String, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try body(try field(name, .string).pointee.bytes)
    }

    /// Calls `body` with a `bytes` attribute's bytes where the store keeps them (valid inside
    /// `body` only): nothing is copied.
    @inlinable @inline(__always) public func withBytes<R>(_ name: String, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try body(try field(name, .bytes).pointee.bytes)
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

/// One field of a row in a ``FieldTable``: ``RowField``'s three parts, in a type that ``Row``'s
/// inlined accessors may name.
@usableFromInline struct RowCell {
    @usableFromInline var type: ValueType?
    @usableFromInline var bits: UInt64
    @usableFromInline var bytes: UnsafeRawBufferPointer

    @inlinable init(type: ValueType?, bits: UInt64, bytes: UnsafeRawBufferPointer) {
        self.type = type
        self.bits = bits
        self.bytes = bytes
    }

    init(_ field: RowField) {
        self.init(type: field.type, bits: field.bits, bytes: field.bytes)
    }

    var field: RowField { RowField(type: type, bits: bits, bytes: bytes) }

    @usableFromInline var value: Value { field.value }
}

/// The current row's fields, one per slot, filled by a cursor before it hands the row over (LMDB's
/// and SQLite's visits check every field of a row first anyway): what ``Row``'s accessors read
/// without a call into the cursor. Its bytes are the cursor's, valid until the cursor moves.
@_spi(Backend) public final class FieldTable {
    @usableFromInline let cells: UnsafeMutablePointer<RowCell>
    public let count: Int

    public init(count: Int) {
        self.count = count
        cells = .allocate(capacity: Swift.max(count, 1))
        cells.initialize(repeating: RowCell(.null), count: Swift.max(count, 1))
    }

    deinit { cells.deallocate() }

    /// The slot's field. Unchecked: the slot is below ``count``.
    @inlinable public subscript(slot: Int) -> RowField {
        get {
            let cell = cells[slot]
            return RowField(type: cell.type, bits: cell.bits, bytes: cell.bytes)
        }
        set { cells[slot] = RowCell(type: newValue.type, bits: newValue.bits, bytes: newValue.bytes) }
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

/// What the rows of one visit share: the backend's cursor (and its field table, when it has one),
/// and the slots the visitor asked for in the order it asked for them. A visitor reads the same
/// names in the same order in every row: each name is then found by one comparison of its two
/// words, inlined into the caller (``RecordLayout/slot(of:)`` for the first row, or when the order
/// changes).
@usableFromInline final class RowAccess {
    let cursor: any RowCursor
    private let layout: RecordLayout
    @usableFromInline typealias Words = NameWords
    /// The layout's names, as words; the cursor's field table (`nil` when it has none); a cell for
    /// the field of a cursor without one.
    @usableFromInline let words: UnsafeMutablePointer<Words>
    @usableFromInline let cells: UnsafeMutablePointer<RowCell>?
    private let table: FieldTable?
    private let scratch: UnsafeMutablePointer<RowCell>
    private let orderCapacity: Int
    // `@exclusivity(unchecked)`: one visit, on one thread; no access to these overlaps another
    // (each accessor's lookup is over before the next begins). Defended by the `visit` lines of
    // Scripts/instruction-counts.txt.
    /// The slots asked for in the rows so far, in order; how many; where this row is in them.
    @usableFromInline let order: UnsafeMutablePointer<Int>
    @usableFromInline @exclusivity(unchecked) var orderCount = 0
    @usableFromInline @exclusivity(unchecked) var position = 0

    init(_ cursor: any RowCursor) {
        self.cursor = cursor
        layout = cursor.layout
        let names = layout.names
        words = .allocate(capacity: Swift.max(names.count, 1))
        for (index, name) in names.enumerated() { (words + index).initialize(to: unsafeBitCast(name, to: Words.self)) }
        table = cursor.fieldTable
        cells = table?.cells
        scratch = .allocate(capacity: 1)
        scratch.initialize(to: RowCell(.null))
        orderCapacity = 4 * names.count
        order = .allocate(capacity: Swift.max(orderCapacity, 1))
    }

    deinit {
        words.deallocate()
        scratch.deallocate()
        order.deallocate()
    }

    /// The next row begins: the lookups start again from the first name asked for.
    func startRow() { position = 0 }

    /// The named attribute's field in the current row: in the cursor's table, or (for a cursor
    /// without one) in a cell of the access's, valid until the next lookup.
    @inlinable @inline(__always)
    func cell(_ name: String) throws(StoreError) -> UnsafeMutablePointer<RowCell> {
        if let cells {
            let position = self.position
            if position < orderCount {
                let slot = order[position]
                if sameWords(words[slot], unsafeBitCast(name, to: Words.self)) {
                    self.position = position + 1
                    return cells + slot
                }
            }
        }
        return try lookUp(name)
    }

    /// ``cell(_:)`` for a name not next in the order, or a cursor without a table.
    @usableFromInline func lookUp(_ name: String) throws(StoreError) -> UnsafeMutablePointer<RowCell> {
        let slot = try slot(name)
        if let cells { return cells + slot }
        scratch.pointee = RowCell(cursor.field(at: slot))
        return scratch
    }

    private func slot(_ name: String) throws(StoreError) -> Int {
        let position = self.position
        if position < orderCount {
            let slot = order[position]
            if sameWords(words[slot], unsafeBitCast(name, to: Words.self)) {
                self.position = position + 1
                return slot
            }
        }
        guard let slot = layout.slot(of: name) else { throw cursor.unknown(name) }
        if position < orderCount {
            order[position] = slot
        } else if orderCount < orderCapacity {
            order[orderCount] = slot
            orderCount += 1
        }
        self.position = position + 1
        return slot
    }

    /// `typeMismatch` for the named attribute (which the entity has) asked for as `type`.
    @usableFromInline func mismatch(_ name: String, _ type: ValueType) -> StoreError {
        cursor.mismatch(layout.slot(of: name) ?? 0, type)
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
    /// The current row's fields, when the cursor fills them all before it hands a row over.
    var fieldTable: FieldTable? { get }
}

extension RowCursor {
    public var fieldTable: FieldTable? { nil }

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
