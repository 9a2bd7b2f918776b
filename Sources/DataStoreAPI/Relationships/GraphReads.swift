/// A relationship to load with the items a request returns, and what to load with those in turn.
public struct Include: Sendable, Hashable, ExpressibleByStringLiteral {
    /// The relationship's name, on the entity whose items it is loaded for.
    public var relationship: String
    /// What to load with the related items.
    public var including: [Include]

    /// Loads `relationship`, and `including` with its items.
    public init(_ relationship: String, including: [Include] = []) {
        self.relationship = relationship
        self.including = including
    }

    public init(stringLiteral relationship: String) { self.init(relationship) }
}

/// An item with the related items an ``Include`` asked for.
public struct RelatedRecord: Sendable, Hashable {
    /// The item.
    public var record: Record
    /// Its related items, by relationship name, in primary-key order (in their own order for an
    /// ordered to-many; none or one for a to-one).
    public var related: [String: [RelatedRecord]]

    public init(record: Record, related: [String: [RelatedRecord]] = [:]) {
        self.record = record
        self.related = related
    }

    /// The related items of `relationship` (empty when it was not included).
    public subscript(relationship: String) -> [RelatedRecord] { related[relationship] ?? [] }
}

extension ReadAccessor {
    /// How many keys one query of an eager load or a relationship filter names.
    static let keysPerQuery = 1_000

    /// The items related to the item `key` of `entityName` through `relationship`, in
    /// primary-key order (in their own order for an ordered to-many): the one it refers to (a
    /// to-one), or every item on the other side (a to-many). Empty when the item does not exist.
    /// - Throws: `unknownEntity`, `invalidArgument` for a relationship the entity does not have.
    public func related(_ entityName: String, key: Value, _ relationship: String) throws -> [Record] {
        let entity = try entity(entityName)
        let keyValue = try entity.checkedKeyValue(key)
        guard let item = try reader.get(entity, keyValue: keyValue) else { return [] }
        return try load(Include(relationship), of: entity, for: [item]).first?.1 ?? []
    }

    /// The items the request returns, each with the related items `including` names, loaded in
    /// a bounded number of queries per relationship level (one per thousand items, never one
    /// per item): GRDB's `including(all:)`, Core Data's prefetching.
    /// - Throws: as ``fetch(_:)``, and `invalidArgument` for an unknown relationship.
    public func fetch(_ request: FetchRequest, including: [Include]) throws -> [RelatedRecord] {
        let (entity, checked) = try validate(request)
        let records = checked.limit == 0 ? [] : try reader.fetch(checked, in: entity)
        return try attach(including, to: records, of: entity)
    }

    /// Items already read (a page of ``scan(_:after:limit:)``, say), each with the related items
    /// `including` names, loaded as ``fetch(_:including:)`` loads them.
    /// - Throws: `unknownEntity`, and `invalidArgument` for an unknown relationship.
    public func related(to records: [Record], of entityName: String, including: [Include]) throws -> [RelatedRecord] {
        try attach(including, to: records, of: try entity(entityName))
    }

    /// `records` of `entity` with what `includes` names loaded for each.
    private func attach(_ includes: [Include], to records: [Record], of entity: EntitySchema) throws -> [RelatedRecord] {
        var result = records.map { RelatedRecord(record: $0) }
        for include in includes {
            let groups = try load(include, of: entity, for: records)
            let destination = try self.entity(try relationship(include.relationship, of: entity).destination)
            for position in result.indices {
                let related = groups[position].1
                result[position].related[include.relationship] = try attach(include.including, to: related,
                                                                            of: destination)
            }
        }
        return result
    }

    /// The relationship of that name, or `invalidArgument` naming what the entity has.
    func relationship(_ name: String, of entity: EntitySchema) throws(StoreError) -> Relationship {
        guard let relationship = entity.relationship(named: name) else {
            let names = entity.relationships.map(\.name)
            throw StoreError(.invalidArgument, "entity '\(entity.name)' has no relationship '\(name)'"
                + (names.isEmpty ? "" : " (it has \(names.map { "'\($0)'" }.joined(separator: ", ")))"))
        }
        return relationship
    }

