internal import CSQLite
@_spi(Backend) import DataStoreAPI
import Foundation

/// A read or write transaction on one connection.
final class SQLiteTransaction: StorageWriter {
    let connection: SQLiteConnection
    let statements: NameIndex<SQLiteEntitySQL>

    init(connection: SQLiteConnection, statements: NameIndex<SQLiteEntitySQL>) {
        self.connection = connection
        self.statements = statements
        if !statements.isEmpty, let plan = connection.insertPlan {
            lastInsertReference = Unmanaged.passUnretained(plan)
        }
    }

    /// SQL built for entities the engine's schema does not hold as given (a schema upgrade's
    /// intermediate entities), kept for the transaction: building it per call cost more than
    /// the rows it writes.
    private var built: [String: (EntitySchema, SQLiteEntitySQL)] = [:]

    /// The engine's fixed SQL of the entity asked for last: a loop of writes names one entity
    /// again and again, and finding it by name hashed the name each time (`statements` does not
    /// change during a transaction).
    private var lastFixed: (name: String, sql: SQLiteEntitySQL)?

    private func sql(_ entity: EntitySchema) -> SQLiteEntitySQL {
        if let last = lastFixed, last.name == entity.name { return last.sql }
        if let fixed = statements[entity.name] {
            lastFixed = (entity.name, fixed)
            return fixed
        }
        if let (known, sql) = built[entity.name], known == entity { return sql }
        let sql = SQLiteEntitySQL(entity)
        built[entity.name] = (entity, sql)
        return sql
    }

    private func prepared(_ fragment: SQLFragment) throws(StoreError) -> SQLiteStatement {
        let statement = try connection.requestStatement(fragment.sql)
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
        var arena = CompactArena()
        let plan = sql(entity).row
        while try statement.step() {
            records.append(try record(statement, entity, plan, arena: &arena))
        }
        return records
    }

    /// The statement's row as a record of its own (a point get's, a page's to refill later).
    private func record(_ statement: SQLiteStatement, _ entity: EntitySchema,
                        _ plan: SQLiteRowPlan) throws(StoreError) -> Record {
        var arena = CompactArena()
        return try record(statement, entity, plan, arena: &arena)
    }

    /// The statement's row as a new compact record of the arena.
    private func record(_ statement: SQLiteStatement, _ entity: EntitySchema, _ plan: SQLiteRowPlan,
                        arena: inout CompactArena) throws(StoreError) -> Record {
        if let record = statement.readRow(plan, into: &arena) { return record }
        // A row too large for a compact record's offsets, or one that does not read (the
        // failure then names its column): values of its own.
        var values = RecordArena()
        guard let record = values.record(layout: plan.layout, { statement.readRow(plan, into: &$0) }) else {
            throw rowFailure(statement, entity, plan)
        }
        return record
    }

    /// What is wrong with the statement's row, which did not read: the first column that does
    /// not, or else its checksum, named with the item's key.
    private func rowFailure(_ statement: SQLiteStatement, _ entity: EntitySchema, _ plan: SQLiteRowPlan) -> StoreError {
        for (i, attribute) in entity.attributes.enumerated() {
            do throws(ColumnReadFailure) {
                _ = try statement.value(at: Int32(i), as: attribute.type, optional: attribute.isOptional,
                                        isPrimaryKey: attribute.name == entity.primaryKey)
            } catch {
                return StoreError(error.outOfMemory ? .io : .corrupt,
                                  "\(connection.path): \(entity.name)[\(Self.keyText(statement, entity))]"
                                    + ".\(attribute.name) \(error.detail)")
            }
        }
        if !statement.rowSumMatches(plan) {
            let column = Int32(plan.kinds.count)
            let why = sqlite3_column_type(statement.handle, column) == SQLITE_INTEGER
                ? "its checksum does not match its values (they changed after it was written)"
                : "its checksum is not a number"
            return StoreError(.corrupt, "\(connection.path): \(entity.name)[\(Self.keyText(statement, entity))]: \(why)")
        }
        return StoreError(.io, "\(connection.path): a row of '\(entity.name)' \(ColumnReadFailure.outOfMemory.detail)")
    }

