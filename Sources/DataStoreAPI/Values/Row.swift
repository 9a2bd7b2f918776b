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
    unowned(unsafe) let cursor: any RowCursor

    @_spi(Backend) public init(_ cursor: any RowCursor) {
        self.cursor = cursor
    }

    /// The entity's attribute names, in schema order.
    public var attributeNames: [String] { cursor.layout.names }

    /// The slot of an attribute, or `unknownAttribute`.
    func slot(_ name: String) throws(StoreError) -> Int {
        guard let slot = cursor.layout.slot(of: name) else {
            throw StoreError(.unknownAttribute, "entity '\(cursor.entityName)' has no attribute '\(name)'")
        }
        return slot
    }

    /// The slot of a non-null attribute of `type`, or the error naming what it holds.
    func slot(_ name: String, _ type: ValueType) throws(StoreError) -> Int {
        let slot = try slot(name)
        guard cursor.types[slot] == type, !cursor.isNull(at: slot) else { throw cursor.mismatch(slot, type) }
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
        try withStored(try slot(name, .string), body)
    }

    /// Calls `body` with a `bytes` attribute's bytes where the store keeps them (valid inside
    /// `body` only): nothing is copied.
    public func withBytes<R>(_ name: String, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try withStored(try slot(name, .bytes), body)
    }

    private func withStored<R>(_ slot: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        // The cursor's closure neither throws nor is generic (it is a class's method, called
        // through its table): the result and the error travel around it.
        var outcome: Result<R, any Error>?
        cursor.withBytes(at: slot) { bytes in outcome = Result { try body(bytes) } }
        return try outcome.unsafelyUnwrapped.get()
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

/// What a backend implements to hand rows to a visit without building records: the current
/// row's fields by slot (the entity's attribute order), read where the backend keeps them.
/// The backend checks each row as a decode would (types, nulls of required attributes, UTF-8)
/// before handing it over, so that the accessors need not: a slot's value, when not null, is
/// of the attribute's type.
@_spi(Backend) public protocol RowCursor: AnyObject {
    /// The entity's attribute names, in slot order.
    var layout: RecordLayout { get }
    /// Each slot's attribute type.
    var types: [ValueType] { get }
    /// The entity's name, for errors.
    var entityName: String { get }
    /// Whether the slot is null in this row.
    func isNull(at slot: Int) -> Bool
    /// A non-null `int`, `date` (microseconds) or `bool` (0 or 1) slot's value.
    func int64(at slot: Int) -> Int64
    /// A non-null `double` slot's value.
    func double(at slot: Int) -> Double
    /// Calls `body` with a non-null `string` (UTF-8), `bytes` or `uuid` (16 bytes) slot's bytes,
    /// valid inside `body` only.
    func withBytes(at slot: Int, _ body: (UnsafeRawBufferPointer) -> Void)
    /// The slot's value, built.
    func value(at slot: Int) -> Value
}

extension RowCursor {
    public func value(at slot: Int) -> Value {
        if isNull(at: slot) { return .null }
        switch types[slot] {
        case .int: return .int(int64(at: slot))
        case .bool: return .bool(int64(at: slot) != 0)
        case .date: return .date(Timestamp(microsecondsSinceEpoch: int64(at: slot)))
        case .double: return .double(double(at: slot))
        case .string: return .string(withBytes(at: slot) { String(decoding: $0, as: UTF8.self) })
        case .bytes: return .bytes(withBytes(at: slot) { Array($0) })
        case .uuid: return withBytes(at: slot) { UUID(bytes: $0) }.map(Value.uuid) ?? .null
        }
    }

    /// The result of a closure that takes bytes, around ``withBytes(at:_:)``'s.
    @inlinable
    public func withBytes<R>(at slot: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        var result: R?
        withBytes(at: slot) { result = body($0) }
        return result.unsafelyUnwrapped
    }

    /// `typeMismatch` for a slot asked for as `type`.
    public func mismatch(_ slot: Int, _ type: ValueType) -> StoreError {
        let what = isNull(at: slot) ? "is null" : "holds \(types[slot])"
        return StoreError(.typeMismatch, "attribute '\(layout.names[slot])' of '\(entityName)' \(what), not \(type)")
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

    public func withBytes(at slot: Int, _ body: (UnsafeRawBufferPointer) -> Void) {
        switch values[slot] {
        case .string(var s): s.withUTF8 { body(UnsafeRawBufferPointer($0)) }
        case .bytes(let b): b.withUnsafeBytes(body)
        case .uuid(let u): withUnsafeBytes(of: u.uuid, body)
        default: body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }

    public func value(at slot: Int) -> Value { values[slot] }
}