    /// For each of `records`, in order, its related items through `include`'s relationship.
    private func load(_ include: Include, of entity: EntitySchema,
                      for records: [Record]) throws -> [(Record, [Record])] {
        let relationship = try relationship(include.relationship, of: entity)
        let destination = try self.entity(relationship.destination)
        let keys = records.map { entity.primaryKeyValue(of: $0) }
        switch relationship.cardinality {
        case .toOne:
            let targets = Set(records.map { $0[relationship.name] }.filter { !$0.isNull })
            let found = try fetchAll(destination, attribute: destination.primaryKey, among: Array(targets))
            let byKey = Dictionary(found.map { (destination.primaryKeyValue(of: $0), $0) },
                                   uniquingKeysWith: { first, _ in first })
            return records.map { record in (record, byKey[record[relationship.name]].map { [$0] } ?? []) }
        case .toMany:
            switch catalog.graph.toMany[entity.name]?[relationship.name] {
            case let .referrers(_, attribute)?:
                let found = try fetchAll(destination, attribute: attribute, among: keys)
                var grouped = Dictionary(grouping: found) { $0[attribute] }
                if let position = catalog.graph.positions[entity.name]?[relationship.name] {
                    for (owner, items) in grouped {
                        grouped[owner] = Self.inPositionOrder(items, position: position) {
                            destination.primaryKeyValue(of: $0)
                        }
                    }
                }
                return records.map { ($0, grouped[entity.primaryKeyValue(of: $0)] ?? []) }
            case let .pairs(joinName, column, otherColumn, _)?:
                let join = try self.entity(joinName)
                var pairs = try fetchAll(join, attribute: column, among: keys)
                let others = try fetchAll(destination, attribute: destination.primaryKey,
                                          among: Array(Set(pairs.map { $0[otherColumn] })))
                let byKey = Dictionary(others.map { (destination.primaryKeyValue(of: $0), $0) },
                                       uniquingKeysWith: { first, _ in first })
                let position = catalog.graph.positions[entity.name]?[relationship.name]
                if let position {
                    pairs = Self.inPositionOrder(pairs, position: position) { $0[otherColumn] }
                }
                var grouped: [Value: [Record]] = [:]
                for pair in pairs {
                    if let other = byKey[pair[otherColumn]] { grouped[pair[column], default: []].append(other) }
                }
                return records.map { record in
                    let related = grouped[entity.primaryKeyValue(of: record)] ?? []
                    if position != nil { return (record, related) }
                    return (record, related.sorted { a, b in
                        Value.compareCanonical(destination.primaryKeyValue(of: a), destination.primaryKeyValue(of: b)) < 0
                    })
                }
            case nil:
                throw StoreError(.invalidArgument, "relationship '\(entity.name).\(relationship.name)' has no inverse "
                    + "to find its items by")
            }
        }
    }

    /// `items` in the order of an ordered to-many: ascending `position`, those without one
    /// last, ties by the related item's key (`key`).
    static func inPositionOrder(_ items: [Record], position: String, key: (Record) -> Value) -> [Record] {
        items.sorted { a, b in
            let (pa, pb) = (a[position], b[position])
            if pa.isNull != pb.isNull { return pb.isNull }
            let c = pa.isNull ? 0 : Value.compareCanonical(pa, pb)
            if c != 0 { return c < 0 }
            return Value.compareCanonical(key(a), key(b)) < 0
        }
    }

    /// The items of `entity` whose `attribute` is one of `values`, in queries of at most
    /// ``keysPerQuery`` values each: in primary-key order within each query, so the items that
    /// share one value of `attribute` (all found by one query) are in primary-key order.
    func fetchAll(_ entity: EntitySchema, attribute: String, among values: [Value]) throws -> [Record] {
        guard !values.isEmpty else { return [] }
        var found: [Record] = []
        if attribute == entity.primaryKey {
            // Lookups by key: an `in` on the key is not a range every engine can serve.
            var start = 0
            while start < values.count {
                let chunk = Array(values[start..<min(start + Self.keysPerQuery, values.count)])
                found += try reader.get(entity, keyValues: chunk)
                start += chunk.count
            }
            return found
        }
        var start = 0
        while start < values.count {
            let chunk = Array(values[start..<min(start + Self.keysPerQuery, values.count)])
            found += try reader.fetch(FetchRequest(entity.name, filter: .among(attribute, chunk)), in: entity)
            start += chunk.count
        }
        return found
    }

