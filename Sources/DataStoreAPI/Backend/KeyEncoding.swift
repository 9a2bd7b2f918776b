import Foundation

/// The order-preserving key encoding shared by every backend.
///
/// Primary keys: ints as 8 big-endian bytes with the sign bit flipped, strings as their UTF-8
/// bytes, uuids as their 16 bytes, so that byte order (memcmp, SQLite's BINARY, LMDB's default
/// comparator) is the canonical key order.
///
/// Tuples (index keys) follow FoundationDB's tuple layer: a type tag, then an order-preserving
/// body; strings and bytes escape 0x00 as 0x00 0xFF and end with 0x00, so a tuple never is a
/// prefix of another and tuples sort element by element.
@_spi(Backend) public enum KeyEncoding {
    /// Encodes a primary-key value (`int`, `string` or `uuid`).
    /// - Throws: `invalidArgument` for any other value, which cannot be a key.
    public static func encodeKey(_ value: Value) throws(StoreError) -> [UInt8] {
        do {
            return try withEncodedKey(value) { [UInt8]($0) }
        } catch {
            // The closure throws nothing: only a value that cannot be a key gets here.
            throw notAKey(value)
        }
    }

    /// Hands the encoding of a primary-key value to `body` without building an array: on the
    /// stack, or the string's own UTF-8 bytes. The one statement of the key format: ints as 8
    /// big-endian bytes with the sign bit flipped, strings as their UTF-8 bytes, uuids as their
    /// 16 bytes.
    /// - Throws: `invalidArgument` for a value that cannot be a key; what `body` throws.
    public static func withEncodedKey<T>(_ value: Value, _ body: (UnsafeRawBufferPointer) throws -> T) throws -> T {
        switch value {
        case .int(let i): return try withUnsafeBytes(of: (UInt64(bitPattern: i) ^ (1 << 63)).bigEndian, body)
        case .string(var s): return try s.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
        case .uuid(let u): return try withUnsafeBytes(of: u.uuid, body)
        default: throw notAKey(value)
        }
    }

    private static func notAKey(_ value: Value) -> StoreError {
        StoreError(.invalidArgument, "\(value) cannot be a primary key: keys are int, string or uuid")
    }

    /// The canonical order of two primary keys: the order of their encodings
    /// (``encodeKey(_:)``), found without encoding them when both are ints, strings or uuids.
    /// - Returns: a negative number, zero or a positive number as `a` sorts before, with or
    ///   after `b`.
    /// - Throws: `invalidArgument` for a value that cannot be a key.
    public static func compareKeys(_ a: Value, _ b: Value) throws(StoreError) -> Int {
        switch (a, b) {
        case let (.int(x), .int(y)):
            return x < y ? -1 : (x == y ? 0 : 1)
        case (.string(var x), .string(var y)):
            return x.withUTF8 { p in y.withUTF8 { q in Value.compareBytes(UnsafeRawBufferPointer(p), UnsafeRawBufferPointer(q)) } }
        case let (.uuid(x), .uuid(y)):
            return withUnsafeBytes(of: x.uuid) { p in withUnsafeBytes(of: y.uuid) { q in Value.compareBytes(p, q) } }
        default:
            let x = try encodeKey(a)
            let y = try encodeKey(b)
            return Value.compareBytes(x, y)
        }
    }

    /// Decodes a primary key encoded by ``encodeKey(_:)``.
    /// - Throws: ``StoreError/Code/corrupt`` when the bytes cannot be a key of that type.
    public static func decodeKey(_ bytes: some Collection<UInt8>, as type: ValueType) throws(StoreError) -> Value {
        switch type {
        case .int where bytes.count == 8:
            return .int(Int64(bitPattern: readBigEndian(bytes) ^ (1 << 63)))
        case .string:
            return .string(String(decoding: bytes, as: UTF8.self))
        case .uuid:
            if let u = UUID(bytes: bytes) { return .uuid(u) }
        default:
            break
        }
        throw StoreError(.corrupt, "stored key of \(bytes.count) bytes is not a valid \(type) key")
    }

    /// Appends one tuple element.
    public static func appendTupleElement(_ value: Value, to out: inout [UInt8]) {
        switch value {
        case .null:
            out.append(0x00)
        case .bool(let b):
            out.append(b ? 0x02 : 0x01)
        case .int(let i):
            out.append(0x10)
            appendBigEndian(UInt64(bitPattern: i) ^ (1 << 63), to: &out)
        case .double(let d):
            out.append(0x20)
            let bits = (d == 0 ? 0.0 : d).bitPattern
            appendBigEndian(bits & (1 << 63) != 0 ? ~bits : bits | (1 << 63), to: &out)
        case .string(let s):
            out.append(0x30)
            appendEscaped(s.utf8, to: &out)
        case .bytes(let b):
            out.append(0x40)
            appendEscaped(b, to: &out)
        case .date(let t):
            out.append(0x50)
            appendBigEndian(UInt64(bitPattern: t.microsecondsSinceEpoch) ^ (1 << 63), to: &out)
        case .uuid(let u):
            out.append(0x60)
            out += u.bytes
        }
    }

    /// Encodes a tuple of values.
    public static func encodeTuple(_ values: [Value]) -> [UInt8] {
        var out: [UInt8] = []
        for value in values { appendTupleElement(value, to: &out) }
        return out
    }

    private static func appendEscaped(_ bytes: some Sequence<UInt8>, to out: inout [UInt8]) {
        for byte in bytes {
            out.append(byte)
            if byte == 0 { out.append(0xFF) }
        }
        out.append(0x00)
    }

    /// Appends 8 big-endian bytes, without an array of its own.
    static func appendBigEndian(_ value: UInt64, to out: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { out.append(contentsOf: $0) }
    }

    static func readBigEndian(_ bytes: some Collection<UInt8>) -> UInt64 {
        bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }
}
