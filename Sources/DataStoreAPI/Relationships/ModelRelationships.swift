/// A relationship between two model types, declared once as a value the compiler checks:
///
/// ```swift
/// struct Author: DataObject {
///     static let posts = toMany("posts", Post.self, inverse: "author", deleteRule: .cascade)
///     static let relationships = [posts.relationship]
///     ...
/// }
/// ```
///
/// Requests then take the value (`including: Author.posts`, `author.related(Author.posts)`,
/// `where: Post.author[\.name] == "Ann"`), so a misspelt relationship does not compile. The
/// names stay in the schema, and the untyped API keeps taking them as strings.
public protocol ModelRelationship<Source>: EagerLoading {
    /// The model the relationship is declared on.
    associatedtype Source
    /// The model it leads to.
    associatedtype Target: DataObject
    /// The relationship as the schema declares it.
    var relationship: Relationship { get }
}

extension ModelRelationship {
    /// The relationship's name in the schema.
    public var name: String { relationship.name }

    public var includes: [Include] { [Include(relationship.name)] }

    /// Loads this relationship and, with each related object, `more` of the related model.
    public func including(_ more: any EagerLoading<Target>...) -> Including<Source> {
        Including([Include(relationship.name, including: more.flatMap(\.includes))])
    }
}

/// A to-many relationship of `Source` to `Target`: the other side of a to-one of `Target`
/// (one-to-many) or of another to-many (many-to-many).
public struct ToMany<Source: DataObject, Target: DataObject>: ModelRelationship {
    public let relationship: Relationship

    /// The to-many `name`, whose inverse is `Target`'s relationship `inverse`; `ordered` keeps
    /// its objects in the order they are put in.
    public init(_ name: String, inverse: String, deleteRule: Relationship.DeleteRule = .nullify,
                ordered: Bool = false) {
        relationship = .toMany(name, to: Target.entityName, inverse: inverse, deleteRule: deleteRule,
                               ordered: ordered)
    }
}

/// A to-one relationship of `Source` to `Target`, stored in `Source`'s attribute of the same
/// name, which holds the related object's key.
public struct ToOne<Source: DataObject, Target: DataObject>: ModelRelationship {
    public let relationship: Relationship

    /// The to-one `name` (the attribute holding the key), optional or required.
    public init(_ name: String, inverse: String? = nil, optional: Bool = true,
                deleteRule: Relationship.DeleteRule = .nullify) {
        relationship = .toOne(name, to: Target.entityName, inverse: inverse, optional: optional,
                              deleteRule: deleteRule)
    }

    /// An attribute of the related object, for filters and sorts across the relationship:
    /// `Post.author[\.name] == "Ann"`, `.ascending(Post.author[\.name])`.
    public subscript<V>(_ keyPath: KeyPath<Target, V>) -> RelatedAttribute<Source, V> {
        let path = UncheckedKeyPath<Target>(keyPath)
        let name = relationship.name
        return RelatedAttribute { "\(name).\(try KeyPathNames.name(of: path.keyPath))" }
    }
}

extension DataObject {
    /// A to-many relationship of this model to `target` (see ``ToMany``).
    public static func toMany<Target: DataObject>(_ name: String, _ target: Target.Type, inverse: String,
                                                  deleteRule: Relationship.DeleteRule = .nullify,
                                                  ordered: Bool = false) -> ToMany<Self, Target> {
        ToMany(name, inverse: inverse, deleteRule: deleteRule, ordered: ordered)
    }

    /// A to-one relationship of this model to `target` (see ``ToOne``).
    public static func toOne<Target: DataObject>(_ name: String, _ target: Target.Type, inverse: String? = nil,
                                                 optional: Bool = true,
                                                 deleteRule: Relationship.DeleteRule = .nullify) -> ToOne<Self, Target> {
        ToOne(name, inverse: inverse, optional: optional, deleteRule: deleteRule)
    }
}

/// What to load with each object of `Source`: a relationship (`Author.posts`), or one with
/// what to load with its objects in turn (`Author.posts.including(Post.tags)`).
public protocol EagerLoading<Source>: Sendable {
    associatedtype Source: DataObject
    /// The untyped includes.
    var includes: [Include] { get }
}

/// Relationships of `Source` to load, with what to load with their objects.
public struct Including<Source: DataObject>: EagerLoading {
    public let includes: [Include]

