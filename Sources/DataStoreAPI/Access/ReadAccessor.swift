/// Reads a store inside a `read` or `write` block. Not `Sendable`, and valid only until its
/// block returns: any call after that throws ``StoreError/Code/accessorExpired``.
public class ReadAccessor {
    let reader: any StorageReader
    let catalog: Catalog
    var isValid = true

    init(reader: any StorageReader, catalog: Catalog) {
        self.reader = reader
        self.catalog = catalog
    }

    func expire() { isValid = false }

    /// The entity asked for last: a loop of requests names one entity again and again.
    private var lastEntity: EntitySchema?

    func entity(_ name: String) throws(StoreError) -> EntitySchema {
        guard isValid else {
            throw StoreError(.accessorExpired, "accessor used after its block returned")
        }
        if let lastEntity, Schema.isName(lastEntity.name, name) { return lastEntity }
        guard let entity = catalog.entity(named: name) else {
            throw StoreError(.unknownEntity, "no entity '\(name)' in the schema")
        }
        lastEntity = entity
        return entity
    }

    func validate(_ request: FetchRequest) throws -> (EntitySchema, FetchRequest) {
        let entity = try entity(request.entity)
        guard request.offset >= 0, (request.limit ?? 0) >= 0 else {
            throw StoreError(.invalidArgument, "offset and limit of a request on '\(entity.name)' must not be "
                + "negative (offset \(request.offset), limit \(request.limit.map(String.init) ?? "none"))")
        }
        guard request.sort.count <= Limits.maxSortKeys else {
            throw StoreError(.limitExceeded, "request on '\(entity.name)' sorts by \(request.sort.count) keys; at "
                + "most \(Limits.maxSortKeys) are allowed")
        }
        try request.filter.checkSize(entity: entity.name)
        var checked = request
        if Self.hasRelationshipTerms(request.filter) {
            checked.filter = try resolveRelationships(request.filter, of: entity)
        }
        checked.filter = try entity.validate(checked.filter)
        try entity.validate(request.sort)
        return (entity, checked)
    }

    /// The store's schema.
    public var schema: Schema { catalog.schema }

    /// Reads the change feed's state and every entry it holds, their checksums checked, for a
    /// check of the store; returns how many entries were read.
    /// - Throws: `corrupt` naming the state or the first damaged entry.
    package func checkChangeFeed() throws -> Int { try ChangeLog.checkEntries(reader) }

    /// The items that match the request, in its sort order (ties by primary key).
    /// - Throws: `unknownEntity`, `unknownAttribute`, `typeMismatch`, `invalidArgument`.
    public func fetch(_ request: FetchRequest) throws -> [Record] {
        if Self.sortsAcrossRelationships(request) { return try fetchSortedAcrossRelationships(request) }
        let (entity, checked) = try validate(request)
        if checked.limit == 0 { return [] }
        return try reader.fetch(checked, in: entity)
    }

    /// Hands each item the request returns to `body`, in the request's order, without building an
    /// array of them: reading many items this way takes constant memory, and on SQLite and LMDB
    /// the items come straight from the engine's cursor. The record handed over is a value: a
    /// kept copy stays as it was. To stop early, give the request a limit, or throw.
    ///
    /// In a `write` block the items are read before the first is handed over, so that the
    /// block's own writes in `body` do not change which items it visits, on every backend.
    /// - Throws: as ``fetch(_:)``, and what `body` throws.
    public func forEach(_ request: FetchRequest, _ body: (Record) throws -> Void) throws {
        if Self.sortsAcrossRelationships(request) {
            for record in try fetchSortedAcrossRelationships(request) { try body(record) }
            return
        }
        let (entity, checked) = try validate(request)
        if checked.limit == 0 { return }
        if self is WriteAccessor {
            return try reader.forEachFetched(checked, in: entity) { record in
                try body(record)
                return true
            }
        }
        try reader.forEach(checked, in: entity) { record in
            try body(record)
            return true
        }
    }

