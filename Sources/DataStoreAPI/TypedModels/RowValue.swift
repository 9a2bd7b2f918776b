import Foundation

/// A Swift type that an attribute holds, read from a ``Row`` and written into a ``Record``
/// without `Codable`: what the code the `@StoredModel` macro writes (and a hand-written
/// ``RowCodable`` model) calls for each property, so that reading a model is a direct read of
/// each field.
///
/// `Bool`, `Int` and its sized forms, `Double`, `Float`, `String`, `Date`, ``Timestamp``,
/// `UUID`, `Data`, `[UInt8]` and optionals of these conform. An enum backed by one of them
/// conforms by declaring it (`extension Mood: RowValue {}`), as its raw value, which is how
/// ``DataObject`` stores it through `Codable`.
public protocol RowValue: StoreValueConvertible {
    /// The attribute type that holds the value.
    static var storeType: ValueType { get }
    /// Whether the attribute may be null (an optional).
    static var isOptionalStoreValue: Bool { get }
    /// The value of the attribute `name` of `row`.
    /// - Throws: `typeMismatch` when the attribute holds another type, null, or a number out of
    ///   the type's range (the words of the `Codable` decoder), `unknownAttribute`.
    init(row: borrowing Row, attribute name: String) throws
    /// The value to store: ``StoreValueConvertible/storeValue``, except where the `Codable`
    /// encoder refuses a value (a date past the range a store holds throws `invalidValue`).
    func storedValue() throws -> Value
    /// Hands ``storedValue()`` to `sink`: what the code `@StoredModel` writes calls for each
    /// property. `Int64`, `Int`, `Double` and `String` hand over their value without a
    /// ``Value`` around it, and `Data` and `[UInt8]` their bytes where they are
    /// (``StoredFieldSink/appendBytes(_:)``).
    func appendStored<Sink: StoredFieldSink>(to sink: inout Sink) throws
    /// The value of the next field of `reader` (what the code `@StoredModel` writes reads), or
    /// `nil` when the field is not one this type holds as it is (the item is then read by
    /// ``init(row:attribute:)``, which names what is wrong). The default reads nothing: `nil`.
    static func readStored(_ reader: inout StoredFieldReader) -> Self?
}

extension RowValue {
    public static var isOptionalStoreValue: Bool { false }
    @inlinable public static func readStored(_ reader: inout StoredFieldReader) -> Self? { nil }
    @inlinable @inline(__always) public func storedValue() throws -> Value { storeValue }
    @inlinable @inline(__always)
    public func appendStored<Sink: StoredFieldSink>(to sink: inout Sink) throws { try sink.append(storedValue()) }
}

extension Optional: RowValue where Wrapped: RowValue {
    public static var storeType: ValueType { Wrapped.storeType }
    public static var isOptionalStoreValue: Bool { true }

    @inlinable
    public init(row: borrowing Row, attribute name: String) throws {
        self = try row.isNull(name) ? nil : Wrapped(row: row, attribute: name)
    }

    @inlinable public func storedValue() throws -> Value { try self?.storedValue() ?? .null }

    /// A null as `.some(nil)`; `nil` when the field is neither a null nor a `Wrapped`.
    @inlinable
    public static func readStored(_ reader: inout StoredFieldReader) -> Self? {
        if reader.readNull() { return .some(.none) }
        return Wrapped.readStored(&reader).map { .some($0) }
    }

    @inlinable
    public func appendStored<Sink: StoredFieldSink>(to sink: inout Sink) throws {
        if let self { try self.appendStored(to: &sink) } else { try sink.append(.null) }
    }
}

extension Bool: RowValue {
    public static var storeType: ValueType { .bool }
    @inlinable public init(row: borrowing Row, attribute name: String) throws { self = try row.bool(name) }
    @inlinable @inline(__always) public static func readStored(_ reader: inout StoredFieldReader) -> Bool? { reader.readBool() }
}

extension Int64: RowValue {
    public static var storeType: ValueType { .int }
    @inlinable public init(row: borrowing Row, attribute name: String) throws { self = try row.int(name) }
    @inlinable @inline(__always) public static func readStored(_ reader: inout StoredFieldReader) -> Int64? { reader.readInt() }
    @inlinable
    public func appendStored<Sink: StoredFieldSink>(to sink: inout Sink) throws { try sink.appendInt(self) }
}

