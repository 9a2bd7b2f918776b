/// A write transaction layered over another (the change feed's recorder, the relationship
/// rules): it reads through to the layer below, and overrides the writes it watches.
protocol ForwardingWriter: StorageWriter {
    /// The layer below.
    var writer: any StorageWriter { get }
}

extension ForwardingWriter {
    func get(_ entity: EntitySchema, key: PrimaryKey) throws -> Record? { try writer.get(entity, key: key) }
    func get(_ entity: EntitySchema, keyValue: Value) throws -> Record? { try writer.get(entity, keyValue: keyValue) }
    func contains(_ entity: EntitySchema, key: PrimaryKey) throws -> Bool { try writer.contains(entity, key: key) }
    func get(_ entity: EntitySchema, keyValues: [Value]) throws -> [Record] {
        try writer.get(entity, keyValues: keyValues)
    }
    func fetch(_ request: FetchRequest, in entity: EntitySchema) throws -> [Record] {
        try writer.fetch(request, in: entity)
    }
    func forEach(_ request: FetchRequest, in entity: EntitySchema, _ body: (Record) throws -> Bool) throws {
        try writer.forEach(request, in: entity, body)
    }
    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int { try writer.count(filter, in: entity) }
    func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int) throws -> [Record] {
        try writer.scan(entity, after: key, limit: limit)
    }
    func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int, into page: inout [Record]) throws {
        try writer.scan(entity, after: key, limit: limit, into: &page)
    }
    func metadata(forKey key: String) throws -> [UInt8]? { try writer.metadata(forKey: key) }
}
