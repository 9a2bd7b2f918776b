import Foundation

/// Encodes a flat `Encodable` model into a ``Record``.
public enum RecordEncoder {
    /// The record of `object`'s properties.
    /// - Throws: `invalidValue` naming the property when a property has a type the store cannot
    ///   hold (a nested struct, an array other than `[UInt8]`, an out-of-range unsigned integer).
    public static func encode<T: Encodable>(_ object: T) throws -> Record {
        let box = RecordBox()
        try object.encode(to: ValueEncoder(box: box, key: nil))
        // The properties in the order the model encodes them: the schema's order when the
        // schema was derived from the type, so that the write takes the values as they are
        // (``Record/values(inOrderOf:)``) instead of looking each name up in a dictionary.
        return Record(pairs: box.values)
    }

    /// Converts a Swift value the store holds natively; `nil` when it is not one.
    static func primitive(_ value: Any) throws -> Value? {
        switch value {
        case let v as Value: return v
        case let b as Bool: return .bool(b)
        case let i as Int: return .int(Int64(i))
        case let i as Int64: return .int(i)
        case let i as Int32: return .int(Int64(i))
        case let i as Int16: return .int(Int64(i))
        case let i as Int8: return .int(Int64(i))
        case let i as UInt8: return .int(Int64(i))
        case let i as UInt16: return .int(Int64(i))
        case let i as UInt32: return .int(Int64(i))
        case let i as UInt:
            guard let exact = Int64(exactly: i) else { throw tooLarge(i) }
            return .int(exact)
        case let i as UInt64:
            guard let exact = Int64(exactly: i) else { throw tooLarge(i) }
            return .int(exact)
        case let d as Double: return .double(d)
        case let f as Float: return .double(Double(f))
        case let s as String: return .string(s)
        case let d as Date: return .date(try Timestamp(d))
        case let u as UUID: return .uuid(u)
        case let d as Data: return .bytes(Array(d))
        // Exactly [UInt8]: an empty array of any element type casts to [UInt8] too.
        case let b as [UInt8] where type(of: value) == [UInt8].self: return .bytes(b)
        default: return nil
        }
    }

    /// The value a non-primitive property is stored as: what it encodes as a single value (an
    /// enum's raw value), or, for an array, a dictionary or a nested `Codable` type, its JSON
    /// text (``StructuredValue``).
    static func single<T: Encodable>(_ value: T, property: String) throws -> Value {
        let inner = RecordBox()
        do {
            try value.encode(to: ValueEncoder(box: inner, key: property))
        } catch where inner.isStructured {
            return try StructuredValue.encode(value, property: property)
        }
        if inner.isStructured { return try StructuredValue.encode(value, property: property) }
        guard let single = inner.single else {
            throw StoreError(.invalidValue, "property '\(property)' of type \(T.self) cannot be stored: it encodes "
                + "nothing")
        }
        return single
    }

    private static func tooLarge(_ value: some BinaryInteger) -> StoreError {
        StoreError(.invalidValue, "unsigned value \(value) does not fit the store's 64-bit signed int")
    }
}

final class RecordBox {
    /// The properties as encoded, in order (a name encoded twice: the last counts, as in a
    /// record built from a literal).
    var values: [(String, Value)] = []
    var single: Value?
    /// Whether the value asked for a keyed or unkeyed container: it is stored as JSON.
    var isStructured = false
}

/// The encoder for one model (keyed) or one property value (single value).
struct ValueEncoder: Encoder {
    let box: RecordBox
    let key: String?
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if key != nil { box.isStructured = true }
        return KeyedEncodingContainer(KeyedValueEncoder<Key>(box: box, nestedUnder: key))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if key != nil { box.isStructured = true }
        return UnsupportedContainer(property: key)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValueEncoder(box: box)
    }
}

struct KeyedValueEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let box: RecordBox
    let nestedUnder: String?
    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil(forKey key: Key) throws { try store(.null, key) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        if let nestedUnder {
            throw StoreError(.invalidValue, "property '\(nestedUnder)' is a nested type; the store holds flat "
                + "models only")
        }
        // The common non-primitive types by their metatype (T is exactly the type tested, so the
        // bit casts are identities): the cascade of dynamic casts in `primitive` was a fifth of a
        // typed insert's instructions for a model with one `[UInt8]` property.
        if T.self == [UInt8].self { return try store(.bytes(unsafeBitCast(value, to: [UInt8].self)), key) }
        if T.self == Data.self { return try store(.bytes(Array(unsafeBitCast(value, to: Data.self))), key) }
        if T.self == UUID.self { return try store(.uuid(unsafeBitCast(value, to: UUID.self)), key) }
        if T.self == Date.self { return try store(.date(try Timestamp(unsafeBitCast(value, to: Date.self))), key) }
        if let primitive = try RecordEncoder.primitive(value) {
            return try store(primitive, key)
        }
        try store(try RecordEncoder.single(value, property: key.stringValue), key)
    }

    private func store(_ value: Value, _ key: Key) throws {
        box.values.append((key.stringValue, value))
    }

    // The concrete overloads store the value without the dynamic casts of the generic path.

    private func unsigned<I: FixedWidthInteger>(_ value: I, _ key: Key) throws {
        guard let exact = Int64(exactly: value) else {
            throw StoreError(.invalidValue, "property '\(key.stringValue)': \(value) does not fit the store's 64-bit int")
        }
        try store(.int(exact), key)
    }

    mutating func encode(_ value: String, forKey key: Key) throws { try store(.string(value), key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { try store(.bool(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try store(.double(value), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try store(.double(Double(value)), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try store(.int(Int64(value)), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try store(.int(Int64(value)), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try store(.int(Int64(value)), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try store(.int(Int64(value)), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try store(.int(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try unsigned(value, key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try store(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try store(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try store(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try unsigned(value, key) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type,
                                                        forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(KeyedValueEncoder<NestedKey>(box: RecordBox(), nestedUnder: key.stringValue))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        UnsupportedContainer(property: key.stringValue)
    }

    mutating func superEncoder() -> any Encoder { ValueEncoder(box: box, key: nil) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { ValueEncoder(box: RecordBox(), key: key.stringValue) }
}

struct SingleValueEncoder: SingleValueEncodingContainer {
    let box: RecordBox
    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil() throws { box.single = .null }

    mutating func encode<T: Encodable>(_ value: T) throws {
        if let primitive = try RecordEncoder.primitive(value) {
            box.single = primitive
            return
        }
        box.single = try RecordEncoder.single(value, property: "\(T.self)")
    }
}

/// Arrays and other unkeyed values cannot be stored; every call throws.
struct UnsupportedContainer: UnkeyedEncodingContainer {
    let property: String?
    var codingPath: [any CodingKey] { [] }
    var count: Int { 0 }

    private func fail() -> StoreError {
        StoreError(.invalidValue, "property '\(property ?? "?")' is a collection; the store holds flat models "
            + "(use [UInt8] or Data for bytes)")
    }

    mutating func encodeNil() throws { throw fail() }
    mutating func encode<T: Encodable>(_ value: T) throws { throw fail() }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type)
        -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(KeyedValueEncoder<NestedKey>(box: RecordBox(), nestedUnder: property ?? "?"))
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
    mutating func superEncoder() -> any Encoder { ValueEncoder(box: RecordBox(), key: property) }
}
