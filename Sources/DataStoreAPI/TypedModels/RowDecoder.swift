import Foundation

/// Decodes the rows of one typed visit or fetch straight from the backend's row (``Row``): each
/// property is read from the row's field (LMDB's bytes, SQLite's column), with no ``Record`` or
/// ``Value`` built in between. One decoder and one keyed container serve every row, as
/// ``RecordRowDecoder`` does for records.
///
/// Each row's model must be complete when ``decode(_:)`` returns, as it is for any model whose
/// `init(from:)` does not keep its decoder or containers: they read the row that is current.
///
/// Used where the backend reads rows in place (``ReadAccessor/readsRowsInPlace``); where rows are
/// records already (the in-memory store's, a child store's, a write block's), a typed fetch
/// decodes the records (``RecordRowDecoder``): copying their fields out to read them in place
/// cost more instructions than reading the record.
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
    /// The keyed container made for the rows before, its key type's identity and its cursor's
    /// (the container holds the cursor, so that a field read loads no reference).
    private var reused: AnyObject?
    private var containerKey: ObjectIdentifier?
    private var containerCursor: ObjectIdentifier?
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
        guard let cursor else { throw StoreError(.typeMismatch, "no row to decode") }
        if containerKey == ObjectIdentifier(type), containerCursor == ObjectIdentifier(cursor), let reused {
            return unsafeDowncast(reused, to: ReusedContainer<Key>.self).container
        }
        let container = KeyedDecodingContainer(KeyedRowDecoder<Key>(decoder: self, cursor: cursor))
        (reused, containerKey, containerCursor) = (ReusedContainer(container), ObjectIdentifier(type), ObjectIdentifier(cursor))
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
        guard let slot = cursor?.layout.slot(of: name) else { return nil }
        self.next = slot + 1
        return slot
    }

    /// The row as a record (for a property's own `init(from:)`, and for errors).
    func record() -> Record {
        guard let cursor else { return Record() }
        return Record(layout: cursor.layout, values: RecordValues(names.indices.lazy.map { cursor.field(at: $0).value }))
    }
}

/// A keyed container kept by a ``RowValueDecoder`` for its next rows.
private final class ReusedContainer<Key: CodingKey> {
    let container: KeyedDecodingContainer<Key>
    init(_ container: KeyedDecodingContainer<Key>) { self.container = container }
}

struct KeyedRowDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    private let decoder: RowValueDecoder
    private let cursor: any RowCursor
    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] { cursor.layout.names.compactMap { Key(stringValue: $0) } }

    init(decoder: RowValueDecoder, cursor: any RowCursor) {
        self.decoder = decoder
        self.cursor = cursor
    }

    /// The key's field in the current row (null when the entity has no such attribute).
    private func field(_ key: Key) -> RowField {
        guard let slot = decoder.slot(key.stringValue) else { return .null }
        return cursor.field(at: slot)
    }

    func contains(_ key: Key) -> Bool { decoder.slot(key.stringValue) != nil }

    func decodeNil(forKey key: Key) throws -> Bool { field(key).type == nil }

    /// The key's field when it holds a `type`, or the error naming what it holds (the record
    /// decoder's words).
    private func field(_ key: Key, _ type: ValueType, for swiftType: Any.Type) throws -> RowField {
        let field = field(key)
        guard field.type == type else {
            throw StoreError(.typeMismatch, "attribute '\(key.stringValue)' holds \(field.value), not \(swiftType)")
        }
        return field
    }

    private func integer<I: FixedWidthInteger>(_ type: I.Type, _ key: Key) throws -> I {
        let stored = Int64(bitPattern: try field(key, .int, for: type).bits)
        guard let exact = I(exactly: stored) else {
            throw StoreError(.typeMismatch, "attribute '\(key.stringValue)' holds \(stored), not \(type)")
        }
        return exact
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        String(decoding: try field(key, .string, for: type).bytes, as: UTF8.self)
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try field(key, .bool, for: type).bits != 0 }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        Double(bitPattern: try field(key, .double, for: type).bits)
    }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { Float(try decode(Double.self, forKey: key)) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try integer(type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { Int64(bitPattern: try field(key, .int, for: type).bits) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try integer(type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try integer(type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try integer(type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try integer(type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try integer(type, key) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        // The common non-primitive types read from the field (T is exactly the type tested, so
        // the bit casts are identities); anything else through the value.
        let field = field(key)
        switch field.type {
        case .date? where T.self == Date.self:
            return unsafeBitCast(Timestamp(microsecondsSinceEpoch: Int64(bitPattern: field.bits)).date, to: T.self)
        case .uuid? where T.self == UUID.self:
            if let uuid = UUID(bytes: field.bytes) { return unsafeBitCast(uuid, to: T.self) }
        case .bytes? where T.self == [UInt8].self: return unsafeBitCast(Array(field.bytes), to: T.self)
        case .bytes? where T.self == Data.self: return unsafeBitCast(Data(field.bytes), to: T.self)
        default: break
        }
        return try RecordDecoder.convert(field.value, to: type, key: key.stringValue)
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
        RecordValueDecoder(record: decoder.record(), single: field(key).value, key: key.stringValue)
    }
}