    /// The row's primary key as text, for error messages about the row.
    private static func keyText(_ statement: SQLiteStatement, _ entity: EntitySchema) -> String {
        guard let column = entity.attributes.firstIndex(where: { $0.name == entity.primaryKey }) else { return "?" }
        switch sqlite3_column_type(statement.handle, Int32(column)) {
        case SQLITE_INTEGER: return String(statement.int64(at: Int32(column)))
        case SQLITE_NULL: return "null"
        default:
            let bytes = statement.bytes(at: Int32(column))
            if entity.primaryKeyAttribute.type == .uuid, let uuid = UUID(bytes: bytes) { return uuid.uuidString }
            // Text as the key syntax writes it, shortened when long; anything else (a damaged
            // uuid, bytes that are not UTF-8, control characters) as a SQL blob literal.
            if entity.primaryKeyAttribute.type == .string, let text = String(validating: bytes, as: UTF8.self),
               !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                return text.count <= 48 ? "\"\(text)\"" : "\"\(text.prefix(40))…\" (\(bytes.count) bytes)"
            }
            return "x'" + bytes.prefix(32).map { String(format: "%02x", $0) }.joined() + "'"
                + (bytes.count > 32 ? "… (\(bytes.count) bytes)" : "")
        }
    }

    /// The point-get statement of the entity asked for last, when its SQL is the engine's fixed
    /// SQL for that name: a loop of gets names one entity again and again, and finding the
    /// statement by its SQL text cost more than SQLite's own lookup.
    private var lastGet: (name: String, statement: SQLiteStatement, row: SQLiteRowPlan)?

    func get(_ entity: EntitySchema, key: PrimaryKey) throws -> Record? {
        try get(entity, keyValue: key.value)
    }

    /// SQLite keys rows by the key's value: no encoding needed.
    func get(_ entity: EntitySchema, keyValue: Value) throws -> Record? {
        let statement: SQLiteStatement, plan: SQLiteRowPlan
        if let last = lastGet, last.name == entity.name, sqlite3_stmt_busy(last.statement.handle) == 0 {
            (statement, plan) = (last.statement, last.row)
        } else {
            let texts = sql(entity)
            (statement, plan) = (try connection.statement(texts.get), texts.row)
            lastGet = statements[entity.name] == nil ? nil : (entity.name, statement, plan)
        }
        try statement.bind(only: keyValue)
        defer { sqlite3_reset(statement.handle) }
        return try statement.step() ? try record(statement, entity, plan) : nil
    }

    func fetch(_ request: FetchRequest, in entity: EntitySchema) throws -> [Record] {
        let select = SQLiteQuery.select(request, entity, columns: sql(entity).columns)
        if evaluatesInSwift(select) {
            var stages = RequestStages(request)
            for (key, record) in try keyedRecords(entity) where !stages.offer(key: key, record: record) { break }
            return stages.finish()
        }
        return try rows(prepared(select), entity)
    }

    /// Steps the request's statement, handing each row to `body` as a compact record of one
    /// arena (a new chunk every 32 KiB of rows, whether `body` keeps the records or not), which
    /// costs less than refilling one record's values per row.
    func forEach(_ request: FetchRequest, in entity: EntitySchema, _ body: (Record) throws -> Bool) throws {
        let select = SQLiteQuery.select(request, entity, columns: sql(entity).columns)
        if evaluatesInSwift(select) { return try forEachFetched(request, in: entity, body) }
        let statement = try prepared(select)
        defer { sqlite3_reset(statement.handle) }
        let plan = sql(entity).row
        var arena = CompactArena()
        while try statement.step() {
            if !(try body(try record(statement, entity, plan, arena: &arena))) { return }
        }
    }

    /// Steps the request's statement, handing each row to `body` as it is in the statement: the
    /// columns are checked (as a read checks them) and nothing is built.
    func visitsInPlace(_ request: FetchRequest) -> Bool { true }

    func visit(_ request: FetchRequest, in entity: EntitySchema, _ body: (any RowCursor) throws -> Bool) throws {
        let select = SQLiteQuery.select(request, entity, columns: sql(entity).columns)
        if evaluatesInSwift(select) { return try visitRecords(request, in: entity, body) }
        let statement = try prepared(select)
        defer { sqlite3_reset(statement.handle) }
        let plan = sql(entity).row
        let cursor = SQLiteRowCursor(entity, statement.handle, plan: plan)
        // Boxed once: made for each call, the existential retained and released the cursor per row.
        let row: any RowCursor = cursor
        while try statement.step() {
            guard cursor.check() else { throw rowFailure(statement, entity, plan) }
            if !(try body(row)) { return }
        }
    }

    /// Whether a request's SQL is beyond what SQLite takes: nested too deep for its parser, or
    /// with more bound values than a statement may have (a filter across a relationship becomes
    /// an `IN` of the related keys, 10,000 per term over 10,000 related items). Such a request is
    /// evaluated in Swift over the entity in key order, with the same answers.
    private func evaluatesInSwift(_ fragment: SQLFragment) -> Bool {
        SQLiteQuery.nestsTooDeep(fragment.sql) || fragment.bindings.count > connection.maxVariables
    }

    /// Every item of the entity in key order, for filters too deep for SQLite's parser.
    private func keyedRecords(_ entity: EntitySchema) throws -> [(key: [UInt8], record: Record)] {
        try rows(connection.statement(sql(entity).scanAll), entity).map { record in
            (try PrimaryKey(record[entity.primaryKey]).bytes, record)
        }
    }

    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int {
        let where_ = SQLiteQuery.translate(filter)
        if evaluatesInSwift(where_) {
            return try keyedRecords(entity).reduce(0) { $0 + (filter.matches($1.record) ? 1 : 0) }
        }
        let sql = "SELECT count(*) FROM \(SQLiteQuery.quote(entity.name)) WHERE \(where_.sql)"
        let statement = try prepared(SQLFragment(sql, where_.bindings))
        defer { sqlite3_reset(statement.handle) }
        return try statement.step() ? Int(statement.int64(at: 0)) : 0
    }

    func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int) throws -> [Record] {
        try rows(try scanStatement(entity, after: key, limit: limit), entity)
    }

    /// The page's records, compact records of one arena (fewer instructions than refilling
    /// values of the page's own, which built each text and blob again), in the page's array.
    func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int, into page: inout [Record]) throws {
        let statement = try scanStatement(entity, after: key, limit: limit)
        defer { sqlite3_reset(statement.handle) }
        let plan = sql(entity).row
        var arena = CompactArena()
        page.removeAll(keepingCapacity: true)
        while try statement.step() {
            page.append(try record(statement, entity, plan, arena: &arena))
        }
    }

    /// Reads every row of `entity` in key order, each checked as a read checks it; what is
    /// damaged is added to `damage` (one line per row, naming it) and the read goes on.
    /// - Returns: the rows read.
    func checkRows(_ entity: EntitySchema, damage: inout [String], unsealed: inout Int) throws -> Int {
        let statement = try connection.statement(sql(entity).scanAll)
        defer { sqlite3_reset(statement.handle) }
        let plan = sql(entity).row
        var count = 0
        while try statement.step() {
            count += 1
            if plan.sealed && sqlite3_column_type(statement.handle, Int32(plan.kinds.count)) == SQLITE_NULL {
                unsealed += 1
            }
            do throws(StoreError) {
                _ = try record(statement, entity, plan)
            } catch {
                guard error.code == .corrupt else { throw error }
                let prefix = connection.path + ": "
                damage.append(error.message.hasPrefix(prefix) ? String(error.message.dropFirst(prefix.count)) : error.message)
            }
        }
        return count
    }

    private func scanStatement(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int) throws -> SQLiteStatement {
        let texts = sql(entity)
        let statement = try connection.statement(key == nil ? texts.scanFirst : texts.scanAfter)
        if let key {
            try statement.bind([key.value, .int(Int64(limit))])
        } else {
            try statement.bind([.int(Int64(limit))])
        }
        return statement
    }

    func metadata(forKey key: String) throws -> [UInt8]? {
        let statement = try connection.statement("SELECT value FROM _ds_meta WHERE key = ?")
        try statement.bind([.string(key)])
        defer { sqlite3_reset(statement.handle) }
        return try statement.step() ? statement.bytes(at: 0) : nil
    }

    /// The connection's count of committed write transactions
    /// (``SQLiteConnection/writeCommits``), with the rows it has changed so far
    /// (`sqlite3_total_changes64`). After writes: the count this transaction's commit makes.
    /// Before: the count, when the file's data version (``SQLiteConnection/fileDataVersion()``,
    /// read now that the transaction holds the write lock) is the one the connection's last
    /// commit left, so that nothing (another connection, another process, a statement of this
    /// connection outside the store's transactions) changed the file since; otherwise a count
    /// no commit reaches, so that the value matches none the store kept.
    func commitVersion(afterWrites: Bool) throws -> CommitVersion? {
        let changes = UInt64(bitPattern: sqlite3_total_changes64(connection.handle))
        if afterWrites { return CommitVersion(connection.writeCommits &+ 1, changes) }
        guard let after = connection.dataVersionAfterCommit, let now = connection.fileDataVersion(), now == after else {
            return CommitVersion(.max, changes)
        }
        return CommitVersion(connection.writeCommits, changes)
    }

    /// The insert or upsert statement of the entity written last (a loop of writes writes one
    /// entity again and again; finding the statement by its SQL hashed the whole text).
    private var lastWrite: (name: String, inserting: Bool, statement: SQLiteStatement)?

    /// The entity a model or record was inserted into last, its insert statement and its
    /// columns' kinds (``SQLiteInsertPlan``): a loop of inserts finds them by the entity's identity
    /// (one object, not retained per insert: ``lastInsertReference``). Kept by the connection
    /// (``SQLiteConnection/insertPlan``) from one transaction to the next, so that a small write
    /// transaction neither builds the plan nor allocates its buffers again; only by transactions
    /// over the engine's own SQL (``statements``), the one map of the connection's engine, which
    /// does not change while it is open. Not replaced while a model hands over its values
    /// (``handingOverFields``), which the plan in use needs.
    private var lastInsert: SQLiteInsertPlan? {
        get { connection.insertPlan }
        set {
            connection.insertPlan = newValue
            lastInsertReference = newValue.map { Unmanaged.passUnretained($0) }
        }
    }
    /// ``lastInsert``, unretained (taken from the connection when the transaction begins).
    @exclusivity(unchecked) private var lastInsertReference: Unmanaged<SQLiteInsertPlan>?
    /// Whether a model is handing its values to an insert's statement (``insertFields(_:in:)``):
    /// an insert or save its code makes meanwhile (from its `writeStoredFields`, its `record()`
    /// or a `RowValue`'s `appendStored`) goes through a statement of its own, so that the row
    /// being bound and the plan binding it are left as they are (deletes and reads use other
    /// statements).
    @exclusivity(unchecked) private var handingOverFields = false

    private func writeStatement(_ sql: String, of entity: EntitySchema, inserting: Bool) throws -> SQLiteStatement {
        if let last = lastWrite, last.inserting == inserting, last.name == entity.name,
           sqlite3_stmt_busy(last.statement.handle) == 0 {
            return last.statement
        }
        let statement = try connection.statement(sql)
        lastWrite = statements[entity.name] == nil ? nil : (entity.name, inserting, statement)
        return statement
    }

    private func write(_ sql: String, sealed: Bool, _ record: Record, key: PrimaryKey,
                       in entity: EntitySchema, inserting: Bool) throws {
        let statement = handingOverFields ? try SQLiteStatement(connection: connection, sql: sql, persistent: false)
            : try writeStatement(sql, of: entity, inserting: inserting)
        let values = record.values(in: entity.layout)
        try statement.bind(values, sum: sealed ? SQLiteRowSum.sum(values) : nil)
        defer { sqlite3_reset(statement.handle) }
        do {
            _ = try statement.step()
        } catch where error.code == .uniqueViolation {
            throw try constraintError(error, record, key: key, in: entity, inserting: inserting)
        }
    }

    /// Inserts a model from the values it hands over, written into its insert plan's buffer and
    /// bound from there, checked as the record's values are (``StoredFieldBuffer``), with the
    /// row's sum taken over them: no record, no array of values. A value that must be converted
    /// or refused leaves the insert to the model's record.
    func insertFields<T: RowCodable>(_ object: T, in entity: EntitySchema) throws -> Value? {
        // An insert the model's own code makes while it hands over its values goes the record's
        // way, through a statement of its own (``handingOverFields``).
        guard !handingOverFields else { return nil }
        handingOverFields = true
        defer { handingOverFields = false }
        do {
            return try withInsertPlan(entity) { try $0.insert(object) }
        } catch let failed as SQLiteInsertPlan.ConstraintFailed {
            // Only the row's own step: an error the model's code threw while it handed its values
            // over (a write of its own refused) goes on as it is, and its code runs once.
            let record = try entity.normalize(object.record())
            throw try constraintError(failed.error, record, key: PrimaryKey(entity.primaryKeyValue(of: record)),
                                      in: entity, inserting: true)
        }
    }

    /// Inserts a record whose names are the entity's, in their order, from its values as they
    /// are, as ``insertFields(_:in:)`` inserts a model's: no normalized record, no array of
    /// values. Any other record, or a value that must be converted or refused, leaves the insert
    /// to the normalized record.
    var takesRecordFields: Bool { true }

    func insertRecordFields(_ record: Record, in entity: EntitySchema) throws -> Value? {
        guard !handingOverFields else { return nil }
        do {
            return try withInsertPlan(entity) { try $0.insert(record) }
        } catch let failed as SQLiteInsertPlan.ConstraintFailed {
            let normalized = try entity.normalize(record)
            throw try constraintError(failed.error, normalized, key: PrimaryKey(entity.primaryKeyValue(of: normalized)),
                                      in: entity, inserting: true)
        }
    }

    /// Runs `body` with the entity's insert plan, which binds and steps (its statement and kinds
    /// used where they are: copied out of it, each was retained and released per insert): the
    /// last plan, through an unretained reference (``lastInsert`` keeps it; reading the property
    /// retained it per insert), when it is the entity's and not stepping; otherwise a new one,
    /// kept as the last (by the connection) when the entity's SQL is the engine's own.
    @inline(__always)
    private func withInsertPlan(_ entity: EntitySchema,
                                _ body: (SQLiteInsertPlan) throws -> Value?) throws -> Value? {
        if let last = lastInsertReference,
           last._withUnsafeGuaranteedRef({ $0.entity.isSameDefinition(as: entity) && !$0.statement.isBusy }) {
            return try last._withUnsafeGuaranteedRef(body)
        }
        let texts = sql(entity)
        let statement = try writeStatement(texts.insert, of: entity, inserting: true)
        let plan = SQLiteInsertPlan(entity, texts, statement)
        lastInsert = statements[entity.name] == nil ? nil : plan
        return try body(plan)
    }

    /// The package's error for a failed constraint, decided by the extended result code and the
    /// schema, never by SQLite's message: an insert whose key is taken is `keyExists` even when
    /// SQLite checked a unique index first (WITHOUT ROWID tables do); otherwise the unique index
    /// that holds the record's values for another item.
    private func constraintError(_ error: StoreError, _ record: Record, key: PrimaryKey, in entity: EntitySchema,
                                 inserting: Bool) throws -> StoreError {
        let code = error.cause?.code ?? 0
        let keyTaken = try inserting && get(entity, key: key) != nil
        if code == SQLiteConnection.constraintPrimaryKey || code == SQLiteConnection.constraintRowID || keyTaken {
            return StoreError.keyExists(entity, record, cause: error.cause)
        }
        do {
            try UniqueIndexRule.check(record, key: key, in: entity) { index, values in
                let sameValues = Filter.and(zip(index.attributes, values).map { .compare($0, .equal, $1) })
                return try fetch(FetchRequest(entity.name, filter: sameValues, limit: 2), in: entity)
            }
        } catch let violation as StoreError where violation.code == .uniqueViolation {
            return StoreError(.uniqueViolation, violation.message, cause: error.cause, items: violation.items)
        }
        return error
    }

    func insert(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        let texts = sql(entity)
        try write(texts.insert, sealed: texts.sealed, record, key: key, in: entity, inserting: true)
    }

    func put(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        let texts = sql(entity)
        try write(texts.upsert, sealed: texts.sealed, record, key: key, in: entity, inserting: false)
    }

    func delete(key: PrimaryKey, in entity: EntitySchema) throws -> Bool {
        try connection.execute(sql(entity).delete, [key.value])
        return connection.changes > 0
    }

    func deleteAll(in entity: EntitySchema) throws -> Int {
        try connection.execute(sql(entity).deleteAll)
        return connection.changes
    }

    func setMetadata(_ value: [UInt8]?, forKey key: String) throws {
        if let value {
            // An upsert keeps the row (and its rowid) where it is, so a value rewritten by every
            // transaction (the change feed's state) dirties one page, not a delete and an insert.
            try connection.execute("INSERT INTO _ds_meta (key, value) VALUES (?, ?) "
                + "ON CONFLICT (key) DO UPDATE SET value = excluded.value", [.string(key), .bytes(value)])
        } else {
            try connection.execute("DELETE FROM _ds_meta WHERE key = ?", [.string(key)])
        }
    }
}