    init(_ includes: [Include]) { self.includes = includes }
}

/// An attribute of an object related through a to-one, named by a key path of the related
/// model: `Post.author[\.name]`.
public struct RelatedAttribute<Source: DataObject, Value>: Sendable {
    let name: @Sendable () throws -> String

    init(_ name: @escaping @Sendable () throws -> String) { self.name = name }
}

extension Related {
    /// The objects related through `relationship` (empty when it was not included), in
    /// primary-key order.
    public func related<U: DataObject>(_ relationship: ToMany<T, U>) throws -> [U] {
        try related(relationship.name, as: U.self)
    }

    /// The object related through `relationship`, if there is one and it was included.
    public func related<U: DataObject>(_ relationship: ToOne<T, U>) throws -> U? {
        try related(relationship.name, as: U.self).first
    }

    /// The objects related through `relationship`, each with what was included for it in turn.
    public func relatedGraphs<U: DataObject>(_ relationship: ToMany<T, U>) throws -> [Related<U>] {
        try related(relationship.name, including: U.self)
    }

    /// The object related through `relationship`, with what was included for it in turn.
    public func relatedGraph<U: DataObject>(_ relationship: ToOne<T, U>) throws -> Related<U>? {
        try related(relationship.name, including: U.self).first
    }
}

extension ReadAccessor {
    /// The objects related to `object` through `relationship`, in primary-key order (in their
    /// own order when the relationship is ordered).
    public func related<T: DataObject, U: DataObject>(_ relationship: ToMany<T, U>, of object: T) throws -> [U] {
        try related(U.self, of: object, relationship.name)
    }

    /// The object `object` refers to through `relationship`, if any.
    public func related<T: DataObject, U: DataObject>(_ relationship: ToOne<T, U>, of object: T) throws -> U? {
        try related(U.self, of: object, relationship.name).first
    }

    /// The objects matching `filter`, each with the related objects `including` names, loaded
    /// in a bounded number of queries per relationship level.
    public func fetch<T: DataObject>(_ type: T.Type, where filter: ObjectFilter<T>? = nil,
                                     sortedBy sort: [ObjectSort<T>] = [], offset: Int = 0, limit: Int? = nil,
                                     including first: any EagerLoading<T>,
                                     _ more: any EagerLoading<T>...) throws -> [Related<T>] {
        try fetch(type, where: filter?.filter() ?? .all, sortedBy: sort.isEmpty ? nil : sort.map { try $0.sortKey() },
                  offset: offset, limit: limit, including: ([first] + more).flatMap(\.includes))
    }
}

extension DataStore {
    /// A live query of objects with their related objects: delivered again whenever one of
    /// them, or one of their related objects, changes.
    public func observe<T: DataObject>(_ type: T.Type, where filter: ObjectFilter<T>? = nil,
                                       including first: any EagerLoading<T>,
                                       _ more: any EagerLoading<T>...) throws -> GraphObservation {
        observe(FetchRequest(T.entityName, filter: try filter?.filter() ?? .all, sort: T.defaultSort),
                including: ([first] + more).flatMap(\.includes))
    }
}

extension ObjectFilter {
    /// Some object related through `relationship` matches `filter`.
    public static func any<U: DataObject>(_ relationship: ToMany<T, U>, _ filter: ObjectFilter<U>) -> ObjectFilter {
        ObjectFilter { .any(relationship.name, try filter.filter()) }
    }

    /// Every object related through `relationship` matches `filter` (true for none).
    public static func every<U: DataObject>(_ relationship: ToMany<T, U>, _ filter: ObjectFilter<U>) -> ObjectFilter {
        ObjectFilter { .every(relationship.name, try filter.filter()) }
    }

    /// The number of objects related through `relationship` compares with `count`.
    public static func relatedCount<U: DataObject>(_ relationship: ToMany<T, U>, _ op: ComparisonOperator,
                                                   _ count: Int) -> ObjectFilter {
        ObjectFilter { .relatedCount(relationship.name, op, count) }
    }

    static func compare<V>(_ attribute: RelatedAttribute<T, V>, _ op: ComparisonOperator, _ value: Value)
        -> ObjectFilter
    {
        ObjectFilter { .compare(try attribute.name(), op, value) }
    }
}

