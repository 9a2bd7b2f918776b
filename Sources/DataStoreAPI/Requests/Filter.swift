import Foundation
/// A comparison operator of a ``Filter``.
public enum ComparisonOperator: String, Sendable, Hashable, Codable {
/// Equal to the value (null equals null).
    case equal = "=="
/// Not equal to the value (an item whose attribute is null matches `!= 5`).
    case notEqual = "!="
/// Less than the value; false when either side is null.
    case less = "<"
/// Less than or equal to the value; false when either side is null.
    case lessOrEqual = "<="
/// Greater than the value; false when either side is null.
    case greater = ">"
/// Greater than or equal to the value; false when either side is null.
    case greaterOrEqual = ">="
}

/// A predicate over an entity's items.
///
/// Predicates are two-valued, never SQL's three-valued logic: null is a value that `==` and
/// `!=` compare like any other (`x != 5` matches items whose `x` is null), ordering
/// comparisons with null are false, and ``not(_:)`` simply inverts. Prefix and contains are
/// case-sensitive and compare UTF-8 bytes. A value of the wrong type for its attribute is a
/// ``StoreError/Code/typeMismatch`` error when the request runs.
public indirect enum Filter: Sendable, Hashable {
    /// Matches every item.
    case all
/// The attribute compared with a value.
    case compare(String, ComparisonOperator, Value)
    /// The attribute equals one of the values (`in`).
    case among(String, [Value])
/// The attribute is null.
    case isNull(String)
    /// The string attribute starts with the given string (byte-wise, case-sensitive).
    case hasPrefix(String, String)
    /// The string attribute contains the given string (byte-wise, case-sensitive).
    case contains(String, String)
    /// The string attribute holds a JSON array of scalars (as a ``DataObject`` stores an array
    /// or set property) one of whose elements, decoded, equals the value, as `Array.contains`
    /// says: numbers by value (`-0.0` equals `0.0`), strings byte for byte, `true`/`false`,
    /// null. The value is a JSON scalar: null, bool, int, double or string (``Field/hasElement(_:)``
    /// makes one of any value). Text that is not such an array (an object, an element that is an
    /// array or object, text that is not JSON) holds no element, on every backend alike; an
    /// element holding U+0000 is found like any other.
    case hasElement(String, Value)
/// Every filter matches (all of them when the list is empty).
    case and([Filter])
/// At least one filter matches (none when the list is empty).
    case or([Filter])
/// The filter does not match: two-valued, so it simply inverts.
    case not(Filter)
    /// Some item related through the named to-many relationship matches the filter (a filter
    /// on the related entity). ``every(_:_:)`` is its dual.
    case any(String, Filter)
    /// The number of items related through the named to-many relationship compares with the
    /// count as the operator says (`.relatedCount("notes", .greaterOrEqual, 3)`).
    case relatedCount(String, ComparisonOperator, Int)

    /// Every item related through the named to-many relationship matches the filter (true for
    /// an item with none).
    public static func every(_ relationship: String, _ filter: Filter) -> Filter {
        .not(.any(relationship, .not(filter)))
    }

/// Both filters match.
    public static func && (lhs: Filter, rhs: Filter) -> Filter { .and([lhs, rhs]) }
/// Either filter matches.
    public static func || (lhs: Filter, rhs: Filter) -> Filter { .or([lhs, rhs]) }
/// The filter does not match.
    public static prefix func ! (filter: Filter) -> Filter { .not(filter) }
}

/// Names an attribute in a filter: `Field("rating") >= 4 && Field("name").hasPrefix("B")`.
public struct Field: Sendable, Hashable {
    /// The attribute's name.
    public let name: String