/// The change feed's entries in a table of their own, `_ds_feed (seq INTEGER PRIMARY KEY, entry
/// BLOB)`: a rowid table, so a recorded transaction appends at its right edge and the retention
/// deletes batches from its left; and its bounds are two rowid lookups.
extension SQLiteTransaction: ChangeLogWriting {
    var changeLogStorage: (any ChangeLogStoring)? { self }
    var changeLogWriter: (any ChangeLogWriting)? { self }

    func changeLogBounds() throws -> (first: UInt64, last: UInt64)? {
        guard try connection.hasFeedTable() else { return nil }
        // Two queries: SQLite answers a lone min() or max() from one end of the B-tree, but scans
        // the table for both in one query.
        guard let first = try connection.scalar("SELECT min(seq) FROM _ds_feed"),
            let last = try connection.scalar("SELECT max(seq) FROM _ds_feed")
        else { return nil }
        // Numbers the feed never writes (another program's rows): damage, not a trap.
        guard first >= 1 else {
            throw StoreError(.corrupt, "the change feed's table _ds_feed holds entries numbered \(first) to \(last); "
                + "the feed numbers its entries from 1")
        }
        return (UInt64(first), UInt64(last))
    }

    func changeLogEntry(_ sequence: UInt64) throws -> [UInt8]? {
        guard try connection.hasFeedTable() else { return nil }
        let statement = try connection.statement("SELECT entry FROM _ds_feed WHERE seq = ?")
        try statement.bind([.int(Int64(sequence))])
        defer { sqlite3_reset(statement.handle) }
        return try statement.step() ? statement.bytes(at: 0) : nil
    }

