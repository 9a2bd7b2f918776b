import Foundation

/// A filter over a ``DataObject`` type that names attributes by key path, checked by the
/// compiler: `where: \.rating >= minRating && \.flavor == "plain"`.
///
/// Key paths become attribute names when the request runs: the first request of a type decodes
/// it once per stored property from a probe that changes one property at a time, and a key path
/// names the property whose change it sees. A key path to a computed property, into a nested
/// value or to an enum with one case is refused with `invalidArgument`. The untyped ``Filter``
/// with string names stays for stores without a model type.
public struct ObjectFilter<T: DataObject>: Sendable {
    private let make: @Sendable () throws -> Filter

    init(_ make: @escaping @Sendable () throws -> Filter) { self.make = make }

    /// A typed filter from an untyped one (`.init(Field("rating") > 3)`).
    public init(_ filter: Filter) { make = { filter } }

    /// The filter with attribute names.
    /// - Throws: `invalidArgument` for a key path that names no stored property.
    public func filter() throws -> Filter { try make() }

    static func compare(_ keyPath: PartialKeyPath<T>, _ op: ComparisonOperator, _ value: Value) -> ObjectFilter {
        let path = UncheckedKeyPath(keyPath)
        return ObjectFilter { .compare(try KeyPathNames.name(of: path.keyPath), op, value) }
    }

    /// Both filters match.
    public static func && (lhs: ObjectFilter, rhs: ObjectFilter) -> ObjectFilter {
        ObjectFilter { .and([try lhs.make(), try rhs.make()]) }
    }

    /// Either filter matches.
    public static func || (lhs: ObjectFilter, rhs: ObjectFilter) -> ObjectFilter {
        ObjectFilter { .or([try lhs.make(), try rhs.make()]) }
    }

    /// The filter does not match.
    public static prefix func ! (filter: ObjectFilter) -> ObjectFilter { ObjectFilter { .not(try filter.make()) } }

    /// The attribute equals one of the values (`in`).
    public static func among<V: StoreValueConvertible>(_ keyPath: KeyPath<T, V>, _ values: [V]) -> ObjectFilter {
        let path = UncheckedKeyPath(keyPath)
        let values = values.map(\.storeValue)
        return ObjectFilter { .among(try KeyPathNames.name(of: path.keyPath), values) }
    }

    /// The string attribute starts with `prefix` (byte-wise, case-sensitive).
    public static func hasPrefix(_ keyPath: KeyPath<T, String>, _ prefix: String) -> ObjectFilter {
        let path = UncheckedKeyPath(keyPath)
        return ObjectFilter { .hasPrefix(try KeyPathNames.name(of: path.keyPath), prefix) }
    }

    /// The string attribute contains `text` (byte-wise, case-sensitive).
    public static func contains(_ keyPath: KeyPath<T, String>, _ text: String) -> ObjectFilter {
        let path = UncheckedKeyPath(keyPath)
        return ObjectFilter { .contains(try KeyPathNames.name(of: path.keyPath), text) }
    }

    /// The array property has `element` as one of its elements, as `Array.contains` says:
    /// `.contains(\.tags, "gift")` matches `["gift", "red"]`, not `["giftwrap"]` (see
    /// ``Field/hasElement(_:)``).
    public static func contains<E: StoreValueConvertible & Encodable>(_ keyPath: KeyPath<T, [E]>,
                                                                       _ element: E) -> ObjectFilter {
        let path = UncheckedKeyPath(keyPath)
        let value = StructuredValue.element(element)
        return ObjectFilter { .hasElement(try KeyPathNames.name(of: path.keyPath), value) }
    }

    /// The optional array property has `element` as one of its elements.
    public static func contains<E: StoreValueConvertible & Encodable>(_ keyPath: KeyPath<T, [E]?>,
                                                                       _ element: E) -> ObjectFilter {
        let path = UncheckedKeyPath(keyPath)
        let value = StructuredValue.element(element)
        return ObjectFilter { .hasElement(try KeyPathNames.name(of: path.keyPath), value) }
    }

    /// The set property has `element` as one of its elements.
    public static func contains<E: StoreValueConvertible & Encodable & Hashable>(_ keyPath: KeyPath<T, Set<E>>,
                                                                                  _ element: E) -> ObjectFilter {
        let path = UncheckedKeyPath(keyPath)
        let value = StructuredValue.element(element)
        return ObjectFilter { .hasElement(try KeyPathNames.name(of: path.keyPath), value) }
    }
}