    /// Names the attribute `name`.
    public init(_ name: String) { self.name = name }

/// The attribute equals `rhs` (null equals null).
    public static func == (lhs: Field, rhs: Value) -> Filter { .compare(lhs.name, .equal, rhs) }
/// The attribute differs from `rhs` (null is a value like any other).
    public static func != (lhs: Field, rhs: Value) -> Filter { .compare(lhs.name, .notEqual, rhs) }
/// The attribute is less than `rhs`.
    public static func < (lhs: Field, rhs: Value) -> Filter { .compare(lhs.name, .less, rhs) }
/// The attribute is less than or equal to `rhs`.
    public static func <= (lhs: Field, rhs: Value) -> Filter { .compare(lhs.name, .lessOrEqual, rhs) }
/// The attribute is greater than `rhs`.
    public static func > (lhs: Field, rhs: Value) -> Filter { .compare(lhs.name, .greater, rhs) }
/// The attribute is greater than or equal to `rhs`.
    public static func >= (lhs: Field, rhs: Value) -> Filter { .compare(lhs.name, .greaterOrEqual, rhs) }

    /// The attribute equals one of the values.
    public func among(_ values: [Value]) -> Filter { .among(name, values) }
    /// The attribute is null.
    public var isNull: Filter { .isNull(name) }
    /// The string attribute starts with `prefix`.
    public func hasPrefix(_ prefix: String) -> Filter { .hasPrefix(name, prefix) }
    /// The string attribute contains `text`, as bytes: a substring search, also on an array
    /// property a ``DataObject`` stores as JSON text (`contains("gift")` matches `["giftwrap"]`);
    /// for an element of such an array use ``hasElement(_:)``.
    public func contains(_ text: String) -> Filter { .contains(name, text) }

    /// The attribute, an array (or set) of scalars that a ``DataObject`` stores as JSON text
    /// (`var tags: [String]`), has `element` as one of its elements: `["gift"]` and
    /// `["a", "gift"]` match `hasElement("gift")`, `["giftwrap"]` does not. The same on every
    /// backend; no index serves it (it reads each item's text).
    public func hasElement(_ element: Value) -> Filter {
        // As the element's JSON: a date as its ISO 8601 text, a UUID as text, bytes as base64, a
        // double that is not finite as the string the encoder writes for it.
        switch element {
        case .null: .hasElement(name, .null)
        case .bool, .int, .string: .hasElement(name, element)
        case .double(let value): .hasElement(name, StructuredValue.element(value))
        case .bytes(let value): .hasElement(name, StructuredValue.element(Data(value)))
        case .date(let value): .hasElement(name, StructuredValue.element(value.date))
        case .uuid(let value): .hasElement(name, StructuredValue.element(value))
        }
    }
}

/// One entry of a Flapjack-style attribute dictionary: a value means `==`, an array `in`,
/// a range "between" (inclusive), nil "is null".
public enum AttributeMatch: Sendable, Hashable, ExpressibleByNilLiteral, ExpressibleByStringLiteral,
    ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral
{
/// The attribute equals the value.
    case value(Value)
/// The attribute equals one of the values.
    case anyOf([Value])
/// The attribute lies between the two values, both included.
    case between(Value, Value)
    /// The attribute is null.
    case null

    public init(nilLiteral: ()) { self = .null }
    public init(stringLiteral value: String) { self = .value(.string(value)) }
    public init(integerLiteral value: Int64) { self = .value(.int(value)) }
    public init(floatLiteral value: Double) { self = .value(.double(value)) }
    public init(booleanLiteral value: Bool) { self = .value(.bool(value)) }
    public init(arrayLiteral elements: Value...) { self = .anyOf(elements) }

    /// An inclusive range of integers.
    public static func range(_ range: ClosedRange<Int64>) -> AttributeMatch {
        .between(.int(range.lowerBound), .int(range.upperBound))
    }
}

extension Filter {
    /// Every entry of the dictionary must match (Flapjack's attribute dictionaries).
    public static func matching(_ attributes: [String: AttributeMatch]) -> Filter {
        .and(attributes.sorted { $0.key < $1.key }.map { name, match in
            switch match {
            case .value(let v): return .compare(name, .equal, v)
            case .anyOf(let vs): return .among(name, vs)
            case let .between(lo, hi): return .and([.compare(name, .greaterOrEqual, lo),
                                                    .compare(name, .lessOrEqual, hi)])
            case .null: return .isNull(name)
            }
        })
    }

