internal import CSQLite
import DataStoreAPI

/// A read or write transaction on one connection.
final class SQLiteTransaction: StorageWriter {
    let connection: SQLiteConnection

    init(connection: SQLiteConnection) {
        self.connection = connection
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
        var values = [String: Value](minimumCapacity: entity.attributes.count)
        for (i, attribute) in entity.attributes.enumerated() {
            values[attribute.name] = try statement.value(at: Int32(i), as: attribute.type,
                                                         context: "\(entity.name).\(attribute.name)")
        }
        return Record(values)
    }

    private func keyValue(_ key: [UInt8], _ entity: EntitySchema) throws(StoreError) -> Value {
        try KeyEncoding.decodeKey(key, as: entity.primaryKeyAttribute.type)
    }

    func get(_ entity: EntitySchema, key: [UInt8]) throws -> Record? {
        let sql = "SELECT \(SQLiteQuery.columns(entity)) FROM \(SQLiteQuery.quote(entity.name)) WHERE "
            + "\(SQLiteQuery.quote(entity.primaryKey)) = ?"
        return try rows(prepared(SQLFragment(sql, [.value(keyValue(key, entity))])), entity).first
    }

    func fetch(_ request: FetchRequest, in entity: EntitySchema) throws -> [Record] {
        try rows(prepared(SQLiteQuery.select(request, entity)), entity)
    }

    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int {
        let where_ = SQLiteQuery.translate(filter)
        let sql = "SELECT count(*) FROM \(SQLiteQuery.quote(entity.name)) WHERE \(where_.sql)"
        let statement = try prepared(SQLFragment(sql, where_.bindings))
        defer { sqlite3_reset(statement.handle) }
        return try statement.step() ? Int(statement.int64(at: 0)) : 0
    }

    func scan(_ entity: EntitySchema, after key: [UInt8]?, limit: Int) throws -> [Record] {
        let pk = SQLiteQuery.quote(entity.primaryKey)
        var sql = "SELECT \(SQLiteQuery.columns(entity)) FROM \(SQLiteQuery.quote(entity.name))"
        var bindings: [SQLFragment.Binding] = []
        if let key {
            sql += " WHERE \(pk) > ?"
            bindings.append(.value(try keyValue(key, entity)))
        }
        sql += " ORDER BY \(pk) LIMIT ?"
        bindings.append(.value(.int(Int64(limit))))
        return try rows(prepared(SQLFragment(sql, bindings)), entity)
    }

    func metadata(forKey key: String) throws -> [UInt8]? {
        let statement = try connection.statement("SELECT value FROM _ds_meta WHERE key = ?")
        try statement.bind([.string(key)])
        defer { sqlite3_reset(statement.handle) }
        return try statement.step() ? statement.bytes(at: 0) : nil
    }

    private func write(_ sql: String, _ record: Record, in entity: EntitySchema) throws {
        let statement = try connection.statement(sql)
        try statement.bind(entity.attributes.map { record[$0.name] })
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
        let sql = "INSERT INTO \(SQLiteQuery.quote(entity.name)) (\(SQLiteQuery.columns(entity))) VALUES ("
            + Array(repeating: "?", count: entity.attributes.count).joined(separator: ", ") + ")"
        try write(sql, record, in: entity)
    }

    func put(_ record: Record, key: [UInt8], in entity: EntitySchema) throws {
        let others = entity.attributes.filter { $0.name != entity.primaryKey }.map(\.name)
        let update = others.isEmpty ? "NOTHING"
            : "UPDATE SET " + others.map { "\(SQLiteQuery.quote($0)) = excluded.\(SQLiteQuery.quote($0))" }
                .joined(separator: ", ")
        let sql = "INSERT INTO \(SQLiteQuery.quote(entity.name)) (\(SQLiteQuery.columns(entity))) VALUES ("
            + Array(repeating: "?", count: entity.attributes.count).joined(separator: ", ")
            + ") ON CONFLICT(\(SQLiteQuery.quote(entity.primaryKey))) DO \(update)"
        try write(sql, record, in: entity)
    }

    func delete(key: [UInt8], in entity: EntitySchema) throws -> Bool {
        let sql = "DELETE FROM \(SQLiteQuery.quote(entity.name)) WHERE \(SQLiteQuery.quote(entity.primaryKey)) = ?"
        try connection.execute(sql, [keyValue(key, entity)])
        return connection.changes > 0
    }

    func deleteAll(in entity: EntitySchema) throws -> Int {
        try connection.execute("DELETE FROM \(SQLiteQuery.quote(entity.name))")
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