/// A key path held in a `@Sendable` closure. Key paths to stored properties of a `Sendable`
/// model are immutable values, safe to share; the compiler cannot see that through
/// `PartialKeyPath`, which is not `Sendable`.
struct UncheckedKeyPath<T>: @unchecked Sendable {
    let keyPath: PartialKeyPath<T>
    init(_ keyPath: PartialKeyPath<T>) { self.keyPath = keyPath }
}

/// A sort key of a ``DataObject`` type by key path: `.ascending(\.flavor)`.
public struct ObjectSort<T: DataObject>: Sendable {
    private let name: @Sendable () throws -> String
    private let ascending: Bool
    private let caseInsensitive: Bool

    init(name: @escaping @Sendable () throws -> String, ascending: Bool, caseInsensitive: Bool) {
        self.name = name
        self.ascending = ascending
        self.caseInsensitive = caseInsensitive
    }

    /// Ascending by the attribute (nulls first); ASCII case folded when `caseInsensitive`.
    public static func ascending(_ keyPath: PartialKeyPath<T>, caseInsensitive: Bool = false) -> ObjectSort {
        let path = UncheckedKeyPath(keyPath)
        return ObjectSort(name: { try KeyPathNames.name(of: path.keyPath) }, ascending: true,
                          caseInsensitive: caseInsensitive)
    }

    /// Descending by the attribute (nulls last).
    public static func descending(_ keyPath: PartialKeyPath<T>, caseInsensitive: Bool = false) -> ObjectSort {
        let path = UncheckedKeyPath(keyPath)
        return ObjectSort(name: { try KeyPathNames.name(of: path.keyPath) }, ascending: false,
                          caseInsensitive: caseInsensitive)
    }

    /// The sort key with the attribute's name.
    public func sortKey() throws -> SortKey {
        let name = try self.name()
        return ascending ? .ascending(name, caseInsensitive: caseInsensitive)
            : .descending(name, caseInsensitive: caseInsensitive)
    }
}

// MARK: Comparisons of a key path with a value

/// The attribute equals the value.
public func == <T: DataObject, V: StoreValueConvertible>(lhs: KeyPath<T, V>, rhs: V) -> ObjectFilter<T> {
    .compare(lhs, .equal, rhs.storeValue)
}

/// The attribute differs from the value.
public func != <T: DataObject, V: StoreValueConvertible>(lhs: KeyPath<T, V>, rhs: V) -> ObjectFilter<T> {
    .compare(lhs, .notEqual, rhs.storeValue)
}

/// The attribute is less than the value.
public func < <T: DataObject, V: StoreValueConvertible>(lhs: KeyPath<T, V>, rhs: V) -> ObjectFilter<T> {
    .compare(lhs, .less, rhs.storeValue)
}

/// The attribute is at most the value.
public func <= <T: DataObject, V: StoreValueConvertible>(lhs: KeyPath<T, V>, rhs: V) -> ObjectFilter<T> {
    .compare(lhs, .lessOrEqual, rhs.storeValue)
}

/// The attribute is greater than the value.
public func > <T: DataObject, V: StoreValueConvertible>(lhs: KeyPath<T, V>, rhs: V) -> ObjectFilter<T> {
    .compare(lhs, .greater, rhs.storeValue)
}

/// The attribute is at least the value.
public func >= <T: DataObject, V: StoreValueConvertible>(lhs: KeyPath<T, V>, rhs: V) -> ObjectFilter<T> {
    .compare(lhs, .greaterOrEqual, rhs.storeValue)
}

/// The attribute equals the enum's raw value.
public func == <T: DataObject, E: RawRepresentable>(lhs: KeyPath<T, E>, rhs: E) -> ObjectFilter<T>
where E.RawValue: StoreValueConvertible {
    .compare(lhs, .equal, rhs.rawValue.storeValue)
}

/// The attribute differs from the enum's raw value.
public func != <T: DataObject, E: RawRepresentable>(lhs: KeyPath<T, E>, rhs: E) -> ObjectFilter<T>
where E.RawValue: StoreValueConvertible {
    .compare(lhs, .notEqual, rhs.rawValue.storeValue)
}

/// The optional attribute equals the enum's raw value (or is null, for `nil`).
public func == <T: DataObject, E: RawRepresentable>(lhs: KeyPath<T, E?>, rhs: E?) -> ObjectFilter<T>
where E.RawValue: StoreValueConvertible {
    .compare(lhs, .equal, rhs?.rawValue.storeValue ?? .null)
}