extension FixedWidthInteger where Self: RowValue {
    /// The stored integer, when this type holds it exactly.
    @inlinable
    static func exactly(_ row: borrowing Row, _ name: String) throws -> Self {
        let stored = try row.int(name)
        guard let exact = Self(exactly: stored) else {
            throw StoreError(.typeMismatch, "attribute '\(name)' holds \(stored), not \(Self.self)")
        }
        return exact
    }

    /// The next field's integer, when this type holds it exactly.
    @inlinable
    public static func readStored(_ reader: inout StoredFieldReader) -> Self? {
        let start = reader.position
        guard let stored = reader.readInt(), let exact = Self(exactly: stored) else {
            reader.rewind(to: start)
            return nil
        }
        return exact
    }
}

extension Int: RowValue {
    public static var storeType: ValueType { .int }
    @inlinable public init(row: borrowing Row, attribute name: String) throws { self = try .exactly(row, name) }
    @inlinable
    public func appendStored<Sink: StoredFieldSink>(to sink: inout Sink) throws { try sink.appendInt(Int64(self)) }
}

extension Int32: RowValue {
    public static var storeType: ValueType { .int }
    @inlinable public init(row: borrowing Row, attribute name: String) throws { self = try .exactly(row, name) }
}

extension Int16: RowValue {
    public static var storeType: ValueType { .int }
    @inlinable public init(row: borrowing Row, attribute name: String) throws { self = try .exactly(row, name) }
}

extension Int8: RowValue {
    public static var storeType: ValueType { .int }
    @inlinable public init(row: borrowing Row, attribute name: String) throws { self = try .exactly(row, name) }
}

extension UInt32: RowValue {
    public static var storeType: ValueType { .int }
    @inlinable public init(row: borrowing Row, attribute name: String) throws { self = try .exactly(row, name) }
}

extension UInt16: RowValue {
    public static var storeType: ValueType { .int }
    @inlinable public init(row: borrowing Row, attribute name: String) throws { self = try .exactly(row, name) }
}

extension UInt8: RowValue {
    public static var storeType: ValueType { .int }
    @inlinable public init(row: borrowing Row, attribute name: String) throws { self = try .exactly(row, name) }
}

extension Double: RowValue {
    public static var storeType: ValueType { .double }
    @inlinable public init(row: borrowing Row, attribute name: String) throws { self = try row.double(name) }
    @inlinable @inline(__always) public static func readStored(_ reader: inout StoredFieldReader) -> Double? { reader.readDouble() }
    @inlinable
    public func appendStored<Sink: StoredFieldSink>(to sink: inout Sink) throws { try sink.appendDouble(self) }
}

extension Float: RowValue {
    public static var storeType: ValueType { .double }
    @inlinable public init(row: borrowing Row, attribute name: String) throws { self = Float(try row.double(name)) }
    @inlinable @inline(__always) public static func readStored(_ reader: inout StoredFieldReader) -> Float? { reader.readDouble().map(Float.init) }
}

extension String: RowValue {
    public static var storeType: ValueType { .string }
    @inlinable public init(row: borrowing Row, attribute name: String) throws { self = try row.string(name) }
    @inlinable @inline(__always) public static func readStored(_ reader: inout StoredFieldReader) -> String? {
        reader.readText().map { String(decoding: $0, as: UTF8.self) }
    }
    @inlinable
    public func appendStored<Sink: StoredFieldSink>(to sink: inout Sink) throws { try sink.appendString(self) }
}

extension Timestamp: RowValue {
    public static var storeType: ValueType { .date }
    @inlinable public init(row: borrowing Row, attribute name: String) throws { self = try row.date(name) }
    @inlinable @inline(__always) public static func readStored(_ reader: inout StoredFieldReader) -> Timestamp? { reader.readDate() }
}

extension Date: RowValue {
    public static var storeType: ValueType { .date }
    @inlinable public init(row: borrowing Row, attribute name: String) throws { self = try row.date(name).date }
    @inlinable @inline(__always) public static func readStored(_ reader: inout StoredFieldReader) -> Date? { reader.readDate()?.date }
    /// Rounded to the microsecond; a date a store cannot hold throws, as the `Codable` encoder does.
    @inlinable public func storedValue() throws -> Value { .date(try Timestamp(self)) }
}

extension UUID: RowValue {
    public static var storeType: ValueType { .uuid }
    @inlinable public init(row: borrowing Row, attribute name: String) throws { self = try row.uuid(name) }
    @inlinable @inline(__always) public static func readStored(_ reader: inout StoredFieldReader) -> UUID? { reader.readUUID() }
}