    // MARK: Filters across relationships

    /// `filter` with every relationship term (a key path such as `author.name`, ``Filter/any(_:_:)``,
    /// ``Filter/relatedCount(_:_:_:)``) replaced by an equivalent filter on the entity's own
    /// attributes, found by querying the related entities.
    func resolveRelationships(_ filter: Filter, of entity: EntitySchema) throws -> Filter {
        guard Self.hasRelationshipTerms(filter) else { return filter }
        switch filter {
        case .all:
            return .all
        case let .compare(name, op, value):
            return try across(name, entity) { .compare($0, op, value) }
        case let .among(name, values):
            return try across(name, entity) { .among($0, values) }
        case .isNull(let name):
            return try across(name, entity) { .isNull($0) }
        case let .hasPrefix(name, prefix):
            return try across(name, entity) { .hasPrefix($0, prefix) }
        case let .contains(name, needle):
            return try across(name, entity) { .contains($0, needle) }
        case let .hasElement(name, element):
            return try across(name, entity) { .hasElement($0, element) }
        case .and(let filters):
            return .and(try filters.map { try resolveRelationships($0, of: entity) })
        case .or(let filters):
            return .or(try filters.map { try resolveRelationships($0, of: entity) })
        case .not(let inner):
            return .not(try resolveRelationships(inner, of: entity))
        case let .any(name, inner):
            let keys = try relatedKeys(name, of: entity, matching: inner)
            return try keyFilter(entity, keys: Array(keys), label: "any(\(name))")
        case let .relatedCount(name, op, count):
            let counts = try relatedCounts(name, of: entity)
            let zeroMatches = Filter.compare(.int(0), op, .int(Int64(count)))
            // Items with no related item match as 0 does: list the others.
            let listed = counts.filter { Filter.compare(.int(Int64($0.value)), op, .int(Int64(count))) != zeroMatches }
            let filter = try keyFilter(entity, keys: Array(listed.keys), label: "relatedCount(\(name))")
            return zeroMatches ? .not(filter) : filter
        }
    }

    static func hasRelationshipTerms(_ filter: Filter) -> Bool {
        switch filter {
        case .all: return false
        case .compare(let name, _, _), .among(let name, _), .isNull(let name), .hasPrefix(let name, _),
             .contains(let name, _), .hasElement(let name, _):
            return name.utf8.contains(UInt8(ascii: "."))
        case .and(let filters), .or(let filters): return filters.contains(where: hasRelationshipTerms)
        case .not(let inner): return hasRelationshipTerms(inner)
        case .any, .relatedCount: return true
        }
    }

    /// A leaf on a key path `relationship.rest`: the items whose to-one points at an item that
    /// matches the leaf on `rest`, or whose to-one is null when null would match.
    private func across(_ path: String, _ entity: EntitySchema, _ leaf: (String) -> Filter) throws -> Filter {
        guard let dot = path.utf8.firstIndex(of: UInt8(ascii: ".")) else { return leaf(path) }
        let name = String(path[..<dot])
        let rest = String(path[path.index(after: dot)...])
        let relationship = try relationship(name, of: entity)
        guard relationship.cardinality == .toOne else {
            throw StoreError(.invalidArgument, "key path '\(path)' on '\(entity.name)' goes through to-many "
                + "relationship '\(name)': use .any(\"\(name)\", ...) or .relatedCount")
        }
        let destination = try self.entity(relationship.destination)
        let inner = try destination.validate(resolveRelationships(leaf(rest), of: destination))
        var keys: [Value] = []
        try reader.forEach(FetchRequest(destination.name, filter: inner), in: destination) { record in
            keys.append(destination.primaryKeyValue(of: record))
            return true
        }
        let matching = try keyFilter(entity, keys: keys, attribute: name, label: path)
        // An item without a related item sees null at the end of the path.
        return leaf(rest).matchesNullEverywhere ? .or([matching, .isNull(name)]) : matching
    }

    /// `attribute` (the primary key by default) among `keys`, or `limitExceeded` past the
    /// filter-term limit.
    private func keyFilter(_ entity: EntitySchema, keys: [Value], attribute: String? = nil,
                           label: String) throws(StoreError) -> Filter {
        guard keys.count <= Limits.maxFilterTerms else {
            throw StoreError(.limitExceeded, "filter '\(label)' on '\(entity.name)' matches \(keys.count) related "
                + "items; a filter across a relationship may match at most \(Limits.maxFilterTerms)")
        }
        return .among(attribute ?? entity.primaryKey, keys)
    }

