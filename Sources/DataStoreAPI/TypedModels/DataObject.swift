/// A `Codable` model type stored as an entity (Flapjack's `DataObject`).
///
/// ```swift
/// struct Pancake: DataObject {
///     static let entityName = "Pancake"
///     static let primaryKey = "id"
///     static let defaultSort = [SortKey.ascending("name")]
///     var id: String
///     var name: String
///     var rating: Int?
/// }
/// ```
///
/// The entity schema is derived from the type's `Codable` conformance (flat models of
/// `Bool`, integers, `Double`, `Float`, `String`, `Data`, `[UInt8]`, `Date`, `UUID`, and
/// optionals of these) and its ``relationships``; declare ``entitySchema()`` explicitly to add
/// indexes or defaults.
///
/// A to-one relationship is a property named as the relationship that holds the related
/// object's key (`var author: Int`); a to-many has no property: ``ReadAccessor/related(_:of:_:)``
/// loads it, and ``ReadAccessor/fetch(_:where:sortedBy:offset:limit:including:)-(_,Filter,_,_,_,_)`` loads it for
/// many objects at once.
public protocol DataObject: Codable, Sendable {
    /// The entity's name.
    static var entityName: String { get }
    /// The primary-key attribute's name.
    static var primaryKey: String { get }
    /// The order of fetches that give no sort keys; ties by primary key.
    static var defaultSort: [SortKey] { get }
    /// The entity's relationships (none by default).
    static var relationships: [Relationship] { get }
    /// The entity schema; by default derived from the `Codable` conformance and ``relationships``.
    static func entitySchema() throws -> EntitySchema
}

extension DataObject {
    public static var defaultSort: [SortKey] { [] }

    public static var relationships: [Relationship] { [] }

    public static func entitySchema() throws -> EntitySchema {
        var entity = try SchemaProbe.entitySchema(of: Self.self)
        entity.relationships = relationships
        return entity
    }

    /// The object's primary key.
    public func primaryKeyValue() throws -> Value {
        try RecordEncoder.encode(self)[Self.primaryKey]
    }
}

extension ReadAccessor {
    /// The objects matching `filter`, in `sort` order (the type's default sort when `nil`).
    // Inlinable, as `forEach` below: specialized for `T` in the caller, the loop appends to an
    // array of a known type; unspecialized, each append looks up `Array<T>`'s metadata in the
    // runtime.
    @inlinable
    public func fetch<T: DataObject>(_ type: T.Type, where filter: Filter = .all, sortedBy sort: [SortKey]? = nil,
                                     offset: Int = 0, limit: Int? = nil) throws -> [T] {
        let request = FetchRequest(T.entityName, filter: filter, sort: sort ?? T.defaultSort, offset: offset,
                                   limit: limit)
        var objects: [T] = []
        if readsRowsInPlace(request) {
            // Each object decoded from the backend's row (no record built in between).
            let rows = RowModelDecoder<T>()
            try visit(request) { row in objects.append(try rows.decode(row)) }
        } else {
            let records = RecordRowDecoder<T>()
            try forEach(request) { objects.append(try records.decode($0)) }
        }
        return objects
    }

    /// Hands each object matching `filter`, in `sort` order (the type's default sort when `nil`),
    /// to `body` without building an array of them (see ``ReadAccessor/forEach(_:_:)``).
    @inlinable
    public func forEach<T: DataObject>(_ type: T.Type, where filter: Filter = .all, sortedBy sort: [SortKey]? = nil,
                                       offset: Int = 0, limit: Int? = nil, _ body: (T) throws -> Void) throws {
        let request = FetchRequest(T.entityName, filter: filter, sort: sort ?? T.defaultSort, offset: offset,
                                   limit: limit)
        if readsRowsInPlace(request) {
            let rows = RowModelDecoder<T>()
            try visit(request) { row in try body(try rows.decode(row)) }
        } else {
            let records = RecordRowDecoder<T>()
            try forEach(request) { try body(try records.decode($0)) }
        }
    }

    /// The first object matching `filter` in the type's default sort, if any.
    public func first<T: DataObject>(_ type: T.Type, where filter: Filter = .all) throws -> T? {
        try fetch(type, where: filter, limit: 1).first
    }

    /// How many objects match `filter`.
    public func count<T: DataObject>(_ type: T.Type, where filter: Filter = .all) throws -> Int {
        try count(FetchRequest(T.entityName, filter: filter))
    }

    /// The object with that primary key, or `nil`.
    public func get<T: DataObject>(_ type: T.Type, key: Value) throws -> T? {
        try get(T.entityName, key: key).map { try RecordDecoder.decode(T.self, from: $0) }
    }
}

extension WriteAccessor {
    /// Stores a new object. Throws `keyExists` when its key is taken.
    public func insert<T: DataObject>(_ object: T) throws {
        try insert(RecordEncoder.encode(object), into: T.entityName)
    }

    /// Stores new objects as `insert(_:)` does each, in order, in as few round trips as the
    /// backend allows (on PostgreSQL one `COPY` or one statement, where a loop of `insert(_:)`
    /// waits for the server once per object).
    /// - Throws: as `insert(_:)`, for the first object that cannot be stored.
    public func insert<T: DataObject>(contentsOf objects: some Sequence<T>) throws {
        try insert(contentsOf: objects.map { try RecordEncoder.encode($0) }, into: T.entityName)
    }

    /// Stores an object, replacing the one with the same key.
    public func save<T: DataObject>(_ object: T) throws {
        try save(RecordEncoder.encode(object), into: T.entityName)
    }

    /// Deletes the object's item; returns whether it existed.
    @discardableResult
    public func delete<T: DataObject>(_ object: T) throws -> Bool {
        try delete(T.entityName, key: object.primaryKeyValue())
    }
}