    func appendChangeLog(_ sequence: UInt64, _ entry: [UInt8]) throws {
        if try !connection.hasFeedTable() {
            try connection.execute("CREATE TABLE IF NOT EXISTS _ds_feed (seq INTEGER PRIMARY KEY, entry BLOB NOT NULL)")
        }
        // Bound without an array of values around them (an allocation, and a lookup of the
        // statement by its text, each transaction).
        let statement = try connection.statement(.appendFeedEntry)
        try entry.withUnsafeBytes { try statement.run(Int64(sequence), $0) }
    }

    func removeChangeLog(before sequence: UInt64) throws {
        guard try connection.hasFeedTable() else { return }
        try connection.execute("DELETE FROM _ds_feed WHERE seq < ?", [.int(Int64(sequence))])
    }
}

/// An entity's insert, ready to bind and step: its statement (the connection's cached one), its
/// columns' kinds, and the buffer a model's or record's fields are written into. Kept by the
/// connection from one insert, and one transaction, to the next (``SQLiteConnection/insertPlan``).
final class SQLiteInsertPlan {
    /// The row's step failed a unique constraint (its key or a unique index): what
    /// ``SQLiteTransaction/insertFields(_:in:)`` and ``SQLiteTransaction/insertRecordFields(_:in:)``
    /// name from the normalized record.
    struct ConstraintFailed: Error {
        let error: StoreError
    }

