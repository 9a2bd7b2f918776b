extension Schema {
    /// The schema of model types: each one's ``DataObject/entitySchema()``, in order.
    public init(version: Int = 1, models: [any DataObject.Type]) throws {
        self.init(version: version, entities: try models.map { try $0.entitySchema() })
    }
}

/// An object with the related items an ``Include`` asked for, from
/// ``ReadAccessor/fetch(_:where:sortedBy:offset:limit:including:)-(_,Filter,_,_,_,_)``.
public struct Related<T: DataObject>: Sendable {
    /// The object.
    public let object: T
    /// The object's item with its related items, as stored.
    public let graph: RelatedRecord

    /// The objects related through `relationship`, decoded as `type` (empty when it was not
    /// included), in primary-key order (in their own order when the relationship is ordered).
    public func related<U: DataObject>(_ relationship: String, as type: U.Type) throws -> [U] {
        try graph[relationship].map { try RecordDecoder.decode(U.self, from: $0.record) }
    }

    /// The objects related through `relationship`, each with what was included for it in turn.
    public func related<U: DataObject>(_ relationship: String, including type: U.Type) throws -> [Related<U>] {
        try graph[relationship].map { Related<U>(object: try RecordDecoder.decode(U.self, from: $0.record), graph: $0) }
    }
}

extension ReadAccessor {
    /// The objects related to `object` through `relationship`, decoded as `type`, in
    /// primary-key order: the one a to-one refers to, or every object of a to-many.
    public func related<T: DataObject, U: DataObject>(_ type: U.Type, of object: T, _ relationship: String) throws -> [U] {
        try related(T.entityName, key: object.primaryKeyValue(), relationship)
            .map { try RecordDecoder.decode(U.self, from: $0) }
    }

    /// The objects matching `filter`, each with the related objects `including` names, loaded
    /// in a bounded number of queries per relationship level (see ``fetch(_:including:)``).
    public func fetch<T: DataObject>(_ type: T.Type, where filter: Filter = .all, sortedBy sort: [SortKey]? = nil,
                                     offset: Int = 0, limit: Int? = nil,
                                     including: [Include]) throws -> [Related<T>] {
        let request = FetchRequest(T.entityName, filter: filter, sort: sort ?? T.defaultSort, offset: offset,
                                   limit: limit)
        return try fetch(request, including: including).map {
            Related(object: try RecordDecoder.decode(T.self, from: $0.record), graph: $0)
        }
    }
}
