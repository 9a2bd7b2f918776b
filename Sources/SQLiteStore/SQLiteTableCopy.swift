internal import CSQLite
@_spi(Backend) import DataStoreAPI

/// A schema step's copy of an entity's rows into the table that replaces it, made by SQLite:
/// `INSERT INTO staging (…) SELECT … FROM old`, a page of ``pageSize`` rows per statement, for a
/// change that carries values (kept, renamed or removed attributes, new ones taking their
/// default) and converts at most one attribute (a change of type). Reading each row into a
/// record, rewriting it and binding it again (the record path) takes several times as long as
/// SQLite copying the rows itself.
///
/// The copy checks and converts exactly as the record path does, with one SQL function of the
/// writer's connection, registered for the copy only and called once per row with every column
/// of the old row, `_ds_row(c1, …, cn)`:
/// - it checks each column as a read checks it (``SQLiteStatement/holdsValue(_:_:)``: storage
///   class, null in a required attribute, a bool other than 0 or 1, text that is not UTF-8, a
///   uuid that is not 16 bytes), removed attributes included;
/// - for a change of type it stands in the select list for the converted attribute and returns
///   its value converted by the step's own ``AttributeConversion``, as a bind would store it;
///   otherwise it is the `WHERE` clause and returns 1.
///
/// One function and not a check and a conversion: one call per row instead of two.
///
/// When it fails, the failing page's statement stops (SQLite undoes it), the copy deletes what
/// earlier pages wrote and returns `false`: the record path then runs and fails on the first
/// item that is wrong, with the error every backend gives for it.
struct SQLiteTableCopy {
    /// Rows per statement: a progress report per page, as the record path reports per 10,000.
    static let pageSize = 10_000

    let change: EntityChange
    let staging: EntitySchema
    let connection: SQLiteConnection

    /// Whether SQLite can make the change's copy: values carried or taking defaults, and at most
    /// the one conversion of a change of type (not a custom step's records).
    static func applies(to change: EntityChange) -> Bool {
        change.isStructural || change.conversion != nil
    }

    /// Fills `staging` (empty, with the columns of `change.new`) from the old table.
    /// - Returns: `false`, with `staging` empty again, when a row does not read or a value does
    ///   not convert.
    func run() throws -> Bool {
        let function = RowFunction(change)
        try function.register(on: connection)
        defer { function.unregister(on: connection) }
        if try copyPages(function) { return true }
        try connection.makeStatement("DELETE FROM \(SQLiteQuery.quote(staging.name))").run()
        return false
    }

    /// The pages, each an `INSERT … SELECT` after the last key the previous one copied; the
    /// statements are finalized when this returns, before the function is unregistered.
    private func copyPages(_ function: RowFunction) throws -> Bool {
        let (old, new) = (change.old, change.new)
        let quote = SQLiteQuery.quote
        var defaults: [Value] = []
        let sources = change.carriedFrom
        let row = "_ds_row(\(old.attributes.map { quote($0.name) }.joined(separator: ", ")))"
        let selected = new.attributes.indices.map { i -> String in
            guard let source = sources[i] else {
                defaults.append(new.attributes[i].defaultValue ?? .null)
                return "?\(defaults.count)"
            }
            return source == change.conversion?.position ? row : quote(old.attributes[source].name)
        }
        let insert = "INSERT INTO \(quote(staging.name)) (\(new.attributes.map { quote($0.name) }.joined(separator: ", ")))"
            + " SELECT \(selected.joined(separator: ", ")) FROM \(quote(old.name))"
            + " WHERE \(change.conversion == nil ? row : "1")"
        let order = " ORDER BY \(quote(old.primaryKey)) LIMIT \(Self.pageSize)"
        let first = try connection.makeStatement(insert + order)
        let next = try connection.makeStatement(insert + " AND \(quote(old.primaryKey)) > ?\(defaults.count + 1)" + order)
        let last = try connection.makeStatement("SELECT \(quote(new.primaryKey)) FROM \(quote(staging.name)) "
            + "ORDER BY \(quote(new.primaryKey)) DESC LIMIT 1")
        let keyType = new.primaryKeyAttribute.type
        var (statement, parameters) = (first, defaults)
        while true {
            do {
                try statement.run(parameters)
            } catch {
                if function.failed { return false }
                throw error
            }
            let copied = connection.changes
            change.countVisited(copied)
            if copied < Self.pageSize { return true }
            guard let key = try lastKey(last, keyType) else { return true }
            parameters = defaults + [key]
            statement = next
        }
    }

