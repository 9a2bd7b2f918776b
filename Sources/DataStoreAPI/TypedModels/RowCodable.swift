import Foundation

/// A model that reads itself from a row and writes its own record, without `Codable` (as GRDB's
/// `FetchableRecord` and `PersistableRecord` allow): the typed reads (`fetch`, `forEach`,
/// `first`, `get`) and writes (`insert`, `save`, `delete`) use them instead of a keyed container
/// per model and a key lookup per property.
///
/// ```swift
/// struct Pancake: RowCodable {
///     static let entityName = "Pancake"
///     static let primaryKey = "id"
///     var id: UUID
///     var flavor: String
///     var rating: Int?
///
///     init(row: borrowing Row) throws {
///         id = try row.uuid("id")
///         flavor = try row.string("flavor")
///         rating = try row.isNull("rating") ? nil : Int(try row.int("rating"))
///     }
///
///     func record() throws -> Record {
///         ["id": .uuid(id), "flavor": .string(flavor), "rating": rating.map { .int(Int64($0)) } ?? .null]
///     }
/// }
/// ```
///
/// The model stays `Codable` (``DataObject``): its schema is still derived from it (or declared
/// with ``DataObject/entitySchema()``), and code generic over ``DataObject`` alone (a function
/// of `T: DataObject`) reads and writes it through `Codable`. The two must agree, value for
/// value: a conformance case compares them on every backend.
public protocol RowCodable: DataObject {
    /// The model from the row of its entity (read each attribute by name; a row is valid only
    /// during this call).
    init(row: borrowing Row) throws
    /// The model's record: a value for every attribute of its entity.
    func record() throws -> Record
    /// The names of the values `writeStoredFields(to:)` hands over, in that order; `nil` (the
    /// default) when the model writes records only. A store whose entity has these names in
    /// this order may take the values one at a time, without a record (`insert`).
    static var storedModelLayout: StoredModelLayout? { get }
    /// Hands the value of each attribute of ``storedModelLayout``, in its order, to `sink`
    /// (each one through ``RowValue/appendStored(to:)``). Called only when ``storedModelLayout``
    /// is given; the values must be those of ``record()``. The default hands over the values of
    /// ``record()``.
    func writeStoredFields<Sink: StoredFieldSink>(to sink: inout Sink) throws
    /// Hands the same values to a store's buffer (a compact record's fields), which is what a
    /// store gives: what `@StoredModel` writes, the same calls as the generic form's, so that each
    /// value's write is inlined into one function rather than called through a generic sink. The
    /// default hands them to the generic form.
    func writeStoredFields(to fields: inout StoredFieldBuffer) throws
    /// Whether ``init(storedFields:)`` reads the model (what `@StoredModel` writes; the default
    /// is `false`): a typed fetch on a backend that keeps its items as compact records' fields
    /// (LMDB) then reads each model from its fields in ``storedModelLayout``'s order, with no
    /// attribute looked up by name.
    static var readsStoredFields: Bool { get }
    /// The model from its item's fields, one per attribute of ``storedModelLayout`` in its order
    /// (each property's ``RowValue/readStored(_:)``, and nothing after the last), or `nil` when
    /// a field is not one its property holds as it is: the fetch then reads its items by
    /// `init(row:)`, which names what is wrong. The default: `nil`.
    init?(storedFields reader: inout StoredFieldReader)
}

/// Takes a model's values one at a time, in its ``RowCodable/storedModelLayout``'s order: what a
/// store gives `RowCodable.writeStoredFields(to:)` to write the model without building a
/// record.
public protocol StoredFieldSink {
    /// Takes the next attribute's value.
    mutating func append(_ value: Value) throws
    /// Takes the next attribute's value when it is bytes (a `Data`'s or a `[UInt8]`'s), read
    /// where they are: what ``append(_:)`` takes as ``Value/bytes(_:)``, without copying them
    /// into an array first. The bytes are valid only during the call.
    mutating func appendBytes(_ bytes: UnsafeRawBufferPointer) throws
    /// Takes the next attribute's value when it is an integer: ``append(_:)`` of
    /// ``Value/int(_:)``, without the value around it.
    mutating func appendInt(_ value: Int64) throws
    /// Takes the next attribute's value when it is a double: ``append(_:)`` of
    /// ``Value/double(_:)``.
    mutating func appendDouble(_ value: Double) throws
    /// Takes the next attribute's value when it is a string: ``append(_:)`` of
    /// ``Value/string(_:)``.
    mutating func appendString(_ value: String) throws
}

extension StoredFieldSink {
    /// Copies the bytes into a value for ``append(_:)``.
    public mutating func appendBytes(_ bytes: UnsafeRawBufferPointer) throws {
        try append(.bytes(Array(bytes)))
    }

    public mutating func appendInt(_ value: Int64) throws { try append(.int(value)) }
    public mutating func appendDouble(_ value: Double) throws { try append(.double(value)) }
    public mutating func appendString(_ value: String) throws { try append(.string(value)) }
}

extension RowCodable {
    public static var storedModelLayout: StoredModelLayout? { nil }
    public static var readsStoredFields: Bool { false }
    public init?(storedFields reader: inout StoredFieldReader) { return nil }

    /// Hands over the values of ``record()`` in the order of ``storedModelLayout``.
    /// - Throws: `invalidArgument` when the model gives no ``storedModelLayout``, and what
    ///   ``record()`` throws.
    public func writeStoredFields<Sink: StoredFieldSink>(to sink: inout Sink) throws {
        guard let layout = Self.storedModelLayout else {
            throw StoreError(.invalidArgument, "\(Self.self) gives no storedModelLayout to write its values in")
        }
        let record = try record()
        for name in layout.layout.names { try sink.append(record[name]) }
    }

