import Foundation

/// A value stored in an attribute.
///
/// Values round-trip exactly on every backend. Two values are equal (`==`) when they are the
/// same stored value: strings compare by their UTF-8 bytes (so "é" as one scalar and as
/// "e" + U+0301 are different values), doubles by their bit pattern (so `-0.0 != 0.0`).
/// Predicates and sorting use ``Value/compareCanonical(_:_:foldingASCIICase:)`` instead,
/// in which `-0.0` and `0.0` are equal.
public enum Value: Sendable {
/// No value, for an optional attribute (not the same as an empty string or empty bytes).
    case null
/// A boolean.
    case bool(Bool)
/// A 64-bit integer.
    case int(Int64)
/// A double: every finite value, -0.0 and the infinities round-trip; NaN is refused.
    case double(Double)
/// A string, stored as its UTF-8 bytes, never normalized.
    case string(String)
/// Bytes, up to 16 MiB.
    case bytes([UInt8])
/// A date, in whole microseconds since 1970.
    case date(Timestamp)
/// A UUID, stored as its 16 bytes.
    case uuid(UUID)

    /// The type of a non-null value; `nil` for ``null``.
    public var type: ValueType? {
        switch self {
        case .null: return nil
        case .bool: return .bool
        case .int: return .int
        case .double: return .double
        case .string: return .string
        case .bytes: return .bytes
        case .date: return .date
        case .uuid: return .uuid
        }
    }

    /// Whether this is ``null``.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}

extension Value: Hashable {
    public static func == (lhs: Value, rhs: Value) -> Bool {
        // One switch on each side, without pairing them in a tuple (which copies both values).
        switch lhs {
        case .null:
            if case .null = rhs { return true }
        case .bool(let a):
            if case .bool(let b) = rhs { return a == b }
        case .int(let a):
            if case .int(let b) = rhs { return a == b }
        case .double(let a):
            if case .double(let b) = rhs { return a.bitPattern == b.bitPattern }
        case .string(let a):
            // By UTF-8 bytes (not Swift's canonical equivalence), compared as two buffers.
            if case .string(let b) = rhs { return sameUTF8(a, b) }
        case .bytes(let a):
            if case .bytes(let b) = rhs { return a == b }
        case .date(let a):
            if case .date(let b) = rhs { return a == b }
        case .uuid(let a):
            if case .uuid(let b) = rhs { return a == b }
        }
        return false
    }

    private static func sameUTF8(_ a: String, _ b: String) -> Bool {
        let (x, y) = (a.utf8, b.utf8)
        guard x.count == y.count else { return false }
        let contiguous = x.withContiguousStorageIfAvailable { p in
            y.withContiguousStorageIfAvailable { q in
                guard let p = p.baseAddress, let q = q.baseAddress else { return true }
                return memcmp(p, q, x.count) == 0
            }
        }
        return contiguous.flatMap { $0 } ?? x.elementsEqual(y)
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let b): hasher.combine(1); hasher.combine(b)
        case .int(let i): hasher.combine(2); hasher.combine(i)
        case .double(let d): hasher.combine(3); hasher.combine(d.bitPattern)
        // Strings and bytes by length and contents in one call each, as `==` compares them (the
        // UTF-8 bytes, not Swift's canonical equivalence).
        case .string(var s):
            hasher.combine(4)
            hasher.combine(s.utf8.count)
            s.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        case .bytes(let b):
            hasher.combine(5)
            hasher.combine(b.count)
            b.withUnsafeBytes { hasher.combine(bytes: $0) }
        case .date(let t): hasher.combine(6); hasher.combine(t)
        case .uuid(let u): hasher.combine(7); hasher.combine(u)
        }
    }
}

extension Value {
    /// Whether an attribute of `type` stores this value as it is: a value of that type, null
    /// only when `optional`, a double that is not NaN, a text or bytes within
    /// ``Limits/maxValueBytes``, and a text key within ``Limits/maxStringKeyBytes`` (`isKey` is
    /// asked only of a text longer than that). `false` when the value must be converted (an int
    /// for a double) or refused, which `EntitySchema.normalize(_:)` then does or names.
    @_spi(Backend) @inlinable @inline(__always)
    public func isStoredAsIs(by type: ValueType, optional: Bool, isKey: () -> Bool) -> Bool {
        switch self {
        case .null: return optional
        case .bool: return type == .bool
        case .int: return type == .int
        case .double(let d): return type == .double && !d.isNaN
        case .string(let s):
            guard type == .string else { return false }
            let count = s.utf8.count
            return count <= Limits.maxStringKeyBytes || count <= Limits.maxValueBytes && !isKey()
        case .bytes(let b): return type == .bytes && b.count <= Limits.maxValueBytes
        case .date: return type == .date
        case .uuid: return type == .uuid
        }
    }
}

