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
    // No generic type is built in an accessor (the generic ones hand `body` straight to the
    // cursor), so that an accessor called unspecialized looks up no metadata per row. A strong
    // reference: read from an `unowned(unsafe)` one, each use retained and released it.
    let access: RowAccess
    var cursor: any RowCursor { access.cursor }

    init(_ access: RowAccess) {
        self.access = access
    }

    /// The entity's attribute names, in schema order.
    public var attributeNames: [String] { cursor.layout.names }

    /// The slot of an attribute, or `unknownAttribute`.
    func slot(_ name: String) throws(StoreError) -> Int {
        guard let slot = access.slot(name) else { throw cursor.unknown(name) }
        return slot
    }

    /// The slot of a non-null attribute of `type`, or the error naming what it holds.
    func slot(_ name: String, _ type: ValueType) throws(StoreError) -> Int {
        let slot = try slot(name)
        guard access.types[slot] == type, !access.cursor.isNull(at: slot) else { throw cursor.mismatch(slot, type) }
        return slot
    }

    /// The attribute's value (built: a string or bytes is copied out).
    public func value(_ name: String) throws(StoreError) -> Value { cursor.value(at: try slot(name)) }

    /// Whether the attribute is null.
    public func isNull(_ name: String) throws(StoreError) -> Bool { cursor.isNull(at: try slot(name)) }

    /// An `int` attribute's value.
    public func int(_ name: String) throws(StoreError) -> Int64 { cursor.int64(at: try slot(name, .int)) }

    /// A `double` attribute's value.
    public func double(_ name: String) throws(StoreError) -> Double { cursor.double(at: try slot(name, .double)) }

    /// A `bool` attribute's value.
    public func bool(_ name: String) throws(StoreError) -> Bool { cursor.int64(at: try slot(name, .bool)) != 0 }

    /// A `date` attribute's value.
    public func date(_ name: String) throws(StoreError) -> Timestamp {
        Timestamp(microsecondsSinceEpoch: cursor.int64(at: try slot(name, .date)))
    }

    /// A `string` attribute's value, as a new `String`.
    public func string(_ name: String) throws(StoreError) -> String {
        let slot = try slot(name, .string)
        return cursor.withBytes(at: slot) { String(decoding: $0, as: UTF8.self) }
    }

    /// A `uuid` attribute's value.
    public func uuid(_ name: String) throws(StoreError) -> UUID {
        let slot = try slot(name, .uuid)
        // 16 bytes: the cursor checked the row before handing it over.
        return cursor.withBytes(at: slot) { UUID(bytes: $0) } ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    }

    /// A `bytes` attribute's value, copied out.
    public func bytes(_ name: String) throws(StoreError) -> [UInt8] {
        let slot = try slot(name, .bytes)
        return cursor.withBytes(at: slot) { Array($0) }
    }

    /// Calls `body` with a `string` attribute's UTF-8 bytes where the store keeps them (valid
    /// inside `body` only): nothing is copied.
    public func withUTF8<R>(_ name: String, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try cursor.withBytes(at: try slot(name, .string), body)
    }

    /// Calls `body` with a `bytes` attribute's bytes where the store keeps them (valid inside
    /// `body` only): nothing is copied.
    public func withBytes<R>(_ name: String, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try cursor.withBytes(at: try slot(name, .bytes), body)
    }

    /// The row as a ``Record`` of its own, to keep.
    public func record() -> Record {
        let cursor = self.cursor
        var values: [Value] = []
        values.reserveCapacity(cursor.layout.names.count)
        for slot in cursor.layout.names.indices { values.append(cursor.value(at: slot)) }
        return Record(layout: cursor.layout, values: values)
    }
}

/// What the rows of one visit share: the backend's cursor, and the slots the visitor asked for in
/// the order it asked for them. A visitor reads the same names in the same order in every row:
/// each name is then found by one comparison of its two words (``RecordLayout/slot(of:)`` for
/// the first row, or when the order changes).
final class RowAccess {
    let cursor: any RowCursor
    let types: [ValueType]
    private let layout: RecordLayout
    private typealias Words = (UInt64, UInt64)
    private let words: [Words]
    // `@exclusivity(unchecked)`: one visit, on one thread; no access to these overlaps another
    // (each accessor's lookup is over before the next begins).
    /// The slots asked for in the rows so far, in order; where this row is in them.
    @exclusivity(unchecked) private var order: [Int] = []
    @exclusivity(unchecked) private var position = 0

