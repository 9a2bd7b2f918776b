/// A primary key as a backend receives it: the value and its order-preserving encoding
/// (``KeyEncoding``), computed once, so that a backend keyed by bytes (LMDB, the in-memory
/// tables) and one keyed by values (SQLite) each take what it needs without converting.
///
/// Equal, hashed and ordered by its bytes: the canonical key order of every backend.
@_spi(Backend) public struct PrimaryKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The key's value: an `int`, `string` or `uuid`.
    public let value: Value
    /// Its encoding, whose byte order is the canonical key order.
    public let bytes: [UInt8]

    /// The key of `value`.
    /// - Throws: `invalidArgument` when `value` is not an `int`, `string` or `uuid`.
    public init(_ value: Value) throws(StoreError) {
        bytes = try KeyEncoding.encodeKey(value)
        self.value = value
    }

    /// The key whose encoding is `bytes`, for a key of `type`.
    /// - Throws: `corrupt` when the bytes cannot be such a key.
    public init(bytes: some Collection<UInt8>, type: ValueType) throws(StoreError) {
        value = try KeyEncoding.decodeKey(bytes, as: type)
        self.bytes = Array(bytes)
    }

    public static func == (lhs: PrimaryKey, rhs: PrimaryKey) -> Bool { lhs.bytes == rhs.bytes }
    /// The bytes in one call (an array's own hash combines them one at a time).
    public func hash(into hasher: inout Hasher) { bytes.withUnsafeBytes { hasher.combine(bytes: $0) } }
    public static func < (lhs: PrimaryKey, rhs: PrimaryKey) -> Bool {
        Value.compareBytes(lhs.bytes, rhs.bytes) < 0
    }
    public var description: String { value.description }
}