extension Value {
    /// Compares two values in the canonical order shared by every backend.
    ///
    /// `null` sorts before every other value; strings compare by UTF-8 bytes (optionally with
    /// ASCII letters folded to lower case, as SQLite's NOCASE); bytes and uuids by their bytes;
    /// doubles numerically, so `-0.0` equals `0.0`. Values of different types compare by type.
    /// - Returns: a negative number, zero or a positive number.
    public static func compareCanonical(_ lhs: Value, _ rhs: Value, foldingASCIICase: Bool = false) -> Int {
        switch (lhs, rhs) {
        case (.null, .null): return 0
        case (.null, _): return -1
        case (_, .null): return 1
        case let (.bool(a), .bool(b)): return a == b ? 0 : (a ? 1 : -1)
        case let (.int(a), .int(b)): return a < b ? -1 : (a == b ? 0 : 1)
        case let (.double(a), .double(b)): return a < b ? -1 : (a > b ? 1 : 0)
        case let (.string(a), .string(b)): return compareBytes(a.utf8, b.utf8, foldingASCIICase: foldingASCIICase)
        case let (.bytes(a), .bytes(b)): return compareBytes(a, b, foldingASCIICase: false)
        case let (.date(a), .date(b)):
            let (x, y) = (a.microsecondsSinceEpoch, b.microsecondsSinceEpoch)
            return x < y ? -1 : (x == y ? 0 : 1)
        case let (.uuid(a), .uuid(b)): return compareBytes(a.bytes, b.bytes, foldingASCIICase: false)
        default:
            let (x, y) = (lhs.type?.rank ?? 0, rhs.type?.rank ?? 0)
            return x < y ? -1 : (x == y ? 0 : 1)
        }
    }

    /// Three-way comparison of two byte sequences (memcmp, then length).
    @_spi(Backend) public static func compareBytes<A: Sequence, B: Sequence>(
        _ a: A, _ b: B, foldingASCIICase: Bool = false
    ) -> Int where A.Element == UInt8, B.Element == UInt8 {
        var ia = a.makeIterator()
        var ib = b.makeIterator()
        while true {
            switch (ia.next(), ib.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case let (x?, y?):
                let (p, q) = foldingASCIICase ? (foldASCII(x), foldASCII(y)) : (x, y)
                if p != q { return p < q ? -1 : 1 }
            }
        }
    }

    /// Three-way comparison of two byte arrays with `memcmp` (the hot path of key ordering).
    @_spi(Backend) public static func compareBytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
        a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in compareBytes(pa, pb) } }
    }

    /// Three-way comparison of two byte buffers with `memcmp`, a proper prefix first.
    @_spi(Backend) public static func compareBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let common = Swift.min(a.count, b.count)
        if common > 0, let x = a.baseAddress, let y = b.baseAddress {
            let c = memcmp(x, y, common)
            if c != 0 { return c < 0 ? -1 : 1 }
        }
        return a.count < b.count ? -1 : (a.count == b.count ? 0 : 1)
    }

    @inline(__always)
    static func foldASCII(_ byte: UInt8) -> UInt8 {
        (byte >= 0x41 && byte <= 0x5A) ? byte | 0x20 : byte
    }
}

extension Value: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
}

extension Value: CustomStringConvertible {
    public var description: String {
        switch self {
        case .null: return "null"
        case .bool(let b): return String(b)
        case .int(let i): return String(i)
        case .double(let d): return String(d)
        case .string(let s): return "\"\(s)\""
        case .bytes(let b): return "<\(b.count) bytes>"
        case .date(let t): return "date(\(t.microsecondsSinceEpoch)µs)"
        case .uuid(let u): return u.uuidString
        }
    }
}

extension UUID {
    /// The 16 bytes of the UUID, in order.
    package var bytes: [UInt8] {
        withUnsafeBytes(of: uuid) { Array($0) }
    }

    /// Makes a UUID from exactly 16 bytes; `nil` for any other length.
    ///
    /// Inlinable, and a copy of contiguous bytes: it is called for every uuid a backend reads,
    /// and unspecialized across the module boundary it looks up generic metadata per byte.
    @inlinable
    package init?<Bytes: Collection<UInt8>>(bytes: Bytes) {
        guard bytes.count == 16 else { return nil }
        var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &raw) { buffer in
            let copied: Void? = bytes.withContiguousStorageIfAvailable { buffer.copyMemory(from: UnsafeRawBufferPointer($0)) }
            if copied == nil {
                var i = 0
                for byte in bytes {
                    buffer[i] = byte
                    i += 1
                }
            }
        }
        self.init(uuid: raw)
    }
}
