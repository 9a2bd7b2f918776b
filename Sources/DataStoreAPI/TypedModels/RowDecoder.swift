import Foundation

/// Decodes the rows of one typed visit or fetch straight from the backend's row (``Row``): each
/// property is read from the row's field (LMDB's bytes, SQLite's column), with no ``Record`` or
/// ``Value`` built in between. One decoder and one keyed container serve every row, as
/// ``RecordRowDecoder`` does for records.
///
/// Each row's model must be complete when ``decode(_:)`` returns, as it is for any model whose
/// `init(from:)` does not keep its decoder or containers: they read the row that is current.
@usableFromInline
final class RowModelDecoder<T: Decodable> {
    private let decoder = RowValueDecoder()

    @usableFromInline
    init() {}

    @usableFromInline
    func decode(_ row: borrowing Row) throws -> T {
        decoder.load(row.cursor)
        defer { decoder.unload() }
        return try T(from: decoder)
    }

    deinit { decoder.release() }
}

/// The decoder of the current row of a cursor.
final class RowValueDecoder: Decoder {
    /// Strong: read from an `unowned(unsafe)` reference, each use retained and released it.
    private(set) var cursor: (any RowCursor)?
    private var names: [String] = []
    /// The slot after the last one found: a synthesized `init(from:)` asks for its keys in
    /// declaration order, the schema's order when the schema was derived from the type.
    private var next = 0
    /// The keyed container made for the rows before, and its key type's identity.
    private var reused: AnyObject?
    private var containerKey: ObjectIdentifier?
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func load(_ cursor: any RowCursor) {
        if self.cursor !== cursor { names = cursor.layout.names }
        self.cursor = cursor
        next = 0
    }

    func unload() { next = 0 }

    /// Lets go of the kept container, which holds this decoder.
    func release() {
        (reused, containerKey) = (nil, nil)
        cursor = nil
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        if containerKey == ObjectIdentifier(type), let reused {
            return unsafeDowncast(reused, to: ReusedContainer<Key>.self).container
        }
        let container = KeyedDecodingContainer(KeyedRowDecoder<Key>(decoder: self))
        (reused, containerKey) = (ReusedContainer(container), ObjectIdentifier(type))
        return container
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw StoreError(.typeMismatch, "a record is not a collection")
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw StoreError(.typeMismatch, "a record is not a single value")
    }

    /// The slot of the attribute, or nil when the entity has none of that name.
    func slot(_ name: String) -> Int? {
        let next = self.next
        if next < names.count, names[next] == name {
            self.next = next + 1
            return next
        }
        if next > 0, next - 1 < names.count, names[next - 1] == name { return next - 1 }
        guard let slot = cursor?.slot(of: name) else { return nil }
        self.next = slot + 1
        return slot
    }

    /// The row as a record (for a property's own `init(from:)`, and for errors).
    func record() -> Record {
        guard let cursor else { return Record() }
        return Record(layout: cursor.layout, values: RecordValues(names.indices.lazy.map { cursor.value(at: $0) }))
    }
}

/// A keyed container kept by a ``RowValueDecoder`` for its next rows.
private final class ReusedContainer<Key: CodingKey> {
    let container: KeyedDecodingContainer<Key>
    init(_ container: KeyedDecodingContainer<Key>) { self.container = container }
}

struct KeyedRowDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    private let decoder: RowValueDecoder
    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] { (decoder.cursor?.layout.names ?? []).compactMap { Key(stringValue: $0) } }

    init(decoder: RowValueDecoder) {
        self.decoder = decoder
    }

    private var cursor: any RowCursor { decoder.cursor.unsafelyUnwrapped }

    func contains(_ key: Key) -> Bool { decoder.slot(key.stringValue) != nil }

    func decodeNil(forKey key: Key) throws -> Bool {
        guard let slot = decoder.slot(key.stringValue) else { return true }
        return cursor.isNull(at: slot)
    }

    /// The slot of a non-null attribute of `type`, or the error naming what the attribute holds
    /// (the record decoder's words).
    private func slot(_ key: Key, _ type: ValueType, for swiftType: Any.Type) throws -> Int {
        if let slot = fastSlot(key, type) { return slot }
        let held = decoder.slot(key.stringValue).map { cursor.value(at: $0) } ?? .null
        throw StoreError(.typeMismatch, "attribute '\(key.stringValue)' holds \(held), not \(swiftType)")
    }

    /// The slot of a non-null attribute of `type`, or nil.
    private func fastSlot(_ key: Key, _ type: ValueType) -> Int? {
        guard let slot = decoder.slot(key.stringValue), let cursor = decoder.cursor else { return nil }
        return cursor.type(at: slot) == type && !cursor.isNull(at: slot) ? slot : nil
    }

    private func integer<I: FixedWidthInteger>(_ type: I.Type, _ key: Key) throws -> I {
        let slot = try slot(key, .int, for: type)
        let stored = cursor.int64(at: slot)
        guard let exact = I(exactly: stored) else {
            throw StoreError(.typeMismatch, "attribute '\(key.stringValue)' holds \(stored), not \(type)")
        }
        return exact
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        let slot = try slot(key, .string, for: type)
        return cursor.withBytes(at: slot) { String(decoding: $0, as: UTF8.self) }
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { cursor.int64(at: try slot(key, .bool, for: type)) != 0 }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { cursor.double(at: try slot(key, .double, for: type)) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { Float(try decode(Double.self, forKey: key)) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try integer(type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { cursor.int64(at: try slot(key, .int, for: type)) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try integer(type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try integer(type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try integer(type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try integer(type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try integer(type, key) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        // The common non-primitive types read from the field (T is exactly the type tested, so
        // the bit casts are identities); anything else through the value.
        if T.self == Date.self, let slot = fastSlot(key, .date) {
            return unsafeBitCast(Timestamp(microsecondsSinceEpoch: cursor.int64(at: slot)).date, to: T.self)
        }
        if T.self == UUID.self, let slot = fastSlot(key, .uuid), let uuid = cursor.withBytes(at: slot, { UUID(bytes: $0) }) {
            return unsafeBitCast(uuid, to: T.self)
        }
        if T.self == [UInt8].self, let slot = fastSlot(key, .bytes) {
            return unsafeBitCast(cursor.withBytes(at: slot) { Array($0) }, to: T.self)
        }
        if T.self == Data.self, let slot = fastSlot(key, .bytes) {
            return unsafeBitCast(cursor.withBytes(at: slot) { Data($0) }, to: T.self)
        }
        let value = decoder.slot(key.stringValue).map { cursor.value(at: $0) } ?? .null
        return try RecordDecoder.convert(value, to: type, key: key.stringValue)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type,
                                               forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        throw StoreError(.typeMismatch, "attribute '\(key.stringValue)' holds a single value, not a nested model")
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw StoreError(.typeMismatch, "attribute '\(key.stringValue)' holds a single value, not a collection")
    }

    func superDecoder() throws -> any Decoder { RecordValueDecoder(record: decoder.record(), single: nil, key: nil) }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        let value = decoder.slot(key.stringValue).map { cursor.value(at: $0) } ?? .null
        return RecordValueDecoder(record: decoder.record(), single: value, key: key.stringValue)
    }
}