    public func writeStoredFields(to fields: inout StoredFieldBuffer) throws {
        try writeGeneric(to: &fields)
    }

    /// The generic `writeStoredFields(to:)` of a generic sink (called with a buffer, the concrete one would be).
    private func writeGeneric<Sink: StoredFieldSink>(to sink: inout Sink) throws {
        try writeStoredFields(to: &sink)
    }

    /// The object's primary key, from its record.
    public func primaryKeyValue() throws -> Value {
        try record()[Self.primaryKey]
    }
}

extension ReadAccessor {
    /// The objects of a ``RowCodable`` type, each read from its row by `init(row:)`.
    @inlinable
    public func fetch<T: RowCodable>(_ type: T.Type, where filter: Filter = .all, sortedBy sort: [SortKey]? = nil,
                                     offset: Int = 0, limit: Int? = nil) throws -> [T] {
        let request = FetchRequest(T.entityName, filter: filter, sort: sort ?? T.defaultSort, offset: offset, limit: limit)
        var objects: [T] = []
        if T.readsStoredFields, let layout = T.storedModelLayout {
            // Each model read from its item's fields where the backend keeps them that way; the
            // first that does not read (damage, a type the model does not hold) reads them all
            // again below, by name, which names what is wrong.
            var complete = true
            let visited = try visitStoredFields(request, layout: layout, attributes: { try T.entitySchema().attributes }) { fields in
                guard let object = T(storedFields: &fields) else {
                    complete = false
                    return false
                }
                objects.append(object)
                return true
            }
            if visited && complete { return objects }
            objects.removeAll()
        }
        try visit(request) { row in objects.append(try T(row: row)) }
        return objects
    }

    /// Hands each object of a ``RowCodable`` type to `body`, read as the typed `fetch` reads it
    /// (from its item's stored fields where the backend keeps them that way, otherwise from its
    /// row by `init(row:)`), none kept.
    @inlinable
    public func forEach<T: RowCodable>(_ type: T.Type, where filter: Filter = .all, sortedBy sort: [SortKey]? = nil,
                                       offset: Int = 0, limit: Int? = nil, _ body: (T) throws -> Void) throws {
        var request = FetchRequest(T.entityName, filter: filter, sort: sort ?? T.defaultSort, offset: offset, limit: limit)
        if T.readsStoredFields, let layout = T.storedModelLayout {
            // As the fetch: the first item that does not read (damage, a type the model does not
            // hold) and those after it are read by name, which names what is wrong; the items
            // handed over before it are not handed over again.
            var (complete, handed) = (true, 0)
            let visited = try visitStoredFields(request, layout: layout, attributes: { try T.entitySchema().attributes }) { fields in
                guard let object = T(storedFields: &fields) else {
                    complete = false
                    return false
                }
                handed += 1
                try body(object)
                return true
            }
            if visited && complete { return }
            if handed > 0 {
                request.offset += handed
                request.limit = request.limit.map { $0 - handed }
            }
        }
        try visit(request) { row in try body(try T(row: row)) }
    }

    /// The first object matching `filter` in the type's default sort, if any.
    public func first<T: RowCodable>(_ type: T.Type, where filter: Filter = .all) throws -> T? {
        try fetch(type, where: filter, limit: 1).first
    }

    /// The object with that primary key, or `nil`.
    public func get<T: RowCodable>(_ type: T.Type, key: Value) throws -> T? {
        try fetch(type, where: Field(T.primaryKey) == key, limit: 1).first
    }
}

extension WriteAccessor {
    /// Stores a new object, from its `record()`. Throws `keyExists` when its key is taken.
    ///
    /// A model that gives a ``RowCodable/storedModelLayout`` equal to its entity's (what
    /// `@StoredModel` writes) hands its values to a backend that takes them one at a time
    /// (SQLite) without a record; every check and error is the record's.
    public func insert<T: RowCodable>(_ object: T) throws {
        // A loop of inserts of one model: its type, found with its entity and a matching layout
        // by the insert before, is all that is compared.
        if lastStoredModel?.type == ObjectIdentifier(T.self), let parts = lastStoredModelParts, isValid {
            if try parts._withUnsafeGuaranteedRef({ try writer.insertFields(object, in: EntitySchema(parts: $0)) }) != nil {
                return
            }
        } else if let layout = T.storedModelLayout {
            let entity = try entity(T.entityName)
            if matches(layout, entity.layout) {
                lastStoredModel = (ObjectIdentifier(T.self), entity)
                if try writer.insertFields(object, in: entity) != nil { return }
            }
        }
        try insert(object.record(), into: T.entityName)
    }

    /// Whether a model's layout is its entity's (``lastLayoutMatch``).
    private func matches(_ model: StoredModelLayout, _ entity: RecordLayout) -> Bool {
        if let last = lastLayoutMatch, last.model === model, last.entity === entity { return last.equal }
        let equal = model.layout == entity
        lastLayoutMatch = (model, entity, equal)
        return equal
    }

    /// Stores new objects as `insert(_:)` does each, in as few round trips as the backend allows.
    public func insert<T: RowCodable>(contentsOf objects: some Sequence<T>) throws {
        try insert(contentsOf: objects.map { try $0.record() }, into: T.entityName)
    }

    /// Stores an object, replacing the one with the same key.
    public func save<T: RowCodable>(_ object: T) throws {
        try save(object.record(), into: T.entityName)
    }

    /// Deletes the object's item; returns whether it existed.
    @discardableResult
    public func delete<T: RowCodable>(_ object: T) throws -> Bool {
        try delete(T.entityName, key: object.primaryKeyValue())
    }
}
