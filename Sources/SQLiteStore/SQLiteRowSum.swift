internal import CChecksum
internal import CSQLite
@_spi(Backend) import DataStoreAPI

/// The checksum each row of an entity's table carries in its last column, `_ds_sum`: the CRC-32C
/// of the row's fields as a compact record holds them (``FieldWriter``: a tag and payload per
/// attribute, in the entity's order) up to its last field that is not null. Bound by each insert
/// (``sum(_:)``), written by SQLite itself where SQL rewrites rows (the SQL function `_ds_sum`:
/// schema steps, the upgrade of an older store), and checked by every read of the row before it
/// is handed over: a byte damaged inside a value, which SQLite's
/// own structure checks cannot see, is then `corrupt` naming the item, not a value.
///
/// A row without a sum (null: another program inserted it, or changed it and the trigger of
/// ``createTrigger(_:in:)`` took its sum off) is read as it is, unchecked; `check` counts such
/// rows. Damage cannot make a sealed row one of them without changing the sum's type byte, which
/// leaves its values as they were.
///
/// Trailing nulls are left out so that adding an optional attribute (a column of nulls, which
/// `ALTER TABLE ADD COLUMN` adds without rewriting a row) leaves every sum as it was; a change
/// that changes the fields of rows written before (a column dropped, one added with a default,
/// a table rebuilt) writes the sums again (``reseal(_:table:in:)``).
enum SQLiteRowSum {
    /// The column, and the SQL function that computes it.
    static let column = "\"_ds_sum\""
    static let function = "_ds_sum"

    /// The CRC-32C of the fields written at `base` up to `end`, as the column holds it.
    @inline(__always)
    static func sum(_ base: UnsafeRawPointer, _ end: Int) -> Int64 {
        Int64(ds_crc32c(0, base, end))
    }

    /// The sum of `count` fields, each `field(i)`, written on the stack.
    @inline(__always)
    static func sum(count: Int, _ field: (Int) -> SQLiteStatement.ColumnField) -> Int64 {
        var size = 0
        for i in 0..<count { size += field(i).size }
        return withUnsafeTemporaryAllocation(byteCount: max(size, 1), alignment: 1) { buffer in
            let base = buffer.baseAddress.unsafelyUnwrapped
            var (at, end) = (0, 0)
            for i in 0..<count {
                let field = field(i)
                at += field.write(at: base + at)
                if field.tag != .null { end = at }
            }
            return sum(base, end)
        }
    }

    /// The sum of a record's values in its entity's order, as the row that binds them holds them
    /// (a bool as 0 or 1, a date as its microseconds: each read back as the field its type
    /// makes): what an insert binds, with no call into SQL.
    static func sum(_ values: RecordValues) -> Int64 {
        RecordSum.of(values)
    }

    /// One letter per attribute, its type: the first argument of the SQL function.
    static func kinds(_ entity: EntitySchema) -> String {
        String(entity.attributes.map { attribute -> Character in
            switch attribute.type {
            case .bool: return "b"
            case .int: return "i"
            case .double: return "d"
            case .string: return "s"
            case .bytes: return "y"
            case .date: return "t"
            case .uuid: return "u"
            }
        })
    }

    /// `_ds_sum('kinds', a, b, …)` over `arguments`, one SQL expression per attribute.
    static func expression(_ entity: EntitySchema, _ arguments: [String]) -> String {
        "\(function)('\(kinds(entity))', \(arguments.joined(separator: ", ")))"
    }

    /// Writes the sum of every row of `table`, whose columns are `entity`'s attributes: after a
    /// change that changed the fields of the rows written before, and when a store of format 1
    /// is upgraded.
    static func reseal(_ entity: EntitySchema, table: String, in connection: SQLiteConnection) throws {
        try connection.execute("UPDATE \(SQLiteQuery.quote(table)) SET \(column) = "
            + expression(entity, entity.attributes.map { SQLiteQuery.quote($0.name) }))
    }

    /// The trigger that takes the sum off a row another program changes (the `sqlite3` shell,
    /// which cannot compute one): after an update that changed a value but left the sum as it
    /// was, the sum becomes null, and reads then take the row as it is, unchecked, as they take a
    /// row another program inserted without one. The store's own updates always write a new sum
    /// (the same one only when no value changed, which the trigger leaves alone).
    static func createTrigger(_ entity: EntitySchema, in connection: SQLiteConnection) throws {
        let quote = SQLiteQuery.quote
        let changed = entity.attributes.map { "NEW.\(quote($0.name)) IS NOT OLD.\(quote($0.name))" }
        let pk = quote(entity.primaryKey)
        try connection.execute("CREATE TRIGGER \(triggerName(entity.name)) AFTER UPDATE ON \(quote(entity.name)) "
            + "FOR EACH ROW WHEN NEW.\(column) IS OLD.\(column) AND (\(changed.joined(separator: " OR "))) "
            + "BEGIN UPDATE \(quote(entity.name)) SET \(column) = NULL WHERE \(pk) = NEW.\(pk); END")
    }

    static func dropTrigger(of table: String, in connection: SQLiteConnection) throws {
        try connection.execute("DROP TRIGGER IF EXISTS \(triggerName(table))")
    }

    private static func triggerName(_ table: String) -> String {
        SQLiteQuery.quote("_ds_sum." + table)
    }

    /// Registers the SQL function on a connection.
    static func register(on db: OpaquePointer) -> Int32 {
        sqlite3_create_function_v2(db, function, -1, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_DIRECTONLY, nil,
                                   computeSum, nil, nil, nil)
    }
}

/// `_ds_sum('kinds', v1, …, vn)`: the sum of the values as fields of the kinds' types; null when
/// a value is not of its kind (a read then finds the row damaged, naming the column).
private func computeSum(_ context: OpaquePointer?, _ count: Int32, _ arguments: UnsafeMutablePointer<OpaquePointer?>?) {
    guard let arguments, count >= 1, let text = sqlite3_value_text(arguments[0]),
          Int(sqlite3_value_bytes(arguments[0])) == Int(count) - 1 else {
        return sqlite3_result_error(context, "\(SQLiteRowSum.function): wrong arguments", -1)
    }
    let fields = Int(count) - 1
    var readable = true
    let sum = withUnsafeTemporaryAllocation(of: SQLiteStatement.ColumnField.self, capacity: max(fields, 1)) { table in
        for i in 0..<fields {
            let type: ValueType
            switch text[i] {
            case UInt8(ascii: "b"): type = .bool
            case UInt8(ascii: "i"): type = .int
            case UInt8(ascii: "d"): type = .double
            case UInt8(ascii: "s"): type = .string
            case UInt8(ascii: "y"): type = .bytes
            case UInt8(ascii: "t"): type = .date
            default: type = .uuid
            }
            guard let field = SQLiteStatement.checkedField(arguments[i + 1], SQLiteColumnKind(type: type, optional: true))
            else {
                readable = false
                return Int64(0)
            }
            table.initializeElement(at: i, to: field)
        }
        return SQLiteRowSum.sum(count: fields) { table[$0] }
    }
    if readable { sqlite3_result_int64(context, sum) } else { sqlite3_result_null(context) }
}