    /// Evaluates the filter on a record with the canonical two-valued semantics.
    public func matches(_ record: Record) -> Bool {
        switch self {
        case .all:
            return true
        case let .compare(attribute, op, value):
            return Filter.compare(record[attribute], op, value)
        case let .among(attribute, values):
            return Filter.among(record[attribute], values)
        case .isNull(let attribute):
            return record[attribute].isNull
        case let .hasPrefix(attribute, prefix):
            return Filter.hasPrefix(record[attribute], prefix.utf8)
        case let .contains(attribute, needle):
            return Filter.contains(record[attribute], Array(needle.utf8))
        case let .hasElement(attribute, element):
            return StructuredValue.arrayHolds(record[attribute], element)
        case .and(let filters):
            return filters.allSatisfy { $0.matches(record) }
        case .or(let filters):
            return filters.contains { $0.matches(record) }
        case .not(let inner):
            return !inner.matches(record)
        case .any, .relatedCount:
            // Related items are not in the record: a store resolves these before it filters.
            return false
        }
    }

    // The leaves' semantics, shared with ``CompiledFilter``.

    static func compare(_ actual: Value, _ op: ComparisonOperator, _ value: Value) -> Bool {
        switch op {
        case .equal: return Value.compareCanonical(actual, value) == 0
        case .notEqual: return Value.compareCanonical(actual, value) != 0
        default:
            if actual.isNull || value.isNull { return false }
            let c = Value.compareCanonical(actual, value)
            switch op {
            case .less: return c < 0
            case .lessOrEqual: return c <= 0
            case .greater: return c > 0
            default: return c >= 0
            }
        }
    }

    static func among(_ actual: Value, _ values: [Value]) -> Bool {
        values.contains { Value.compareCanonical(actual, $0) == 0 }
    }

    static func hasPrefix(_ actual: Value, _ prefix: some Sequence<UInt8>) -> Bool {
        guard case .string(let s) = actual else { return false }
        return s.utf8.starts(with: prefix)
    }

    static func contains(_ actual: Value, _ needle: [UInt8]) -> Bool {
        guard case .string(let s) = actual else { return false }
        return Filter.bytes(Array(s.utf8), contain: needle)
    }

    /// Checks the filter against ``Limits/maxFilterDepth`` and ``Limits/maxFilterTerms``.
    /// - Throws: `limitExceeded` naming the entity.
    func checkSize(entity: String) throws(StoreError) {
        var terms = 0
        var deepest = 0
        var pending: [(Filter, Int)] = [(self, 0)]
        while let (filter, depth) = pending.popLast() {
            deepest = Swift.max(deepest, depth)
            switch filter {
            case .and(let children), .or(let children):
                pending += children.map { ($0, depth + 1) }
            case .not(let inner), .any(_, let inner):
                pending.append((inner, depth + 1))
            case .among(_, let values):
                terms += Swift.max(1, values.count)
            case .all:
                break
            default:
                terms += 1
            }
            if deepest > Limits.maxFilterDepth {
                throw StoreError(.limitExceeded, "filter on '\(entity)' nests more than \(Limits.maxFilterDepth) "
                    + "levels deep")
            }
            if terms > Limits.maxFilterTerms {
                throw StoreError(.limitExceeded, "filter on '\(entity)' has more than \(Limits.maxFilterTerms) "
                    + "terms")
            }
        }
    }

    static func bytes(_ haystack: [UInt8], contain needle: [UInt8]) -> Bool {
        if needle.isEmpty { return true }
        if needle.count > haystack.count { return false }
        for start in 0...(haystack.count - needle.count)
        where haystack[start] == needle[0] && haystack[start..<start + needle.count].elementsEqual(needle) {
            return true
        }
        return false
    }
}