    init(_ cursor: any RowCursor) {
        self.cursor = cursor
        layout = cursor.layout
        types = layout.names.indices.map { cursor.type(at: $0) }
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
/// before handing it over, so that the accessors need not: a slot's value, when not null, is
/// of the attribute's type.
@_spi(Backend) public protocol RowCursor: AnyObject {
    /// The entity's attribute names, in slot order.
    var layout: RecordLayout { get }
    /// The entity's name, for errors.
    var entityName: String { get }
    /// The slot of the attribute named `name`, if the entity has one.
    func slot(of name: String) -> Int?
    /// The slot's attribute type.
    func type(at slot: Int) -> ValueType
    /// Whether the slot is null in this row.
    func isNull(at slot: Int) -> Bool
    /// A non-null `int`, `date` (microseconds) or `bool` (0 or 1) slot's value.
    func int64(at slot: Int) -> Int64
    /// A non-null `double` slot's value.
    func double(at slot: Int) -> Double
    /// Calls `body` with a non-null `string` (UTF-8), `bytes` or `uuid` (16 bytes) slot's bytes,
    /// valid inside `body` only.
    func withBytes<R>(at slot: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
    /// The slot's value, built.
    func value(at slot: Int) -> Value
}

extension RowCursor {
    public func value(at slot: Int) -> Value {
        if isNull(at: slot) { return .null }
        switch type(at: slot) {
        case .int: return .int(int64(at: slot))
        case .bool: return .bool(int64(at: slot) != 0)
        case .date: return .date(Timestamp(microsecondsSinceEpoch: int64(at: slot)))
        case .double: return .double(double(at: slot))
        case .string: return .string(withBytes(at: slot) { String(decoding: $0, as: UTF8.self) })
        case .bytes: return .bytes(withBytes(at: slot) { Array($0) })
        case .uuid: return withBytes(at: slot) { UUID(bytes: $0) }.map(Value.uuid) ?? .null
        }
    }

    /// `typeMismatch` for a slot asked for as `type`.
    public func mismatch(_ slot: Int, _ type: ValueType) -> StoreError {
        let what = isNull(at: slot) ? "is null" : "holds \(self.type(at: slot))"
        return StoreError(.typeMismatch, "attribute '\(layout.names[slot])' of '\(entityName)' \(what), not \(type)")
    }

    /// `unknownAttribute` for a name the entity does not have.
    public func unknown(_ name: String) -> StoreError {
        StoreError(.unknownAttribute, "entity '\(entityName)' has no attribute '\(name)'")
    }
}

/// A cursor over records: what a backend without a cursor of its own visits (the default
/// ``StorageReader/visit(_:in:_:)``), and what a visit of records already read hands over.
@_spi(Backend) public final class RecordRowCursor: RowCursor {
    public let layout: RecordLayout
    public let types: [ValueType]
    public let entityName: String
    private var values = RecordValues()

    public init(_ entity: EntitySchema) {
        layout = entity.layout
        types = entity.attributes.map(\.type)
        entityName = entity.name
    }

    /// Makes `record` (of the cursor's entity) the current row.
    public func load(_ record: Record) {
        values = record.values(inOrderOf: layout) ?? record.values(in: layout)
    }

    /// Lets go of the current row (a backend refills a record in place only when nothing else
    /// holds its values).
    public func unload() { values = RecordValues() }

    public func slot(of name: String) -> Int? { layout.slot(of: name) }
    public func type(at slot: Int) -> ValueType { types[slot] }
    public func isNull(at slot: Int) -> Bool { values[slot].isNull }

    public func int64(at slot: Int) -> Int64 {
        switch values[slot] {
        case .int(let i): return i
        case .bool(let b): return b ? 1 : 0
        case .date(let t): return t.microsecondsSinceEpoch
        default: return 0
        }
    }

    public func double(at slot: Int) -> Double {
        if case .double(let d) = values[slot] { return d }
        return 0
    }

    public func withBytes<R>(at slot: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        switch values[slot] {
        case .string(var s): return try s.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
        case .bytes(let b): return try b.withUnsafeBytes(body)
        case .uuid(let u): return try withUnsafeBytes(of: u.uuid, body)
        default: return try body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }

    public func value(at slot: Int) -> Value { values[slot] }
}
