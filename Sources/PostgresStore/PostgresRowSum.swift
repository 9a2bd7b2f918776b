#if Postgres
@_spi(Backend) import DataStoreAPI

/// The checksum each row of an entity's table carries in its last column, `_ds_sum`: the
/// ``RecordSum`` of the row's values (the CRC-32C of their fields as a compact record holds them,
/// up to the last that is not null), computed by the client from the values it binds, and
/// checked by every read of the row against the values it decoded before it hands them over: a
/// value changed under the store (a page damaged past the server's own checksums, which are off
/// unless `initdb --data-checksums`, a restore gone wrong, a write that bypassed the triggers)
/// is then `corrupt` naming the item, not a value.
///
/// A row without a sum (null: another program inserted it, or changed it and the trigger took
/// its sum off) is read as it is, unchecked, as SQLite's are; `check` counts such rows. The
/// trigger (``createTrigger(_:schema:)``) runs only for an update that leaves the sum as it was,
/// which the store's own updates never do when a value changes (they write the new sum).
enum PostgresRowSum {
    /// The column's name, quoted, and as the catalog has it.
    static let column = "\"_ds_sum\""
    static let name = "_ds_sum"
    /// The trigger function (in the store's schema) that takes the sum off a changed row.
    static let function = "_ds_unsum"

    /// The rows are compared as text, doubles printed exactly whatever the session's setting (so
    /// that a change in a double's last bits, or `-0.0` for `0.0`, counts).
    static func createFunction(schema s: String) -> String {
        "CREATE OR REPLACE FUNCTION \(s).\(function)() RETURNS trigger LANGUAGE plpgsql SET extra_float_digits = 3 "
            + "AS $$BEGIN IF NEW::text IS DISTINCT FROM OLD::text THEN NEW.\(column) := NULL; END IF; RETURN NEW; END$$"
    }

    /// The trigger, named `_ds_sum` on each table (it follows the table through a rename).
    static func createTrigger(_ entity: EntitySchema, schema s: String) -> String {
        "CREATE TRIGGER \(column) BEFORE UPDATE ON \(PostgresSQL.table(entity, schema: s)) FOR EACH ROW "
            + "WHEN (NEW.\(column) IS NOT DISTINCT FROM OLD.\(column)) EXECUTE FUNCTION \(s).\(function)()"
    }

    /// The sum of `record`'s values, in `entity`'s order.
    static func sum(_ record: Record, _ entity: EntitySchema) -> Int64 {
        RecordSum.of(record.values(in: entity.layout))
    }

    /// Format 3 to 4, in the transaction that opens the store: each entity's table gets the
    /// column and its trigger, and every row its sum, a page of 1,000 rows per statement. Each
    /// step may find itself done (a table whose header a process of format 3 wrote again).
    static func add(to stored: Schema, in db: PostgresSession, quotedSchema s: String) throws {
        try db.query(createFunction(schema: s))
        let reader = PostgresTransaction(session: db, engine: nil, quotedSchema: s)
        for entity in ((try? stored.resolved()) ?? stored).entities {
            let table = PostgresSQL.table(entity, schema: s)
            try db.query("ALTER TABLE \(table) ADD COLUMN IF NOT EXISTS \(column) bigint")
            try db.query("DROP TRIGGER IF EXISTS \(column) ON \(table)")
            try db.query(createTrigger(entity, schema: s))
            guard let key = entity.attribute(named: entity.primaryKey) else { continue }
            let keyType = PostgresSQL.castType(key.type)
            var after: PrimaryKey?
            while true {
                let page = try reader.scan(entity, after: after, limit: 1_000)
                guard let last = page.last else { break }
                var binds = LibpqParameters()
                let rows = page.map { record -> String in
                    PostgresSQL.bind(record[entity.primaryKey], into: &binds)
                    binds.append(sum(record, entity))
                    return "($\(binds.count - 1)::\(keyType), $\(binds.count)::int8)"
                }
                try db.query("UPDATE \(table) SET \(column) = v.sum FROM (VALUES \(rows.joined(separator: ", "))) "
                    + "AS v(key, sum) WHERE \(table).\(PostgresSQL.quote(entity.primaryKey)) = v.key", binds)
                guard page.count == 1_000 else { break }
                after = try PrimaryKey(last[entity.primaryKey])
            }
        }
    }
}
#endif