extension ObjectSort {
    /// Ascending by an attribute of the related object (nulls first).
    public static func ascending<V>(_ attribute: RelatedAttribute<T, V>, caseInsensitive: Bool = false) -> ObjectSort {
        ObjectSort(name: attribute.name, ascending: true, caseInsensitive: caseInsensitive)
    }

    /// Descending by an attribute of the related object (nulls last).
    public static func descending<V>(_ attribute: RelatedAttribute<T, V>, caseInsensitive: Bool = false) -> ObjectSort {
        ObjectSort(name: attribute.name, ascending: false, caseInsensitive: caseInsensitive)
    }
}

// MARK: Comparisons of a related attribute with a value

/// The related attribute equals the value (a missing related object reads null).
public func == <T: DataObject, V: StoreValueConvertible>(lhs: RelatedAttribute<T, V>, rhs: V) -> ObjectFilter<T> {
    .compare(lhs, .equal, rhs.storeValue)
}

/// The related attribute differs from the value.
public func != <T: DataObject, V: StoreValueConvertible>(lhs: RelatedAttribute<T, V>, rhs: V) -> ObjectFilter<T> {
    .compare(lhs, .notEqual, rhs.storeValue)
}

/// The related attribute is less than the value.
public func < <T: DataObject, V: StoreValueConvertible>(lhs: RelatedAttribute<T, V>, rhs: V) -> ObjectFilter<T> {
    .compare(lhs, .less, rhs.storeValue)
}

/// The related attribute is at most the value.
public func <= <T: DataObject, V: StoreValueConvertible>(lhs: RelatedAttribute<T, V>, rhs: V) -> ObjectFilter<T> {
    .compare(lhs, .lessOrEqual, rhs.storeValue)
}

/// The related attribute is greater than the value.
public func > <T: DataObject, V: StoreValueConvertible>(lhs: RelatedAttribute<T, V>, rhs: V) -> ObjectFilter<T> {
    .compare(lhs, .greater, rhs.storeValue)
}

/// The related attribute is at least the value.
public func >= <T: DataObject, V: StoreValueConvertible>(lhs: RelatedAttribute<T, V>, rhs: V) -> ObjectFilter<T> {
    .compare(lhs, .greaterOrEqual, rhs.storeValue)
}

extension WriteAccessor {
    /// Relates `object` to `target` through `relationship` (a to-many; for a to-one, set the
    /// property that holds the key and save the object).
    public func link<T: DataObject, U: DataObject>(_ object: T, _ relationship: ToMany<T, U>, to target: U) throws {
        try link(T.entityName, key: object.primaryKeyValue(), relationship.name, to: target.primaryKeyValue())
    }

    /// Ends the relation of `object` to `target` through `relationship`; returns whether they
    /// were related.
    @discardableResult
    public func unlink<T: DataObject, U: DataObject>(_ object: T, _ relationship: ToMany<T, U>,
                                                     from target: U) throws -> Bool {
        try unlink(T.entityName, key: object.primaryKeyValue(), relationship.name, from: target.primaryKeyValue())
    }

    /// Puts `target` at `index` of `object`'s ordered `relationship`, moving it when it is
    /// already there (see ``link(_:key:_:to:at:)``).
    public func link<T: DataObject, U: DataObject>(_ object: T, _ relationship: ToMany<T, U>, to target: U,
                                                   at index: Int) throws {
        try link(T.entityName, key: object.primaryKeyValue(), relationship.name, to: target.primaryKeyValue(),
                 at: index)
    }

    /// Moves the object at `source` of `object`'s ordered `relationship` to `destination`.
    public func move<T: DataObject, U: DataObject>(in object: T, _ relationship: ToMany<T, U>, from source: Int,
                                                   to destination: Int) throws {
        try moveRelated(T.entityName, key: object.primaryKeyValue(), relationship.name, from: source,
                        to: destination)
    }

    /// Removes the object at `index` of `object`'s ordered `relationship` from it and returns it.
    @discardableResult
    public func unlink<T: DataObject, U: DataObject>(_ object: T, _ relationship: ToMany<T, U>,
                                                     at index: Int) throws -> U {
        let key = try unlink(T.entityName, key: object.primaryKeyValue(), relationship.name, at: index)
        guard let record = try get(U.entityName, key: key) else {
            throw StoreError(.notFound, "no '\(U.entityName)' with key \(key)")
        }
        return try RecordDecoder.decode(U.self, from: record)
    }
}