    /// The keys of `entity`'s items that have a related item through to-many `name` matching `filter`.
    private func relatedKeys(_ name: String, of entity: EntitySchema, matching filter: Filter) throws -> Set<Value> {
        let relationship = try relationship(name, of: entity)
        guard relationship.cardinality == .toMany else {
            throw StoreError(.invalidArgument, "any(\"\(name)\") on '\(entity.name)' needs a to-many relationship; "
                + "filter a to-one with a key path ('\(name).ATTRIBUTE')")
        }
        let destination = try self.entity(relationship.destination)
        let inner = try destination.validate(resolveRelationships(filter, of: destination))
        var keys = Set<Value>()
        switch catalog.graph.toMany[entity.name]?[name] {
        case let .referrers(_, attribute)?:
            try reader.forEach(FetchRequest(destination.name, filter: inner), in: destination) { record in
                if case let key = record[attribute], !key.isNull { keys.insert(key) }
                return true
            }
        case let .pairs(joinName, column, otherColumn, _)?:
            var others: [Value] = []
            try reader.forEach(FetchRequest(destination.name, filter: inner), in: destination) { record in
                others.append(destination.primaryKeyValue(of: record))
                return true
            }
            for pair in try fetchAll(try self.entity(joinName), attribute: otherColumn, among: others) {
                keys.insert(pair[column])
            }
        case nil:
            break
        }
        return keys
    }

    /// How many items each item of `entity` relates to through to-many `name` (items with none absent).
    private func relatedCounts(_ name: String, of entity: EntitySchema) throws -> [Value: Int] {
        let relationship = try relationship(name, of: entity)
        guard relationship.cardinality == .toMany else {
            throw StoreError(.invalidArgument, "relatedCount(\"\(name)\") on '\(entity.name)' needs a to-many "
                + "relationship")
        }
        var counts: [Value: Int] = [:]
        let (source, attribute): (EntitySchema, String)
        switch catalog.graph.toMany[entity.name]?[name] {
        case let .referrers(sourceName, column)?: (source, attribute) = (try self.entity(sourceName), column)
        case let .pairs(joinName, column, _, _)?: (source, attribute) = (try self.entity(joinName), column)
        case nil: return [:]
        }
        try reader.forEach(FetchRequest(source.name), in: source) { record in
            if case let key = record[attribute], !key.isNull { counts[key, default: 0] += 1 }
            return true
        }
        return counts
    }
}

extension Filter {
    /// Whether the leaf matches an item whose attribute is null.
    fileprivate var matchesNullEverywhere: Bool {
        switch self {
        case let .compare(_, op, value): return Filter.compare(.null, op, value)
        case let .among(_, values): return Filter.among(.null, values)
        case .isNull: return true
        default: return false
        }
    }
}

extension ReadAccessor {
    /// The entities whose changes can change what `request` returns with `including`: its own,
    /// and those its filter, sort and includes reach through relationships (join entities too).
    func entitiesRead(by request: FetchRequest, including: [Include]) -> Set<String> {
        var entities: Set<String> = [request.entity]
        guard let entity = catalog.entity(named: request.entity) else { return entities }
        collect(request.filter, from: entity, into: &entities)
        for key in request.sort { collectPath(key.attribute, from: entity, into: &entities) }
        collect(including, from: entity, into: &entities)
        return entities
    }

    private func collect(_ includes: [Include], from entity: EntitySchema, into entities: inout Set<String>) {
        for include in includes {
            guard let destination = reach(include.relationship, from: entity, into: &entities) else { continue }
            collect(include.including, from: destination, into: &entities)
        }
    }

    /// Adds the entity (and join entity) `relationship` leads to; returns the destination.
    private func reach(_ relationship: String, from entity: EntitySchema,
                       into entities: inout Set<String>) -> EntitySchema? {
        guard let found = entity.relationship(named: relationship),
              let destination = catalog.entity(named: found.destination) else { return nil }
        entities.insert(destination.name)
        if case let .pairs(join, _, _, _)? = catalog.graph.toMany[entity.name]?[relationship] { entities.insert(join) }
        return destination
    }

