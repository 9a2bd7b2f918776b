@_spi(Backend) import DataStoreAPI

/// The SQL of the fixed statements of one entity, built once when the store opens: building
/// and quoting it per call costs more than SQLite's own work on a small statement.
final class SQLiteEntitySQL: Sendable {
    let columns: String
    let get: String
    let insert: String
    let upsert: String
    let delete: String
    let deleteAll: String
    let scanAll: String
    let scanFirst: String
    let scanAfter: String
    /// How to read a row of `columns`.
    let row: SQLiteRowPlan

    init(_ entity: EntitySchema) {
        let table = SQLiteQuery.quote(entity.name)
        let pk = SQLiteQuery.quote(entity.primaryKey)
        columns = entity.attributes.map { SQLiteQuery.quote($0.name) }.joined(separator: ", ")
        let select = "SELECT \(columns) FROM \(table)"
        get = "\(select) WHERE \(pk) = ?"
        insert = "INSERT INTO \(table) (\(columns)) VALUES ("
            + Array(repeating: "?", count: entity.attributes.count).joined(separator: ", ") + ")"
        let others = entity.attributes.filter { $0.name != entity.primaryKey }.map { SQLiteQuery.quote($0.name) }
        upsert = insert + " ON CONFLICT(\(pk)) DO "
            + (others.isEmpty ? "NOTHING" : "UPDATE SET " + others.map { "\($0) = excluded.\($0)" }.joined(separator: ", "))
        delete = "DELETE FROM \(table) WHERE \(pk) = ?"
        deleteAll = "DELETE FROM \(table)"
        scanAll = "\(select) ORDER BY \(pk)"
        scanFirst = "\(select) ORDER BY \(pk) LIMIT ?"
        scanAfter = "\(select) WHERE \(pk) > ? ORDER BY \(pk) LIMIT ?"
        row = SQLiteRowPlan(entity)
    }
}