    let entity: EntitySchema
    let statement: SQLiteStatement
    /// The entity's column kinds (``SQLiteRowPlan/kinds``), kept by the plan so that an insert
    /// reads them without retaining an array.
    private let kinds: UnsafeMutableBufferPointer<SQLiteColumnKind>
    private let keySlot: Int
    private let sealed: Bool

    /// The buffer the model's fields are written into (``StoredFieldBuffer``), kept from one
    /// insert to the next.
    private var fields: UnsafeMutableRawPointer
    private var fieldCapacity = StoredFieldBuffer.initialCapacity

    init(_ entity: EntitySchema, _ texts: SQLiteEntitySQL, _ statement: SQLiteStatement) {
        (self.entity, self.statement, keySlot, sealed) = (entity, statement, texts.keySlot, texts.sealed)
        kinds = .allocate(capacity: texts.row.kinds.count)
        _ = kinds.initialize(from: texts.row.kinds)
        fields = StoredFieldBuffer.allocate(capacity: fieldCapacity)
    }

    deinit {
        kinds.deinitialize()
        kinds.deallocate()
        // The statement, cached by the connection, outlives the plan: none of its parameters
        // is left pointing into the buffer let go.
        if !statement.isBusy { sqlite3_clear_bindings(statement.handle) }
        fields.deallocate()
    }