    /// Hands each item the request returns to `body` as a ``Row``, in the request's order: as
    /// ``forEach(_:_:)``, but nothing is built for an item unless `body` asks for a value. On
    /// LMDB the row is read in the map, on SQLite in the statement, so that a visit of a whole
    /// entity allocates nothing per item (a string or bytes value read with ``Row/value(_:)`` or
    /// ``Row/string(_:)`` is built; ``Row/withUTF8(_:_:)`` reads it in place). Each row is
    /// checked before it is handed over, as a fetch checks it: a damaged one throws `corrupt`.
    ///
    /// The row is valid inside `body` only (the type sees to it). To stop early, give the
    /// request a limit, or throw.
    /// - Throws: as ``fetch(_:)``, and what `body` throws.
    public func visit(_ request: FetchRequest, _ body: (borrowing Row) throws -> Void) throws {
        if Self.sortsAcrossRelationships(request) || self is WriteAccessor {
            // Read first (see ``forEach(_:_:)``), then visited as records.
            let records = Self.sortsAcrossRelationships(request) ? try fetchSortedAcrossRelationships(request)
                : try fetch(request)
            return try visitRecords(records, request.entity, body)
        }
        let (entity, checked) = try validate(request)
        if checked.limit == 0 { return }
        // The cursor compared by identity (reading it out of the access retained and released it
        // per row), and one row made for it, lent to `body` for each of its rows (a row made per
        // row retained and released its access).
        var row: Row?
        var current: ObjectIdentifier?
        try reader.visit(checked, in: entity) { cursor in
            if current != ObjectIdentifier(cursor) {
                row = Row(RowAccess(cursor))
                current = ObjectIdentifier(cursor)
            }
            switch row {
            case .some(let lent):
                lent.access.startRow()
                try body(lent)
            case .none:
                break  // Unreachable: the row is made above for the first cursor.
            }
            return true
        }
    }

    /// Hands the stored fields of each item `request` selects to `body` while it returns true
    /// (``StorageReader/visitStoredFields(_:in:_:)``), when the items are kept as compact
    /// records' fields in `layout`'s order and read in place here (not in a write block, whose
    /// reads see its own writes through the change recorder): `true` when every item was handed
    /// over or `body` stopped, `false` when the caller must read the request another way.
    /// The model's attributes (`attributes`, asked for only when the rest allows the visit) must
    /// be the entity's, type and optionality included: a record the store would refuse (a null
    /// where the entity holds none, another type's field) is then one the model refuses too.
    @usableFromInline func visitStoredFields(_ request: FetchRequest, layout: StoredModelLayout,
                                             attributes: () throws -> [Attribute],
                                             _ body: (inout StoredFieldReader) throws -> Bool) throws -> Bool {
        guard !(self is WriteAccessor), !Self.sortsAcrossRelationships(request) else { return false }
        let (entity, checked) = try validate(request)
        guard layout.layout == entity.layout else { return false }
        if checked.limit == 0 { return true }
        // The attributes compared at the first record the backend hands over: not at all where
        // it reads rows (a typed point get on SQLite builds no schema).
        var compared: Bool?
        let visited = try reader.visitStoredFields(checked, in: entity) { fields in
            if compared == nil {
                let model = try attributes()
                compared = model.count == entity.attributes.count
                    && zip(model, entity.attributes).allSatisfy { $0.type == $1.type && $0.isOptional == $1.isOptional }
            }
            guard compared == true else { return false }
            return try body(&fields)
        }
        return visited && compared != false
    }

    /// Whether ``visit(_:_:)`` reads rows in place here (LMDB's and SQLite's read blocks), so that
    /// a typed fetch decodes from the rows; elsewhere the rows are records already, and it decodes
    /// the records (fewer instructions than copying their fields out).
    @usableFromInline func readsRowsInPlace(_ request: FetchRequest) -> Bool {
        !(self is WriteAccessor) && !Self.sortsAcrossRelationships(request) && reader.visitsInPlace(request)
    }

    private func visitRecords(_ records: [Record], _ entityName: String, _ body: (borrowing Row) throws -> Void) throws {
        guard !records.isEmpty else { return }
        let cursor = RecordRowCursor(try entity(entityName))
        let access = RowAccess(cursor)
        for record in records {
            cursor.load(record)
            access.startRow()
            try body(Row(access))
        }
    }

    /// The first item the request returns, if any.
    public func first(_ request: FetchRequest) throws -> Record? {
        var one = request
        one.limit = 1
        return try fetch(one).first
    }

