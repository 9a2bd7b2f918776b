import Foundation

/// Derives an entity schema from a `Decodable` type by decoding it once from a probe that
/// notes each property's name, type and optionality.
enum SchemaProbe {
    static func entitySchema<T: DataObject>(of type: T.Type) throws -> EntitySchema {
        let log = ProbeLog()
        _ = try T(from: ProbeDecoder(log: log))
        return EntitySchema(T.entityName, primaryKey: T.primaryKey, attributes: log.attributes)
    }

    /// The value type and a placeholder for a property type the store holds natively.
    static func placeholder(for type: Any.Type) -> (ValueType, Any)? {
        switch type {
        case is Bool.Type: return (.bool, false)
        case is Int.Type: return (.int, Int(0))
        case is Int64.Type: return (.int, Int64(0))
        case is Int32.Type: return (.int, Int32(0))
        case is Int16.Type: return (.int, Int16(0))
        case is Int8.Type: return (.int, Int8(0))
        case is UInt.Type: return (.int, UInt(0))
        case is UInt64.Type: return (.int, UInt64(0))
        case is UInt32.Type: return (.int, UInt32(0))
        case is UInt16.Type: return (.int, UInt16(0))
        case is UInt8.Type: return (.int, UInt8(0))
        case is Double.Type: return (.double, Double(0))
        case is Float.Type: return (.double, Float(0))
        case is String.Type: return (.string, "")
        case is Data.Type: return (.bytes, Data())
        case is [UInt8].Type: return (.bytes, [UInt8]())
        case is Date.Type: return (.date, Date(timeIntervalSince1970: 0))
        case is UUID.Type: return (.uuid, UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        default: return nil
        }
    }
}

extension SchemaProbe {
    /// How a property of a type the store does not hold natively is stored, and a value of it
    /// when the probe can make one: an enum (or any type that decodes one value) as that value's
    /// type; an array, a set, a dictionary or a nested `Codable` type as JSON text in a string
    /// (``StructuredValue``).
    /// - Throws: `invalidArgument` naming the property when its type decodes nothing the store holds.
    static func shape<T: Decodable>(of type: T.Type, property: String) throws -> (ValueType, T?) {
        if let cases = T.self as? any CaseIterable.Type, let first = firstCase(cases) as? T, let encodable = first
            as? any Encodable {
            let stored = try RecordEncoder.single(encodable, property: property)
            if let valueType = stored.type { return (valueType, first) }
        }
        let shape = ShapeLog()
        let value = try? T(from: ShapeDecoder(log: shape))
        if shape.isStructured { return (.string, value) }
        guard let single = shape.single else {
            throw StoreError(.invalidArgument, "property '\(property)' of type \(T.self) holds nothing the store can "
                + "keep (a Bool, number, String, Data, Date, UUID, an enum of these, an array, dictionary or nested "
                + "Codable type of them); declare entitySchema() explicitly")
        }
        return (single, value)
    }

    private static func firstCase<C: CaseIterable>(_ type: C.Type) -> Any? { type.allCases.first }
}

/// What a property's type asked of the probe's decoder.
final class ShapeLog {
    /// The type of the single value it decoded, when it decoded one.
    var single: ValueType?
    /// Whether it asked for a keyed or unkeyed container.
    var isStructured = false
}

/// A decoder that makes a placeholder value of any type built of the values the store holds,
/// noting what it was asked for.
struct ShapeDecoder: Decoder {
    let log: ShapeLog
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        log.isStructured = true
        return KeyedDecodingContainer(PlaceholderContainer<Key>())
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        log.isStructured = true
        return EmptyUnkeyedContainer()
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { ShapeSingleValue(log: log) }

    /// A placeholder of `T`, or an error when the store cannot hold it.
    static func placeholder<T: Decodable>(_ type: T.Type, log: ShapeLog) throws -> T {
        if let (valueType, value) = SchemaProbe.placeholder(for: T.self), let value = value as? T {
            if log.single == nil { log.single = valueType }
            return value
        }
        return try T(from: ShapeDecoder(log: log))
    }
}

struct ShapeSingleValue: SingleValueDecodingContainer {
    let log: ShapeLog
    var codingPath: [any CodingKey] { [] }
    func decodeNil() -> Bool { false }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try ShapeDecoder.placeholder(type, log: log) }
}

