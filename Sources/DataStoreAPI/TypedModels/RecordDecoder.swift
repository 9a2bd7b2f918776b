import Foundation

/// Decodes a flat `Decodable` model from a ``Record``.
public enum RecordDecoder {
    /// The model of type `type` that `record` holds.
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
        do {
            return try T(from: RecordValueDecoder(record: Record(), single: value, key: key))
        } catch is StructuredValue.Requested {
            return try StructuredValue.decode(T.self, from: value, property: key)
        }
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

/// The decoder of one record (or of one value, `single`, for a property's own `init(from:)`).
///
/// A class, so that it travels as one reference: as a struct it did not fit an existential's
/// inline buffer, and every decoded record allocated a box for it beside the keyed container's
/// cursor; now the cursor is part of it. The cursor knows where the next key's value probably
/// is: a synthesized `init(from:)` asks for its keys in declaration order, which is the schema's
/// order when the schema was derived from the type, so the slot after the last one found is
/// tried (and that one again: an optional's key is asked for up to three times) before the
/// layout's dictionary.
///
/// A typed fetch decodes all its rows with one decoder (``RecordRowDecoder``): each row is
/// loaded into it in turn, and the keyed container it hands out is kept for the next row. A
/// new decoder and container per row would cost a fifth of a typed fetch's work (the
/// container's two generic types looked up, its box allocated, both freed again).
final class RecordValueDecoder: Decoder {
    private(set) var record: Record
    let single: Value?
    let key: String?
    private var layout: RecordLayout?
    private var values: RecordValues
    private var next = 0
    /// The keyed container made for the rows before, and its key type's identity: a
    /// `ReusedContainer<Key>` exactly when `containerKey` is `ObjectIdentifier(Key.self)`.
    private var reused: AnyObject?
    private var containerKey: ObjectIdentifier?
    private let reusesContainers: Bool
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(record: Record, single: Value?, key: String?, reusesContainers: Bool = false) {
        self.single = single
        self.key = key
        self.record = Record()
        values = RecordValues()
        self.reusesContainers = reusesContainers
        load(record)
    }

    /// Makes `record` the one that is decoded; the cursor starts again.
    func load(_ record: Record) {
        self.record = record
        layout = single == nil ? record.storedLayout : nil
        // A compact record's values are read by slot (``stored(_:)``), one field at a time.
        values = record.compactRow == nil ? layout.flatMap { record.values(inOrderOf: $0) } ?? RecordValues() : RecordValues()
        next = 0
    }

    /// Lets go of the record (a backend refills a record's storage in place only when nothing
    /// else holds it) and, with `containers`, of the kept container, which holds this decoder.
    func unload(containers: Bool) {
        record = Record()
        values = RecordValues()
        layout = nil
        if containers { (reused, containerKey) = (nil, nil) }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        if key != nil { throw StructuredValue.Requested() }
        if containerKey == ObjectIdentifier(type), let reused {
            return unsafeDowncast(reused, to: ReusedContainer<Key>.self).container
        }
        let container = KeyedDecodingContainer(KeyedRecordDecoder<Key>(decoder: self))
        if reusesContainers { (reused, containerKey) = (ReusedContainer(container), ObjectIdentifier(type)) }
        return container
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        if key != nil { throw StructuredValue.Requested() }
        throw StoreError(.typeMismatch, "a record is not a collection")
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleValueRecordDecoder(value: single ?? .null, key: key ?? "?")
    }

    /// The value of the attribute, or nil when the record does not name it.
    func value(ifPresent name: String) -> Value? {
        guard let layout else { return record.value(ifPresent: name) }
        let names = layout.names
        let next = self.next
        if next < names.count, names[next] == name {
            self.next = next + 1
            return stored(next)
        }
        if next > 0, next - 1 < names.count, names[next - 1] == name { return stored(next - 1) }
        guard let slot = layout.slot(of: name) else { return nil }
        self.next = slot + 1
        return stored(slot)
    }

    /// The loaded record's value at `slot` of its layout.
    @inline(__always)
    private func stored(_ slot: Int) -> Value {
        values.count > 0 ? values[slot] : record.value(atSlot: slot)
    }
}

/// A keyed container kept by a ``RecordValueDecoder`` for its next rows.
private final class ReusedContainer<Key: CodingKey> {
    let container: KeyedDecodingContainer<Key>
    init(_ container: KeyedDecodingContainer<Key>) { self.container = container }
}

/// Decodes the rows of one fetch, one after the other, with one decoder.
///
/// Each row's model must be complete when ``decode(_:)`` returns, as it is for any model whose
/// `init(from:)` does not keep its decoder or containers: they read the row that is loaded.
///
/// A class, whose `deinit` lets go of the kept container (which holds the decoder), so that the
/// inlinable typed fetches can make one without inlining a `deinit` of this module.
@usableFromInline
final class RecordRowDecoder<T: Decodable> {
    private let decoder: RecordValueDecoder

    @usableFromInline
    init() {
        decoder = RecordValueDecoder(record: Record(), single: nil, key: nil, reusesContainers: true)
    }

    @usableFromInline
    func decode(_ record: Record) throws -> T {
        decoder.load(record)
        defer { decoder.unload(containers: false) }
        return try T(from: decoder)
    }

    deinit { decoder.unload(containers: true) }
}

struct KeyedRecordDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    private let decoder: RecordValueDecoder
    var record: Record { decoder.record }
    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] { record.attributeNames.compactMap { Key(stringValue: $0) } }

    init(decoder: RecordValueDecoder) {
        self.decoder = decoder
    }

    private func value(ifPresent key: Key) -> Value? { decoder.value(ifPresent: key.stringValue) }

    private func value(_ key: Key) -> Value { value(ifPresent: key) ?? .null }

    func contains(_ key: Key) -> Bool { value(ifPresent: key) != nil }

    func decodeNil(forKey key: Key) throws -> Bool { value(key).isNull }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        let value = value(key)
        // The common non-primitive types, without the dynamic casts of the general path (T is
        // exactly the type tested, so the bit casts are identities).
        switch value {
        case .bytes(let b) where T.self == [UInt8].self: return unsafeBitCast(b, to: T.self)
        case .bytes(let b) where T.self == Data.self: return unsafeBitCast(Data(b), to: T.self)
        case .uuid(let u) where T.self == UUID.self: return unsafeBitCast(u, to: T.self)
        case .date(let t) where T.self == Date.self: return unsafeBitCast(t.date, to: T.self)
        default: return try RecordDecoder.convert(value, to: type, key: key.stringValue)
        }
    }

    // The concrete overloads read the value without the dynamic casts of the generic path.

    private func mismatch(_ key: Key, _ type: Any.Type) -> StoreError {
        StoreError(.typeMismatch, "attribute '\(key.stringValue)' holds \(record[key.stringValue]), not \(type)")
    }

    private func integer<I: FixedWidthInteger>(_ type: I.Type, _ key: Key) throws -> I {
        guard case .int(let i) = value(key), let exact = I(exactly: i) else { throw mismatch(key, type) }
        return exact
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        guard case .string(let s) = value(key) else { throw mismatch(key, type) }
        return s
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        guard case .bool(let b) = value(key) else { throw mismatch(key, type) }
        return b
    }

    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        guard case .double(let d) = value(key) else { throw mismatch(key, type) }
        return d
    }

    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { Float(try decode(Double.self, forKey: key)) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try integer(type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
        guard case .int(let i) = value(key) else { throw mismatch(key, type) }
        return i
    }
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
