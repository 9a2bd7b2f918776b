/// One sort key: an attribute, a direction, and optional ASCII case folding.
///
/// Ascending order puts nulls first; strings compare by UTF-8 bytes; case-insensitive sorting
/// folds ASCII letters only (SQLite's NOCASE). Ties after every sort key are broken by the
/// primary key, ascending, so pages are identical on every backend.
public struct SortKey: Sendable, Hashable {
    /// The attribute to sort by.
    public var attribute: String
    /// Ascending (nulls first) or descending (nulls last).
    public var ascending: Bool
    /// Whether ASCII letters compare without case (strings only).
    public var caseInsensitive: Bool

    /// A sort key.
    public init(_ attribute: String, ascending: Bool = true, caseInsensitive: Bool = false) {
        self.attribute = attribute
        self.ascending = ascending
        self.caseInsensitive = caseInsensitive
    }

    /// Ascending order of `attribute`.
    public static func ascending(_ attribute: String, caseInsensitive: Bool = false) -> SortKey {
        SortKey(attribute, ascending: true, caseInsensitive: caseInsensitive)
    }

    /// Descending order of `attribute`.
    public static func descending(_ attribute: String, caseInsensitive: Bool = false) -> SortKey {
        SortKey(attribute, ascending: false, caseInsensitive: caseInsensitive)
    }
}

/// A query: entity, filter, sort keys, offset and limit.
public struct FetchRequest: Sendable, Hashable {
    /// The entity to query.
    public var entity: String
    /// Which items match.
    public var filter: Filter
    /// The order; ties (and an empty list) by primary key.
    public var sort: [SortKey]
    /// How many matching items to skip.
    public var offset: Int
    /// The most items to return; `nil` for no limit.
    public var limit: Int?

    /// A request; offset and limit must not be negative.
    public init(_ entity: String, filter: Filter = .all, sort: [SortKey] = [], offset: Int = 0, limit: Int? = nil) {
        self.entity = entity
        self.filter = filter
        self.sort = sort
        self.offset = offset
        self.limit = limit
    }
}

extension Array where Element == SortKey {
    /// Compares two records by these sort keys, then by their encoded primary keys.
    @_spi(Backend) public func compare(_ a: (key: [UInt8], record: Record),
                                       _ b: (key: [UInt8], record: Record)) -> Int {
        for sortKey in self {
            var c = Value.compareCanonical(a.record[sortKey.attribute], b.record[sortKey.attribute],
                                           foldingASCIICase: sortKey.caseInsensitive)
            if !sortKey.ascending { c = -c }
            if c != 0 { return c }
        }
        return Value.compareBytes(a.key, b.key)
    }
}

extension FetchRequest {
    /// Applies offset and limit to rows in the request's order.
    @_spi(Backend) public func page<T>(_ rows: [T]) -> [T] {
        let start = Swift.min(offset, rows.count)
        let end = limit.map { start + Swift.min($0, rows.count - start) } ?? rows.count
        return Array(rows[start..<end])
    }
}