extension Data: RowValue {
    public static var storeType: ValueType { .bytes }
    @inlinable public init(row: borrowing Row, attribute name: String) throws {
        self = try StoredModelSupport.read(row, name)
    }

    @inlinable @inline(__always) public static func readStored(_ reader: inout StoredFieldReader) -> Data? { reader.readBytes().map { Data($0) } }

    @inlinable
    public func appendStored<Sink: StoredFieldSink>(to sink: inout Sink) throws {
        try withUnsafeBytes { try sink.appendBytes($0) }
    }
}

extension Array: RowValue where Element == UInt8 {
    public static var storeType: ValueType { .bytes }
    @inlinable public init(row: borrowing Row, attribute name: String) throws { self = try row.bytes(name) }
    @inlinable @inline(__always) public static func readStored(_ reader: inout StoredFieldReader) -> [UInt8]? { reader.readBytes().map { Array($0) } }

    @inlinable
    public func appendStored<Sink: StoredFieldSink>(to sink: inout Sink) throws {
        try withUnsafeBytes { try sink.appendBytes($0) }
    }
}

extension RowValue where Self: RawRepresentable, RawValue: RowValue {
    public static var storeType: ValueType { RawValue.storeType }

    /// The case whose raw value the attribute holds.
    /// - Throws: `typeMismatch` naming the value when no case has it.
    @inlinable
    public init(row: borrowing Row, attribute name: String) throws {
        let raw = try RawValue(row: row, attribute: name)
        guard let value = Self(rawValue: raw) else {
            throw StoreError(.typeMismatch, "attribute '\(name)' holds \(raw.storeValue), which is no case of \(Self.self)")
        }
        self = value
    }

    /// The case whose raw value the next field holds; `nil` when no case has it.
    @inlinable
    public static func readStored(_ reader: inout StoredFieldReader) -> Self? {
        let start = reader.position
        guard let raw = RawValue.readStored(&reader), let value = Self(rawValue: raw) else {
            reader.rewind(to: start)
            return nil
        }
        return value
    }
}

/// What the code the `@StoredModel` macro writes calls: the property's type is inferred from
/// the property, so the generated code never spells a type.
public enum StoredModelSupport {
    /// The attribute `name` of `row`, as the type the caller assigns it to.
    @inlinable @inline(__always)
    public static func read<V: RowValue>(_ row: borrowing Row, _ name: String) throws -> V {
        try V(row: row, attribute: name)
    }

    // The common types read by the row's accessors inlined into the model's `init(row:)` (the
    // generic form above calls the type's `init(row:attribute:)`, about 40 instructions more per
    // property). The property's type picks the overload; the results are the generic form's.

    @inlinable @inline(__always)
    public static func read(_ row: borrowing Row, _ name: String) throws -> Int64 { try row.int(name) }

    @inlinable @inline(__always)
    public static func read(_ row: borrowing Row, _ name: String) throws -> Double { try row.double(name) }

    @inlinable @inline(__always)
    public static func read(_ row: borrowing Row, _ name: String) throws -> Bool { try row.bool(name) }

    @inlinable @inline(__always)
    public static func read(_ row: borrowing Row, _ name: String) throws -> String { try row.string(name) }

    @inlinable @inline(__always)
    public static func read(_ row: borrowing Row, _ name: String) throws -> Data {
        let bytes = try row.field(name, .bytes).pointee.bytes
        return bytes.isEmpty ? Data() : Data(bytes: bytes.baseAddress.unsafelyUnwrapped, count: bytes.count)
    }

    // The same, for a value read into a local before any of the model's properties is set (set
    // as they were read, the finished model was copied out and the copy in `self` released: a
    // retain and a release of each string and `Data` per row). The property, as a function of
    // the model that is never called, gives the local its type, so that the generated code still
    // spells none: a type named in the model's scope (a sibling in an enclosing type) is not
    // visible from the extension the macro writes. Each reads as the overload above of its type.

    @inlinable @inline(__always)
    public static func read<Model, V: RowValue>(_ row: borrowing Row, _ name: String, as property: (Model) -> V) throws -> V {
        try read(row, name)
    }

    /// The next field of `reader` as the property's type (``RowValue/readStored(_:)``), or
    /// `nil`: what the model's `init?(storedFields:)` reads each property with.
    @inlinable @inline(__always)
    public static func readStored<Model, V: RowValue>(_ reader: inout StoredFieldReader, as property: (Model) -> V) -> V? {
        V.readStored(&reader)
    }