// An enum that is also StoreValueConvertible (one declared RowValue) matches both forms above;
// these, more specific than either, take it (as its raw value, which both would store).

/// The attribute equals the enum's raw value.
public func == <T: DataObject, E: RawRepresentable & StoreValueConvertible>(lhs: KeyPath<T, E>, rhs: E)
    -> ObjectFilter<T> where E.RawValue: StoreValueConvertible {
    .compare(lhs, .equal, rhs.rawValue.storeValue)
}

/// The attribute differs from the enum's raw value.
public func != <T: DataObject, E: RawRepresentable & StoreValueConvertible>(lhs: KeyPath<T, E>, rhs: E)
    -> ObjectFilter<T> where E.RawValue: StoreValueConvertible {
    .compare(lhs, .notEqual, rhs.rawValue.storeValue)
}

/// The optional attribute equals the enum's raw value (or is null, for `nil`).
public func == <T: DataObject, E: RawRepresentable & StoreValueConvertible>(lhs: KeyPath<T, E?>, rhs: E?)
    -> ObjectFilter<T> where E.RawValue: StoreValueConvertible {
    .compare(lhs, .equal, rhs?.rawValue.storeValue ?? .null)
}

// MARK: Typed requests

extension ReadAccessor {
    /// The objects matching `filter`, sorted by `sort` (the type's default sort when empty).
    public func fetch<T: DataObject>(_ type: T.Type, where filter: ObjectFilter<T>,
                                     sortedBy sort: [ObjectSort<T>] = [], offset: Int = 0,
                                     limit: Int? = nil) throws -> [T] {
        try fetch(type, where: filter.filter(), sortedBy: sort.isEmpty ? nil : sort.map { try $0.sortKey() },
                  offset: offset, limit: limit)
    }

    /// The objects sorted by one key path, ascending (`sortedBy: \.flavor`).
    public func fetch<T: DataObject>(_ type: T.Type, where filter: ObjectFilter<T>? = nil,
                                     sortedBy keyPath: PartialKeyPath<T>, offset: Int = 0,
                                     limit: Int? = nil) throws -> [T] {
        try fetch(type, where: filter?.filter() ?? .all, sortedBy: [try ObjectSort<T>.ascending(keyPath).sortKey()],
                  offset: offset, limit: limit)
    }

    /// The first object matching `filter` in the type's default sort, if any.
    public func first<T: DataObject>(_ type: T.Type, where filter: ObjectFilter<T>) throws -> T? {
        try first(type, where: filter.filter())
    }

    /// How many objects match `filter`.
    public func count<T: DataObject>(_ type: T.Type, where filter: ObjectFilter<T>) throws -> Int {
        try count(type, where: filter.filter())
    }

    /// The objects matching `filter`, each with the related objects `including` names.
    public func fetch<T: DataObject>(_ type: T.Type, where filter: ObjectFilter<T>,
                                     sortedBy sort: [ObjectSort<T>] = [], offset: Int = 0, limit: Int? = nil,
                                     including: [Include]) throws -> [Related<T>] {
        try fetch(type, where: filter.filter(), sortedBy: sort.isEmpty ? nil : sort.map { try $0.sortKey() },
                  offset: offset, limit: limit, including: including)
    }
}

extension WriteAccessor {
    /// Deletes the objects matching `filter` (with their delete rules); returns how many.
    @discardableResult
    public func delete<T: DataObject>(_ type: T.Type, where filter: ObjectFilter<T>) throws -> Int {
        try delete(FetchRequest(T.entityName, filter: filter.filter()))
    }
}

extension DataStore {
    /// Typed live query by key paths: the objects matching `filter` in `sort` order (the
    /// type's default sort when empty), now and after each commit that changes them.
    /// - Throws: `invalidArgument` for a key path that names no stored property.
    public func observe<T: DataObject>(_ type: T.Type, where filter: ObjectFilter<T>,
                                       sortedBy sort: [ObjectSort<T>] = [], offset: Int = 0,
                                       limit: Int? = nil) throws -> some AsyncSequence<[T], any Error> {
        observe(type, where: try filter.filter(), sortedBy: sort.isEmpty ? nil : try sort.map { try $0.sortKey() },
                offset: offset, limit: limit)
    }
}
