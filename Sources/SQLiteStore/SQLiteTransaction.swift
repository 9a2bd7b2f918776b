internal import CSQLite
import DataStoreAPI

/// A read or write transaction on one connection.
final class SQLiteTransaction: StorageWriter {
    let connection: SQLiteConnection
    let statements: [String: SQLiteEntitySQL]

    init(connection: SQLiteConnection, statements: [String: SQLiteEntitySQL]) {
        self.connection = connection
        self.statements = statements
    }

    private func sql(_ entity: EntitySchema) -> SQLiteEntitySQL {
        statements[entity.name] ?? SQLiteEntitySQL(entity)
    }

    private func prepared(_ fragment: SQLFragment) throws(StoreError) -> SQLiteStatement {
        let statement = try connection.statement(fragment.sql)
        try statement.bind(fragment.bindings.map {
            if case .value(let v) = $0 { return v }
            return .null
        })
        for (i, binding) in fragment.bindings.enumerated() {
            if case .textBytes(let bytes) = binding { try statement.bindText(bytes: bytes, at: Int32(i + 1)) }
        }
        return statement
    }

    private func rows(_ statement: SQLiteStatement, _ entity: EntitySchema) throws(StoreError) -> [Record] {
        defer { sqlite3_reset(statement.handle) }
        var records: [Record] = []
        while try statement.step() {
            records.append(try record(statement, entity))
        }
        return records
    }

    private func record(_ statement: SQLiteStatement, _ entity: EntitySchema) throws(StoreError) -> Record {
        var values: [Value] = []
        values.reserveCapacity(entity.attributes.count)
        for (i, attribute) in entity.attributes.enumerated() {
            values.append(try statement.value(at: Int32(i), as: attribute.type,
                                              context: "\(entity.name).\(attribute.name)"))
        }
        return Record(layout: entity.layout, values: values)
    }

    private func keyValue(_ key: [UInt8], _ entity: EntitySchema) throws(StoreError) -> Value {
        try KeyEncoding.decodeKey(key, as: entity.primaryKeyAttribute.type)
    }

    func get(_ entity: EntitySchema, key: [UInt8]) throws -> Record? {
        let statement = try connection.statement(sql(entity).get)
        try statement.bind([keyValue(key, entity)])
        return try rows(statement, entity).first
    }

    func fetch(_ request: FetchRequest, in entity: EntitySchema) throws -> [Record] {
        try rows(prepared(SQLiteQuery.select(request, entity, columns: sql(entity).columns)), entity)
    }

    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int {
        let where_ = SQLiteQuery.translate(filter)
        let sql = "SELECT count(*) FROM \(SQLiteQuery.quote(entity.name)) WHERE \(where_.sql)"
        let statement = try prepared(SQLFragment(sql, where_.bindings))
        defer { sqlite3_reset(statement.handle) }
        return try statement.step() ? Int(statement.int64(at: 0)) : 0
    }

    func scan(_ entity: EntitySchema, after key: [UInt8]?, limit: Int) throws -> [Record] {
        let texts = sql(entity)
        let statement = try connection.statement(key == nil ? texts.scanFirst : texts.scanAfter)
        if let key {
            try statement.bind([keyValue(key, entity), .int(Int64(limit))])
        } else {
            try statement.bind([.int(Int64(limit))])
        }
        return try rows(statement, entity)
    }

    func metadata(forKey key: String) throws -> [UInt8]? {
        let statement = try connection.statement("SELECT value FROM _ds_meta WHERE key = ?")
        try statement.bind([.string(key)])
        defer { sqlite3_reset(statement.handle) }
        return try statement.step() ? statement.bytes(at: 0) : nil
    }

    private func write(_ sql: String, _ record: Record, in entity: EntitySchema) throws {
        let statement = try connection.statement(sql)
        try statement.bind(record.values(in: entity.layout))
        defer { sqlite3_reset(statement.handle) }
        do {
            _ = try statement.step()
        } catch {
            if let code = error.cause?.code, code & 0xFF == SQLITE_CONSTRAINT {
                throw constraintError(error, record, entity)
            }
            throw error
        }
    }

    /// Names the index (or primary key) from SQLite's "UNIQUE constraint failed: E.a, E.b".
    private func constraintError(_ error: StoreError, _ record: Record, _ entity: EntitySchema) -> StoreError {
        let code = error.cause?.code ?? 0
        // SQLITE_CONSTRAINT_PRIMARYKEY and SQLITE_CONSTRAINT_ROWID (extended codes are macros
        // Swift does not import).
        if code == SQLITE_CONSTRAINT | (6 << 8) || code == SQLITE_CONSTRAINT | (10 << 8) {
            return StoreError(.keyExists, "'\(entity.name)' already has an item with key \(record[entity.primaryKey])",
                              cause: error.cause)
        }
        let failed = (error.cause?.message ?? "").split(separator: ":").last.map {
            $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces)
                .replacingOccurrences(of: "\(entity.name).", with: "") }
        } ?? []
        let index = entity.indexes.first { $0.isUnique && $0.attributes == failed }
        let values = (index?.attributes ?? failed).map { record[$0].description }.joined(separator: ", ")
        return StoreError(.uniqueViolation, "unique index '\(entity.name).\(index?.name ?? failed.joined())' already "
            + "holds \(values)", cause: error.cause)
    }

    func insert(_ record: Record, key: [UInt8], in entity: EntitySchema) throws {
        try write(sql(entity).insert, record, in: entity)
    }

    func put(_ record: Record, key: [UInt8], in entity: EntitySchema) throws {
        try write(sql(entity).upsert, record, in: entity)
    }

    func delete(key: [UInt8], in entity: EntitySchema) throws -> Bool {
        try connection.execute(sql(entity).delete, [keyValue(key, entity)])
        return connection.changes > 0
    }

    func deleteAll(in entity: EntitySchema) throws -> Int {
        try connection.execute(sql(entity).deleteAll)
        return connection.changes
    }

    func setMetadata(_ value: [UInt8]?, forKey key: String) throws {
        if let value {
            try connection.execute("INSERT OR REPLACE INTO _ds_meta (key, value) VALUES (?, ?)", [.string(key), .bytes(value)])
        } else {
            try connection.execute("DELETE FROM _ds_meta WHERE key = ?", [.string(key)])
        }
    }
}