    /// Binds the model's values and the row's sum, and steps (the statement reset after): the
    /// key's value, or `nil` (nothing left bound) when a value did not fit as it is.
    func insert<T: RowCodable>(_ object: T) throws -> Value? {
        var buffer = StoredFieldBuffer(base: fields, capacity: fieldCapacity)
        defer { if fieldCapacity > StoredFieldBuffer.keptCapacity { shrink() } }
        // The buffer the fields were written into (the one given, or a larger one), kept
        // first (this runs before the shrink), thrown out of or not: a grown buffer let the
        // one given go.
        defer { (fields, fieldCapacity) = (buffer.base, buffer.capacity) }
        try object.writeStoredFields(to: &buffer)
        return try bindAndStep(buffer)
    }

    /// Binds a record's values, written as the model's are (``Record/appendValues(inOrderOf:to:)``),
    /// and steps: the key's value, or `nil` (nothing stored) when the record's names are not the
    /// entity's in order or a value did not fit as it is.
    func insert(_ record: Record) throws -> Value? {
        var buffer = StoredFieldBuffer(base: fields, capacity: fieldCapacity)
        defer { if fieldCapacity > StoredFieldBuffer.keptCapacity { shrink() } }
        defer { (fields, fieldCapacity) = (buffer.base, buffer.capacity) }  // As insert(_:T) keeps it.
        guard try record.appendValues(inOrderOf: entity.layout, to: &buffer) else { return nil }
        return try bindAndStep(buffer)
    }

