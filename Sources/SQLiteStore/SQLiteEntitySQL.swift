@_spi(Backend) import DataStoreAPI

/// The SQL of the fixed statements of one entity, built once when the store opens: building
/// and quoting it per call costs more than SQLite's own work on a small statement.
final class SQLiteEntitySQL: Sendable {
    let columns: String
    let get: String
    /// The insert and upsert, whose parameters are the attributes' values, then the row's
    /// checksum when the table has one (``sealed``).
    let insert: String
    let upsert: String
    let sealed: Bool
    let delete: String
    let deleteAll: String
    let scanAll: String
    let scanFirst: String
    let scanAfter: String
    /// How to read a row of `columns`.
    let row: SQLiteRowPlan
    /// Where the primary key is among the attributes.
    let keySlot: Int

    /// - Parameter sealed: whether the table's rows carry their checksum (``SQLiteRowSum``), as
    ///   every table of a store of the current format does: its reads then select it after the
    ///   attributes' columns, and its writes compute it.
    init(_ entity: EntitySchema, sealed: Bool = true) {
        self.sealed = sealed
        let table = SQLiteQuery.quote(entity.name)
        let pk = SQLiteQuery.quote(entity.primaryKey)
        let attributes = entity.attributes.map { SQLiteQuery.quote($0.name) }
        columns = (sealed ? attributes + [SQLiteRowSum.column] : attributes).joined(separator: ", ")
        let select = "SELECT \(columns) FROM \(table)"
        get = "\(select) WHERE \(pk) = ?"
        // The row's checksum is bound after the values (SQLiteStatement.bind(_:sum:)).
        insert = "INSERT INTO \(table) (\(columns)) VALUES ("
            + Array(repeating: "?", count: attributes.count + (sealed ? 1 : 0)).joined(separator: ", ") + ")"
        let others = entity.attributes.filter { $0.name != entity.primaryKey }.map { SQLiteQuery.quote($0.name) }
            + (sealed ? [SQLiteRowSum.column] : [])
        upsert = insert + " ON CONFLICT(\(pk)) DO "
            + (others.count <= (sealed ? 1 : 0) ? "NOTHING"
                : "UPDATE SET " + others.map { "\($0) = excluded.\($0)" }.joined(separator: ", "))
        delete = "DELETE FROM \(table) WHERE \(pk) = ?"
        deleteAll = "DELETE FROM \(table)"
        scanAll = "\(select) ORDER BY \(pk)"
        scanFirst = "\(select) ORDER BY \(pk) LIMIT ?"
        scanAfter = "\(select) WHERE \(pk) > ? ORDER BY \(pk) LIMIT ?"
        row = SQLiteRowPlan(entity, sealed: sealed)
        keySlot = entity.attributes.firstIndex { $0.name == entity.primaryKey } ?? 0
    }
}