    private func collectPath(_ path: String, from entity: EntitySchema, into entities: inout Set<String>) {
        var current = entity
        let components = path.split(separator: ".").map(String.init)
        for name in components.dropLast() {
            guard let next = reach(name, from: current, into: &entities) else { return }
            current = next
        }
    }

    private func collect(_ filter: Filter, from entity: EntitySchema, into entities: inout Set<String>) {
        switch filter {
        case .all: return
        case .compare(let name, _, _), .among(let name, _), .isNull(let name), .hasPrefix(let name, _),
             .contains(let name, _), .hasElement(let name, _):
            collectPath(name, from: entity, into: &entities)
        case .and(let filters), .or(let filters): for inner in filters { collect(inner, from: entity, into: &entities) }
        case .not(let inner): collect(inner, from: entity, into: &entities)
        case let .any(name, inner):
            if let destination = reach(name, from: entity, into: &entities) {
                collect(inner, from: destination, into: &entities)
            }
        case .relatedCount(let name, _, _):
            _ = reach(name, from: entity, into: &entities)
        }
    }
}

extension ReadAccessor {
    /// Whether a sort key names a key path across a to-one relationship (`author.name`).
    static func sortsAcrossRelationships(_ request: FetchRequest) -> Bool {
        request.sort.contains { $0.attribute.utf8.contains(UInt8(ascii: ".")) }
    }

    /// The request's items sorted by key paths across to-one relationships: the matching items
    /// are read, the values at the end of each path looked up (one lookup per related item, not
    /// per item), then sorted as the engines sort (nulls first, ties by primary key), and the
    /// offset and limit applied. An item without a related item sorts as null.
    func fetchSortedAcrossRelationships(_ request: FetchRequest) throws -> [Record] {
        var unsorted = request
        unsorted.sort = []
        unsorted.offset = 0
        unsorted.limit = nil
        let (entity, checked) = try validate(unsorted)
        guard request.offset >= 0, (request.limit ?? 0) >= 0 else {
            throw StoreError(.invalidArgument, "offset and limit of a request on '\(entity.name)' must not be "
                + "negative (offset \(request.offset), limit \(request.limit.map(String.init) ?? "none"))")
        }
        let records = try reader.fetch(checked, in: entity)
        var columns: [[Value]] = []
        for key in request.sort {
            columns.append(try values(at: key, of: records, in: entity))
        }
        let keys = try records.map { try KeyEncoding.encodeKey(entity.primaryKeyValue(of: $0)) }
        let order = records.indices.sorted { a, b in
            for (column, key) in zip(columns, request.sort) {
                var c = Value.compareCanonical(column[a], column[b], foldingASCIICase: key.caseInsensitive)
                if !key.ascending { c = -c }
                if c != 0 { return c < 0 }
            }
            return Value.compareBytes(keys[a], keys[b]) < 0
        }
        return request.page(order.map { records[$0] })
    }

    /// The value of each record at the end of `key`'s path, checked as a sort key.
    private func values(at key: SortKey, of records: [Record], in entity: EntitySchema) throws -> [Value] {
        var components = key.attribute.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        let attributeName = components.removeLast()
        var current = entity
        var related: [Record?] = records.map { $0 }
        for name in components {
            let relationship = try relationship(name, of: current)
            guard relationship.cardinality == .toOne else {
                throw StoreError(.invalidArgument, "sort key '\(key.attribute)' on '\(entity.name)' goes through to-many "
                    + "relationship '\(name)'; sort by a to-one key path")
            }
            let destination = try self.entity(relationship.destination)
            let targets = Set(related.compactMap { $0?[name] }.filter { !$0.isNull })
            let found = try fetchAll(destination, attribute: destination.primaryKey, among: Array(targets))
            let byKey = Dictionary(found.map { (destination.primaryKeyValue(of: $0), $0) }, uniquingKeysWith: { a, _ in a })
            related = related.map { record in record.flatMap { byKey[$0[name]] } }
            current = destination
        }
        try current.validate([SortKey(attributeName, ascending: key.ascending, caseInsensitive: key.caseInsensitive)])
        return related.map { $0?[attributeName] ?? .null }
    }
}