    @inline(__always)
    private func bindAndStep(_ buffer: StoredFieldBuffer) throws -> Value? {
        // The key attribute's type is an int, string or uuid (the schema's rule), so a value
        // bound for it is a key.
        guard let key = try buffer.bind(statement, kinds: UnsafeBufferPointer(kinds), keySlot: keySlot,
                                        summed: sealed) else { return nil }
        try step()
        return key
    }

    /// Steps the row bound (the statement reset after). A method of its own: with this
    /// `catch` in ``insert(_:)``, Swift 6.3.1's compiler crashed (`MandatoryAllocBoxToStack`).
    private func step() throws {
        defer { sqlite3_reset(statement.handle) }
        do {
            _ = try statement.step()
        } catch where error.code == .uniqueViolation {
            throw ConstraintFailed(error: error)
        }
    }

    /// Lets a buffer grown past ``StoredFieldBuffer/keptCapacity`` go after its row was
    /// stepped (parameters still point into it: none is left bound to it).
    private func shrink() {
        sqlite3_clear_bindings(statement.handle)
        fields.deallocate()
        (fields, fieldCapacity) = (StoredFieldBuffer.allocate(capacity: StoredFieldBuffer.initialCapacity),
                                   StoredFieldBuffer.initialCapacity)
    }
}
