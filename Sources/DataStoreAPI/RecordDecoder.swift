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
    var allKeys: [Key] { record.attributeNames.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { record.contains(key.stringValue) }

    func decodeNil(forKey key: Key) throws -> Bool { record[key.stringValue].isNull }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try RecordDecoder.convert(record[key.stringValue], to: type, key: key.stringValue)
    }

    // The concrete overloads read the value without the dynamic casts of the generic path.

    private func mismatch(_ key: Key, _ type: Any.Type) -> StoreError {
        StoreError(.typeMismatch, "attribute '\(key.stringValue)' holds \(record[key.stringValue]), not \(type)")
    }

    private func integer<I: FixedWidthInteger>(_ type: I.Type, _ key: Key) throws -> I {
        guard case .int(let i) = record[key.stringValue], let exact = I(exactly: i) else { throw mismatch(key, type) }
        return exact
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        guard case .string(let s) = record[key.stringValue] else { throw mismatch(key, type) }
        return s
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        guard case .bool(let b) = record[key.stringValue] else { throw mismatch(key, type) }
        return b
    }

    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        guard case .double(let d) = record[key.stringValue] else { throw mismatch(key, type) }
        return d
    }

    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { Float(try decode(Double.self, forKey: key)) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try integer(type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try integer(type, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try integer(type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try integer(type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try integer(type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try integer(type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try integer(type, key) }

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