    /// The key of the last row copied so far.
    private func lastKey(_ last: SQLiteStatement, _ type: ValueType) throws -> Value? {
        defer { sqlite3_reset(last.handle) }
        guard try last.step() else { return nil }
        do {
            return try last.value(at: 0, as: type, optional: false)
        } catch {
            throw StoreError(.corrupt, "\(connection.path): the key of a copied row of '\(change.new.name)' "
                + error.detail)
        }
    }
}

/// The state of a copy's SQL function: what each column must hold, the conversion, and whether
/// the function failed (which ends the copy).
private final class RowFunction {
    let rowKinds: [SQLiteColumnKind]
    /// The step's conversion, for a change of type. Called as it is: a closure taken out of it
    /// (with a default for no conversion) goes through a reabstraction thunk per row.
    let conversion: AttributeConversion?
    let keyColumn: Int
    var failed = false

    init(_ change: EntityChange) {
        let old = change.old
        rowKinds = old.attributes.map {
            SQLiteColumnKind(type: $0.type, optional: $0.isOptional, isPrimaryKey: $0.name == old.primaryKey,
                             isSealed: $0.name == Limits.sealedAttribute)
        }
        conversion = change.conversion
        keyColumn = old.attributes.firstIndex { $0.name == old.primaryKey } ?? 0
    }

    private static let flags = SQLITE_UTF8 | SQLITE_DIRECTONLY

    func register(on connection: SQLiteConnection) throws {
        let state = Unmanaged.passRetained(self).toOpaque()
        let rc = sqlite3_create_function_v2(connection.handle, "_ds_row", Int32(rowKinds.count), Self.flags, state,
                                            copyRow, nil, nil, releaseState)
        // On failure SQLite has called `releaseState` already.
        guard rc == SQLITE_OK else {
            throw connection.error(rc, "cannot register the SQL function of a schema step's copy")
        }
    }

    /// Removes the function; SQLite releases its state.
    func unregister(on connection: SQLiteConnection) {
        sqlite3_create_function_v2(connection.handle, "_ds_row", Int32(rowKinds.count), Self.flags, nil,
                                   nil, nil, nil, nil)
    }

    func fail(_ context: OpaquePointer?, _ message: String) {
        failed = true
        sqlite3_result_error(context, message, -1)
    }
}

private func releaseState(_ state: UnsafeMutableRawPointer?) {
    if let state { Unmanaged<RowFunction>.fromOpaque(state).release() }
}

/// `_ds_row(c1, …, cn)`: an error at the first column that does not read as its attribute; else
/// the converted column's value converted, or 1 when the step converts nothing.
private func copyRow(_ context: OpaquePointer?, _ count: Int32, _ arguments: UnsafeMutablePointer<OpaquePointer?>?) {
    let function = Unmanaged<RowFunction>.fromOpaque(sqlite3_user_data(context)!).takeUnretainedValue()
    let kinds = function.rowKinds
    guard let arguments, Int(count) == kinds.count else { return function.fail(context, "_ds_row: wrong arguments") }
    for i in kinds.indices where !SQLiteStatement.holdsValue(arguments[i], kinds[i]) {
        return function.fail(context, "_ds_row: column \(i) does not read")
    }
    guard let conversion = function.conversion else { return sqlite3_result_int(context, 1) }
    let position = conversion.position
    guard let value = SQLiteStatement.checkedValue(arguments[position], kinds[position]) else {
        return function.fail(context, "_ds_row: the converted column does not read")
    }
    let converted: Value
    do {
        converted = try conversion.convert(value) {
            SQLiteStatement.checkedValue(arguments[function.keyColumn], kinds[function.keyColumn]) ?? .null
        }
    } catch {
        return function.fail(context, "_ds_row: the value does not convert")
    }
    switch converted {
    case .null: sqlite3_result_null(context)
    case .bool(let b): sqlite3_result_int64(context, b ? 1 : 0)
    case .int(let n): sqlite3_result_int64(context, n)
    case .date(let t): sqlite3_result_int64(context, t.microsecondsSinceEpoch)
    case .double(let d): sqlite3_result_double(context, d)
    case .string(var s):
        s.withUTF8 { text in
            guard let base = text.baseAddress, !text.isEmpty else { return sqlite3_result_text(context, "", 0, sqliteStatic) }
            sqlite3_result_text(context, UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self), Int32(text.count),
                                sqliteTransient)
        }
    case .bytes(let b): blobResult(context, b)
    case .uuid(let u): blobResult(context, u.bytes)
    }
}

/// A blob result as a bind stores it: an empty blob is a zero-length blob, not null.
private func blobResult(_ context: OpaquePointer?, _ bytes: [UInt8]) {
    guard !bytes.isEmpty else { return sqlite3_result_zeroblob(context, 0) }
    bytes.withUnsafeBytes { sqlite3_result_blob(context, $0.baseAddress, Int32($0.count), sqliteTransient) }
}