    @inlinable @inline(__always)
    public static func read<Model>(_ row: borrowing Row, _ name: String, as property: (Model) -> Int64) throws -> Int64 {
        try read(row, name)
    }

    @inlinable @inline(__always)
    public static func read<Model>(_ row: borrowing Row, _ name: String, as property: (Model) -> Double) throws -> Double {
        try read(row, name)
    }

    @inlinable @inline(__always)
    public static func read<Model>(_ row: borrowing Row, _ name: String, as property: (Model) -> Bool) throws -> Bool {
        try read(row, name)
    }

    @inlinable @inline(__always)
    public static func read<Model>(_ row: borrowing Row, _ name: String, as property: (Model) -> String) throws -> String {
        try read(row, name)
    }

    @inlinable @inline(__always)
    public static func read<Model>(_ row: borrowing Row, _ name: String, as property: (Model) -> Data) throws -> Data {
        try read(row, name)
    }

    /// The attribute that holds the property at `keyPath`.
    public static func attribute<Root, V: RowValue>(_ name: String, _ keyPath: KeyPath<Root, V>) -> Attribute {
        Attribute(name, V.storeType, optional: V.isOptionalStoreValue)
    }

    /// The attribute that holds the property at `keyPath`, whose declaration gives it a value:
    /// the attribute's default, which an upgrade that adds the attribute gives existing items.
    /// - Throws: what storing the value throws (a date a store cannot hold).
    public static func attribute<Root, V: RowValue>(_ name: String, _ keyPath: KeyPath<Root, V>,
                                                    default value: V) throws -> Attribute {
        let stored = try value.storedValue()
        return Attribute(name, V.storeType, optional: V.isOptionalStoreValue, default: stored.isNull ? nil : stored)
    }
}

/// A model's attribute names in its declaration order, made once per model type: the records its
/// ``StoredRecordBuilder`` builds share it, so that a store whose entity has the same names in
/// the same order takes the record's values as they are (no lookup by name, no copy).
public final class StoredModelLayout: Sendable {
    let layout: RecordLayout

    /// The layout of `names`, in order.
    public init(_ names: [String]) { layout = RecordLayout(names) }

    /// How many names the layout has.
    public var count: Int { layout.names.count }
}

/// Builds a model's record one value at a time, in its layout's order, into storage allocated
/// once: what the code `@StoredModel` generates writes, and what a hand-written
/// ``RowCodable/record()`` may use for the same speed. A store whose entity has the same names
/// in the same order takes the values as they are (no lookup by name, no copy).
///
/// ```swift
/// private static let layout = StoredModelLayout(["id", "title"])
/// func record() throws -> Record {
///     var builder = StoredRecordBuilder(Self.layout)
///     try builder.append(id)
///     try builder.append(title)
///     return try builder.record()
/// }
/// ```
public struct StoredRecordBuilder {
    @usableFromInline let layout: StoredModelLayout
    @usableFromInline let storage: ValueStorage
    @usableFromInline let capacity: Int
    @usableFromInline var appended = 0

    /// A builder of a record of `layout`.
    @inlinable
    public init(_ layout: StoredModelLayout) {
        self.layout = layout
        capacity = layout.count
        storage = ValueStorage.make(capacity: capacity)
    }

    /// Appends the next attribute's value (``RowValue/storedValue()``).
    /// - Throws: what storing the value throws (a date a store cannot hold).
    @inlinable
    public mutating func append<V: RowValue>(_ value: V) throws {
        let stored = try value.storedValue()
        // One more value than names is counted (for `record()` to report), never written past
        // the storage.
        if appended < capacity {
            storage.withUnsafeMutablePointers { initialized, base in
                (base + initialized.pointee).initialize(to: stored)
                initialized.pointee += 1
            }
        }
        appended += 1
    }

    /// The record of the values appended, one per name of the layout.
    /// - Throws: `invalidArgument` when as many values as names were not appended.
    public func record() throws -> Record {
        guard appended == capacity else {
            throw StoreError(.invalidArgument, "a record of \(capacity) attributes (\(layout.layout.names.joined(separator: ", "))) "
                + "was given \(appended) values")
        }
        return Record(layout: layout.layout, values: RecordValues(storage: storage, start: 0, count: capacity))
    }
}