/// The keyed container of a placeholder: every key present, every value a placeholder.
struct PlaceholderContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] { [] }
    func contains(_ key: Key) -> Bool { true }
    func decodeNil(forKey key: Key) throws -> Bool { false }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try ShapeDecoder.placeholder(type, log: ShapeLog())
    }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? { nil }
    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type,
                                               forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        KeyedDecodingContainer(PlaceholderContainer<NestedKey>())
    }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { EmptyUnkeyedContainer() }
    func superDecoder() throws -> any Decoder { ShapeDecoder(log: ShapeLog()) }
    func superDecoder(forKey key: Key) throws -> any Decoder { ShapeDecoder(log: ShapeLog()) }
}

/// The unkeyed container of a placeholder: empty.
struct EmptyUnkeyedContainer: UnkeyedDecodingContainer {
    var codingPath: [any CodingKey] { [] }
    var count: Int? { 0 }
    var isAtEnd: Bool { true }
    var currentIndex: Int { 0 }
    private func end() -> DecodingError {
        DecodingError.valueNotFound(Any.self, .init(codingPath: [], debugDescription: "a placeholder is empty"))
    }
    mutating func decodeNil() throws -> Bool { throw end() }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { throw end() }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type)
        throws -> KeyedDecodingContainer<NestedKey> { throw end() }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { throw end() }
    mutating func superDecoder() throws -> any Decoder { throw end() }
}

final class ProbeLog {
    var attributes: [Attribute] = []
}

struct ProbeDecoder: Decoder {
    let log: ProbeLog
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(ProbeContainer<Key>(log: log))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw ProbeContainer<AnyKey>.unsupported("?") }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw ProbeContainer<AnyKey>.unsupported("?")
    }
}

struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

struct ProbeContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let log: ProbeLog
    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] { [] }

    static func unsupported(_ name: String) -> StoreError {
        StoreError(.invalidArgument, "property '\(name)' has a type the schema cannot be derived for; declare "
            + "entitySchema() explicitly")
    }

    func contains(_ key: Key) -> Bool { true }
    func decodeNil(forKey key: Key) throws -> Bool { false }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        if let (valueType, placeholder) = SchemaProbe.placeholder(for: T.self), let value = placeholder as? T {
            log.attributes.append(Attribute(key.stringValue, valueType))
            return value
        }
        let (valueType, value) = try SchemaProbe.shape(of: T.self, property: key.stringValue)
        guard let value else {
            throw StoreError(.invalidArgument, "property '\(key.stringValue)' of type \(T.self) is stored as its "
                + "\(valueType.rawValue), but the schema probe cannot make one: make the type CaseIterable (an enum) "
                + "or the property optional, or declare entitySchema() explicitly")
        }
        log.attributes.append(Attribute(key.stringValue, valueType))
        return value
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        try probeOptional(type, key)
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try probeOptional(type, key) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try probeOptional(type, key) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try probeOptional(type, key) }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try probeOptional(type, key) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try probeOptional(type, key) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try probeOptional(type, key) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try probeOptional(type, key) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try probeOptional(type, key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try probeOptional(type, key) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try probeOptional(type, key) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try probeOptional(type, key) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try probeOptional(type, key) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try probeOptional(type, key) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try probeOptional(type, key) }

    private func probeOptional<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T? {
        let valueType = try SchemaProbe.placeholder(for: T.self)?.0
            ?? SchemaProbe.shape(of: T.self, property: key.stringValue).0
        log.attributes.append(Attribute(key.stringValue, valueType, optional: true))
        return nil
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type,
                                               forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        throw Self.unsupported(key.stringValue)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw Self.unsupported(key.stringValue)
    }

    func superDecoder() throws -> any Decoder { ProbeDecoder(log: log) }
    func superDecoder(forKey key: Key) throws -> any Decoder { throw Self.unsupported(key.stringValue) }
}
