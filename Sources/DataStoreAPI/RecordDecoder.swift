import Foundation

/// Decodes a flat `Decodable` model from a ``Record``.
public enum RecordDecoder {
    /// - Throws: `typeMismatch` naming the attribute when a stored value does not fit the
    ///   property's type.
    public static func decode<T: Decodable>(_ type: T.Type, from record: Record) throws -> T {
        try T(from: RecordValueDecoder(record: record, single: nil, key: nil))
    }

    static func convert<T: Decodable>(_ value: Value, to type: T.Type, key: String) throws -> T {
        if let native = native(value, as: type) as? T { return native }
        if value.isNull {
            throw StoreError(.typeMismatch, "attribute '\(key)' is null but \(T.self) is not optional")
        }
        return try T(from: RecordValueDecoder(record: Record(), single: value, key: key))
    }

    private static func native(_ value: Value, as type: Any.Type) -> Any? {
        switch value {
        case .null: return nil
        case .bool(let b): return type == Bool.self ? b : nil
        case .int(let i):
            switch type {
            case is Int.Type: return Int(exactly: i)
            case is Int64.Type: return i
            case is Int32.Type: return Int32(exactly: i)
            case is Int16.Type: return Int16(exactly: i)
            case is Int8.Type: return Int8(exactly: i)
            case is UInt.Type: return UInt(exactly: i)
            case is UInt64.Type: return UInt64(exactly: i)
            case is UInt32.Type: return UInt32(exactly: i)
            case is UInt16.Type: return UInt16(exactly: i)
            case is UInt8.Type: return UInt8(exactly: i)
            default: return nil
            }
        case .double(let d):
            if type == Double.self { return d }
            return type == Float.self ? Float(d) : nil
        case .string(let s): return type == String.self ? s : nil
        case .bytes(let b):
            if type == Data.self { return Data(b) }
            return type == [UInt8].self ? b : nil
        case .date(let t): return type == Date.self ? t.date : nil
        case .uuid(let u): return type == UUID.self ? u : nil
        }
    }
}

struct RecordValueDecoder: Decoder {
    let record: Record
    let single: Value?
    let key: String?
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        if let key {
            throw StoreError(.typeMismatch, "attribute '\(key)' holds a single value, not a nested model")
        }
        return KeyedDecodingContainer(KeyedRecordDecoder<Key>(record: record))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw StoreError(.typeMismatch, "attribute '\(key ?? "?")' holds a single value, not a collection")
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleValueRecordDecoder(value: single ?? .null, key: key ?? "?")
    }
}

struct KeyedRecordDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let record: Record
    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] { record.values.keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { record.values[key.stringValue] != nil }

    func decodeNil(forKey key: Key) throws -> Bool { record[key.stringValue].isNull }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try RecordDecoder.convert(record[key.stringValue], to: type, key: key.stringValue)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type,
                                               forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        throw StoreError(.typeMismatch, "attribute '\(key.stringValue)' holds a single value, not a nested model")
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw StoreError(.typeMismatch, "attribute '\(key.stringValue)' holds a single value, not a collection")
    }

    func superDecoder() throws -> any Decoder { RecordValueDecoder(record: record, single: nil, key: nil) }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        RecordValueDecoder(record: record, single: record[key.stringValue], key: key.stringValue)
    }
}

struct SingleValueRecordDecoder: SingleValueDecodingContainer {
    let value: Value
    let key: String
    var codingPath: [any CodingKey] { [] }

    func decodeNil() -> Bool { value.isNull }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try RecordDecoder.convert(value, to: type, key: key)
    }
}
