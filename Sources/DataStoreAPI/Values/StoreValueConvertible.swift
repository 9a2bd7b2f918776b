import Foundation

/// A Swift value that stands for a stored ``Value``: what filters and records accept where an
/// app holds a variable (`Field("rating") >= minRating`), not only a literal.
///
/// `Bool`, `Int` and its sized forms, `Double`, `Float`, `String`, `Date`, `UUID`, `Data`,
/// `[UInt8]`, ``Value`` itself, and optionals of these (`nil` is ``Value/null``) conform; so
/// do enums backed by one of them, as their raw value (``DataObject`` stores them that way).
public protocol StoreValueConvertible {
    /// The stored value this Swift value stands for.
    var storeValue: Value { get }
}

extension Value: StoreValueConvertible {
    public var storeValue: Value { self }
}

extension Bool: StoreValueConvertible {
    public var storeValue: Value { .bool(self) }
}

extension Int: StoreValueConvertible {
    public var storeValue: Value { .int(Int64(self)) }
}

extension Int64: StoreValueConvertible {
    public var storeValue: Value { .int(self) }
}

extension Int32: StoreValueConvertible {
    public var storeValue: Value { .int(Int64(self)) }
}

extension Int16: StoreValueConvertible {
    public var storeValue: Value { .int(Int64(self)) }
}

extension Int8: StoreValueConvertible {
    public var storeValue: Value { .int(Int64(self)) }
}

extension UInt32: StoreValueConvertible {
    public var storeValue: Value { .int(Int64(self)) }
}

extension UInt16: StoreValueConvertible {
    public var storeValue: Value { .int(Int64(self)) }
}

extension UInt8: StoreValueConvertible {
    public var storeValue: Value { .int(Int64(self)) }
}

extension Double: StoreValueConvertible {
    public var storeValue: Value { .double(self) }
}

extension Float: StoreValueConvertible {
    public var storeValue: Value { .double(Double(self)) }
}

extension String: StoreValueConvertible {
    public var storeValue: Value { .string(self) }
}

extension Substring: StoreValueConvertible {
    public var storeValue: Value { .string(String(self)) }
}

extension UUID: StoreValueConvertible {
    public var storeValue: Value { .uuid(self) }
}

extension Data: StoreValueConvertible {
    public var storeValue: Value { .bytes(Array(self)) }
}

extension Array: StoreValueConvertible where Element == UInt8 {
    public var storeValue: Value { .bytes(self) }
}

extension Date: StoreValueConvertible {
    /// The date rounded to the microsecond, as stores hold it. A date past the roughly
    /// ±292,000 years a store can hold stands for the nearest one it can, which orders the same
    /// against every stored date.
    public var storeValue: Value {
        if let timestamp = try? Timestamp(self) { return .date(timestamp) }
        return .date(Timestamp(microsecondsSinceEpoch: timeIntervalSince1970 < 0 ? .min : .max))
    }
}

extension Timestamp: StoreValueConvertible {
    public var storeValue: Value { .date(self) }
}

extension Optional: StoreValueConvertible where Wrapped: StoreValueConvertible {
    public var storeValue: Value { map(\.storeValue) ?? .null }
}

extension RawRepresentable where RawValue: StoreValueConvertible {
    /// The raw value, as ``DataObject`` stores an enum.
    public var storeValue: Value { rawValue.storeValue }
}

extension Value: ExpressibleByStringInterpolation {}

extension Value {
    /// The stored value a Swift value stands for (`Value(minRating)`).
    public init(_ value: some StoreValueConvertible) {
        self = value.storeValue
    }
}

extension Field {
    /// The attribute equals the value.
    public static func == (lhs: Field, rhs: some StoreValueConvertible) -> Filter {
        .compare(lhs.name, .equal, rhs.storeValue)
    }

    /// The attribute differs from the value.
    public static func != (lhs: Field, rhs: some StoreValueConvertible) -> Filter {
        .compare(lhs.name, .notEqual, rhs.storeValue)
    }

    /// The attribute is less than the value.
    public static func < (lhs: Field, rhs: some StoreValueConvertible) -> Filter {
        .compare(lhs.name, .less, rhs.storeValue)
    }

    /// The attribute is at most the value.
    public static func <= (lhs: Field, rhs: some StoreValueConvertible) -> Filter {
        .compare(lhs.name, .lessOrEqual, rhs.storeValue)
    }

    /// The attribute is greater than the value.
    public static func > (lhs: Field, rhs: some StoreValueConvertible) -> Filter {
        .compare(lhs.name, .greater, rhs.storeValue)
    }

    /// The attribute is at least the value.
    public static func >= (lhs: Field, rhs: some StoreValueConvertible) -> Filter {
        .compare(lhs.name, .greaterOrEqual, rhs.storeValue)
    }

    /// The attribute equals one of the values (`in`).
    public func among(_ values: some Sequence<some StoreValueConvertible>) -> Filter {
        .among(name, values.map(\.storeValue))
    }

    /// The attribute equals the enum's raw value.
    public static func == <E: RawRepresentable>(lhs: Field, rhs: E) -> Filter where E.RawValue: StoreValueConvertible {
        .compare(lhs.name, .equal, rhs.rawValue.storeValue)
    }

    /// The attribute differs from the enum's raw value.
    public static func != <E: RawRepresentable>(lhs: Field, rhs: E) -> Filter where E.RawValue: StoreValueConvertible {
        .compare(lhs.name, .notEqual, rhs.rawValue.storeValue)
    }

    /// The attribute equals the enum's raw value (an enum declared ``RowValue`` matches both
    /// forms above; this one, more specific, takes it).
    public static func == <E: RawRepresentable & StoreValueConvertible>(lhs: Field, rhs: E) -> Filter
    where E.RawValue: StoreValueConvertible {
        .compare(lhs.name, .equal, rhs.rawValue.storeValue)
    }

    /// The attribute differs from the enum's raw value.
    public static func != <E: RawRepresentable & StoreValueConvertible>(lhs: Field, rhs: E) -> Filter
    where E.RawValue: StoreValueConvertible {
        .compare(lhs.name, .notEqual, rhs.rawValue.storeValue)
    }
}