    /// How many items the request returns (offset and limit applied).
    public func count(_ request: FetchRequest) throws -> Int {
        var request = request
        if Self.sortsAcrossRelationships(request) { request.sort = [] }
        let (entity, checked) = try validate(request)
        let total = try reader.count(checked.filter, in: entity)
        let afterOffset = max(0, total - checked.offset)
        return checked.limit.map { min($0, afterOffset) } ?? afterOffset
    }

    /// The item with that primary key, or `nil`.
    public func get(_ entityName: String, key: Value) throws -> Record? {
        let entity = try entity(entityName)
        // The key checked before the reader is called: checked among the call's arguments, it
        // made the call copy the reader (a retain and a release per get).
        let keyValue = try entity.checkedKeyValue(key)
        return try reader.get(entity, keyValue: keyValue)
    }

    /// Up to `limit` items with keys after `after` (from the start when `nil`), in key order:
    /// the way to stream an entity in pages of constant size.
    public func scan(_ entityName: String, after: Value? = nil, limit: Int) throws -> [Record] {
        let (entity, start) = try scanStart(entityName, after, limit)
        return limit == 0 ? [] : try reader.scan(entity, after: start, limit: limit)
    }

    /// Hands `body` the items of `entity` in key order, a page of up to `pageSize` at a time,
    /// starting after `start`; a page shorter than `pageSize` is the last. The one paging loop
    /// of the package (a check's read of every item, the streamed copy, JSON Lines, exports):
    /// every pass ends by that one rule. `body` returns false to stop after a page.
    package func forEachPage(_ entity: EntitySchema, pageSize: Int, after start: Value? = nil,
                             _ body: ([Record]) throws -> Bool) throws {
        var after = start
        while true {
            let page = try scan(entity.name, after: after, limit: pageSize)
            guard try body(page), page.count == pageSize, let last = page.last else { return }
            after = entity.primaryKeyValue(of: last)
        }
    }

    /// As ``scan(_:after:limit:)``, into a page the caller keeps from one call to the next: the
    /// page is replaced by the items read, in the page's own array storage (on SQLite and LMDB
    /// the records are compact, their fields in chunks of up to 32 KiB shared by the page, so
    /// that paging through an entity allocates per chunk, not per item). Records kept from an
    /// earlier page keep their values. When the scan throws (a damaged record), the page is
    /// left empty, never half read.
    public func scan(_ entityName: String, after: Value? = nil, limit: Int, into page: inout [Record]) throws {
        do {
            let (entity, start) = try scanStart(entityName, after, limit)
            if limit == 0 {
                page.removeAll(keepingCapacity: true)
            } else {
                try reader.scan(entity, after: start, limit: limit, into: &page)
            }
        } catch {
            page.removeAll()
            throw error
        }
    }

    /// A scan's entity and the key it starts after, its limit checked.
    private func scanStart(_ entityName: String, _ after: Value?,
                           _ limit: Int) throws(StoreError) -> (EntitySchema, PrimaryKey?) {
        let entity = try entity(entityName)
        guard limit >= 0 else {
            throw StoreError(.invalidArgument, "scan of '\(entityName)' with negative limit \(limit)")
        }
        return (entity, try after.map { v throws(StoreError) in try entity.primaryKey(v) })
    }

    /// A metadata value stored with ``WriteAccessor/setMetadata(_:forKey:)``.
    public func metadata(forKey key: String) throws -> [UInt8]? {
        guard isValid else { throw StoreError(.accessorExpired, "accessor used after its block returned") }
        return try reader.metadata(forKey: key)
    }
}

/// The schema with its entities by name, resolved once per store.
final class Catalog: Sendable {
    let schema: Schema
    let entities: NameIndex<EntitySchema>
    /// The schema's relationships, arranged for writes and graph reads.
    let graph: RelationshipGraph

    init(_ schema: Schema) {
        self.schema = schema
        graph = RelationshipGraph(schema)
        entities = NameIndex(schema.entities.map { ($0.name, $0) })
    }

    /// The entity of that name, byte for byte (``NameIndex``).
    func entity(named name: String) -> EntitySchema? { entities[name] }
}
