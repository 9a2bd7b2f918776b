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
        guard let (valueType, placeholder) = SchemaProbe.placeholder(for: T.self), let value = placeholder as? T else {
            throw Self.unsupported(key.stringValue)
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

    private func probeOptional<T>(_ type: T.Type, _ key: Key) throws -> T? {
        guard let (valueType, _) = SchemaProbe.placeholder(for: T.self) else {
            throw Self.unsupported(key.stringValue)
        }
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
