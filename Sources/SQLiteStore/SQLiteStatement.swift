internal import CSQLite
@_spi(Backend) import DataStoreAPI
import Foundation

/// `SQLITE_TRANSIENT`: SQLite copies the bound bytes before the call returns.
let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
/// `SQLITE_STATIC`: SQLite reads the bound bytes where they are, which must stay valid until the
/// parameter is bound again or the statement is finalized.
let sqliteStatic: sqlite3_destructor_type? = nil

/// A prepared statement; finalized when released.
final class SQLiteStatement {
    let handle: OpaquePointer
    unowned let connection: SQLiteConnection
    let sql: String

    /// Prepares `sql`; `persistent` tells SQLite the statement will be reused (the cached ones).
    init(connection: SQLiteConnection, sql: String, persistent: Bool = true) throws(StoreError) {
        var statement: OpaquePointer?
        let flags = persistent ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0
        let rc = sqlite3_prepare_v3(connection.handle, sql, -1, flags, &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            throw connection.error(rc, "cannot prepare \(sql)")
        }
        self.handle = statement
        self.connection = connection
        self.sql = sql
    }

    /// Whether the statement was stepped and not reset since.
    var isBusy: Bool { sqlite3_stmt_busy(handle) != 0 }

    deinit {
        sqlite3_finalize(handle)
        parameterBytes.deallocate()
    }

    /// The bytes of the text and blob parameters bound last, which SQLite reads where they are
    /// (`SQLITE_STATIC`) instead of copying each into memory of its own and freeing it at the
    /// next bind (with `SQLITE_TRANSIENT`, an allocation, a copy and a free per text or blob).
    /// SQLite's condition for `SQLITE_STATIC` is that the bytes stay valid until the parameter
    /// is bound again or the statement is finalized: this buffer is replaced only by a larger
    /// one, and the old one is freed after every parameter was bound again (or cleared), and the
    /// last one when the statement is finalized. Values longer than ``maxParameterBytes`` are
    /// copied by SQLite as before, so that a statement never keeps a large value's memory.
    private var parameterBytes = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    static let maxParameterBytes = 1024
    private static let maxParameterBuffer = 16 * 1024

    /// Binds values to parameters 1...n, after resetting the statement; then `sum`, when given,
    /// to parameter n + 1 (a row's checksum, ``SQLiteRowSum``).
    func bind(_ values: some Collection<Value>, sum: Int64? = nil) throws(StoreError) {
        sqlite3_reset(handle)
        // Every parameter bound again replaces its old value: clearing them first matters only
        // when some are left unbound.
        let count = values.count + (sum == nil ? 0 : 1)
        if Int(sqlite3_bind_parameter_count(handle)) != count { sqlite3_clear_bindings(handle) }
        let replaced = reserveParameterBytes(values.reduce(0) { $0 + Self.inPlaceCount($1) })
        defer { replaced.deallocate() }
        var parameters = SQLiteParameters(handle, parameterBytes)
        do {
            for (i, value) in values.enumerated() { try check(parameters.bind(value, at: Int32(i + 1)), Int32(i + 1)) }
            if let sum { try check(parameters.bindInt(sum, at: Int32(count)), Int32(count)) }
        } catch {
            // Parameters not bound again may still point into the replaced buffer.
            sqlite3_clear_bindings(handle)
            throw error
        }
    }

    @inline(__always)
    func check(_ rc: Int32, _ index: Int32) throws(StoreError) {
        guard rc == SQLITE_OK else { throw bindError(rc, index) }
    }

    /// The error of a parameter SQLite did not take (`rc`, its result code; `cause`, SQLite's
    /// code and message when it refused, if they were kept: read now otherwise).
    @inline(never)
    func bindError(_ rc: Int32, _ index: Int32, cause: StoreError.Cause? = nil) -> StoreError {
        connection.error(rc, "cannot bind parameter \(index) of \(sql)", cause: cause)
    }

    /// Binds the one parameter of a statement that has one (a point get's key), without an
    /// array around it.
    func bind(only value: Value) throws(StoreError) {
        sqlite3_reset(handle)
        if sqlite3_bind_parameter_count(handle) != 1 { sqlite3_clear_bindings(handle) }
        let replaced = reserveParameterBytes(Self.inPlaceCount(value))
        defer { replaced.deallocate() }
        var parameters = SQLiteParameters(handle, parameterBytes)
        do {
            try check(parameters.bind(value, at: 1), 1)
        } catch {
            sqlite3_clear_bindings(handle)
            throw error
        }
    }

    /// How many of the parameter buffer's bytes a value takes: its bytes when it is a text or
    /// blob of at most ``maxParameterBytes``, else none.
    private static func inPlaceCount(_ value: Value) -> Int {
        switch value {
        case .string(let s): let n = s.utf8.count; return n <= maxParameterBytes ? n : 0
        case .bytes(let b): return b.count <= maxParameterBytes ? b.count : 0
        case .uuid: return 16
        default: return 0
        }
    }

    /// Makes room for `count` bytes of parameters (as many as ``maxParameterBuffer`` allows;
    /// the rest are copied by SQLite) and starts filling the buffer from its start.
    /// - Returns: the buffer replaced, which the caller frees once every parameter is bound
    ///   again (an empty one when none was).
    private func reserveParameterBytes(_ count: Int) -> UnsafeMutableRawBufferPointer {
        let wanted = min(count, Self.maxParameterBuffer)
        guard wanted > parameterBytes.count else { return UnsafeMutableRawBufferPointer(start: nil, count: 0) }
        let replaced = parameterBytes
        parameterBytes = .allocate(byteCount: max(wanted, 2 * parameterBytes.count, 256), alignment: 8)
        return replaced
    }

    /// Binds raw bytes as a TEXT value (used for the upper bound of a prefix range, which need
    /// not be valid UTF-8; SQLite compares TEXT with memcmp under BINARY).
    func bindText(bytes: [UInt8], at index: Int32) throws(StoreError) {
        let rc = bytes.withUnsafeBytes { raw in
            sqlite3_bind_text(handle, index, raw.baseAddress?.assumingMemoryBound(to: CChar.self),
                              Int32(raw.count), sqliteTransient)
        }
        guard rc == SQLITE_OK else { throw connection.error(rc, "cannot bind parameter \(index) of \(sql)") }
    }

    static let typeNames = [SQLITE_INTEGER: "INTEGER", SQLITE_FLOAT: "REAL", SQLITE_TEXT: "TEXT",
                            SQLITE_BLOB: "BLOB"].reduce(into: [Int: String]()) { $0[Int($1.key)] = $1.value }

    /// Steps once: `true` when a row is available, `false` when done.
    func step() throws(StoreError) -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw connection.error(rc, "cannot run \(sql)")
        }
    }

    /// Runs to completion, ignoring rows.
    func run(_ values: [Value] = []) throws(StoreError) {
        try bind(values)
        while try step() {}
    }

    /// Runs to completion a statement that has no parameters (`BEGIN`, `COMMIT`), as ``run(_:)``
    /// with no values does without binding an empty array (about 70 instructions a statement).
    func runWithoutParameters() throws(StoreError) {
        sqlite3_reset(handle)
        while try step() {}
    }

    /// Runs to completion with `number` and `blob` as its two parameters, as ``run(_:)`` with
    /// ``Value/int(_:)`` and ``Value/bytes(_:)`` does, without the array.
    func run(_ number: Int64, _ blob: UnsafeRawBufferPointer) throws(StoreError) {
        sqlite3_reset(handle)
        if sqlite3_bind_parameter_count(handle) != 2 { sqlite3_clear_bindings(handle) }
        let replaced = reserveParameterBytes(blob.count <= Self.maxParameterBytes ? blob.count : 0)
        defer { replaced.deallocate() }
        var parameters = SQLiteParameters(handle, parameterBytes)
        do {
            try check(parameters.bindInt(number, at: 1), 1)
            try check(parameters.bindBlob(blob, at: 2), 2)
        } catch {
            sqlite3_clear_bindings(handle)
            throw error
        }
        while try step() {}
    }

    func int64(at column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    func isNull(at column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    func bytes(at column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let pointer = sqlite3_column_blob(handle, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Reads a column as a value of `type`, exactly: a value the schema's type cannot hold is
    /// never coerced.
    /// - Throws: what is wrong when the stored SQLite type is not the one the schema promises, a
    ///   bool is neither 0 nor 1, a text is not valid UTF-8, a uuid is not 16 bytes; the caller
    ///   names the item (no context is built, or captured, for the values that read fine).
    /// A null in a column that is not `optional` fails too.
    func value(at column: Int32, as type: ValueType, optional: Bool,
               isPrimaryKey: Bool = false) throws(ColumnReadFailure) -> Value {
        let kind = SQLiteColumnKind(type: type, optional: optional, isPrimaryKey: isPrimaryKey)
        if let value = checkedValue(at: column, kind) { return value }
        throw failure(at: column, kind)
    }

    /// Appends the row's columns to `sink`, column `i` read as `kinds[i]`: `false` at the first
    /// column that does not read (``value(at:as:optional:)`` says why), or when the row's
    /// checksum does not match (``rowSumMatches(_:)``).
    func readRow(_ plan: SQLiteRowPlan, into sink: inout ValueSink) -> Bool {
        guard rowSumMatches(plan) else { return false }
        return plan.kinds.withUnsafeBufferPointer { kinds in
            for i in kinds.indices {
                guard let value = checkedValue(at: Int32(i), kinds[i]) else { return false }
                sink.append(value)
            }
            return true
        }
    }

    /// Whether the row's checksum matches its columns (true for a row of a table without
    /// checksums, and for one whose columns do not read, which their checks then name).
    func rowSumMatches(_ plan: SQLiteRowPlan) -> Bool {
        guard plan.sealed else { return true }
        return plan.kinds.withUnsafeBufferPointer { kinds in
            withUnsafeTemporaryAllocation(of: ColumnField.self, capacity: max(kinds.count, 1)) { fields in
                for i in kinds.indices {
                    guard let field = Self.checkedField(sqlite3_column_value(handle, Int32(i)), kinds[i]) else {
                        return true
                    }
                    fields.initializeElement(at: i, to: field)
                }
                return sumMatches(SQLiteRowSum.sum(count: kinds.count) { fields[$0] }, column: Int32(kinds.count))
            }
        }
    }

    /// Whether the row's column `column` holds `sum`, or holds no sum (null: a row another
    /// program wrote, read unchecked, ``SQLiteRowSum``).
    @inline(__always)
    func sumMatches(_ sum: Int64, column: Int32) -> Bool {
        Self.sumMatches(handle, sum, column: column)
    }

    /// ``sumMatches(_:column:)`` of a statement's current row.
    @inline(__always)
    static func sumMatches(_ handle: OpaquePointer, _ sum: Int64, column: Int32) -> Bool {
        guard let cell = sqlite3_column_value(handle, column) else { return true }
        switch sqlite3_value_type(cell) {
        case SQLITE_INTEGER: return sqlite3_value_int64(cell) == sum
        case SQLITE_NULL: return true
        default: return false
        }
    }

    /// The row as a compact record of the arena (its columns written as fields, ``FieldWriter``),
    /// column `i` read as `kinds[i]` with ``checkedValue(_:_:)``'s checks: `nil` at the first
    /// column that does not read. Nothing is built per value: a text's or blob's bytes are copied
    /// once, into the record.
    func readRow(_ plan: SQLiteRowPlan, into arena: inout CompactArena) -> Record? {
        plan.kinds.withUnsafeBufferPointer { kinds in
            withUnsafeTemporaryAllocation(of: ColumnField.self, capacity: kinds.count) { fields -> Record? in
                for i in kinds.indices {
                    guard let field = Self.checkedField(sqlite3_column_value(handle, Int32(i)), kinds[i]) else { return nil }
                    fields.initializeElement(at: i, to: field)
                }
                return arena.record(layout: plan.layout, fields: UnsafeBufferPointer(fields), summed: plan.sealed) { sum in
                    sumMatches(sum, column: Int32(kinds.count))
                }
            }
        }
    }

    /// A column as a field of a compact record: its tag, and its number or where its bytes are
    /// (valid until the statement steps).
    typealias ColumnField = StoredField

    /// The column as a field when it holds what `kind` asks for, `nil` when it does not: the one
    /// check of a column (its type, a null's place, a boolean's 0 or 1, the limits, UTF-8, a uuid's
    /// 16 bytes) behind ``checkedValue(_:_:)``; nothing built. ``holdsValue(_:_:)`` makes the
    /// same checks without a field, for a row check that reads every column of every row.
    @inline(__always)
    static func checkedField(_ cell: OpaquePointer?, _ kind: SQLiteColumnKind) -> ColumnField? {
        guard let cell else { return kind.optional ? ColumnField(tag: .null) : nil }
        let stored = sqlite3_value_type(cell)
        guard stored == kind.storage else { return stored == SQLITE_NULL && kind.optional ? ColumnField(tag: .null) : nil }
        switch kind.type {
        case .bool:
            let n = sqlite3_value_int64(cell)
            return n == 0 || n == 1 ? ColumnField(tag: n == 1 ? .trueValue : .falseValue) : nil
        case .int: return ColumnField(tag: .int, bits: UInt64(bitPattern: sqlite3_value_int64(cell)))
        case .date: return ColumnField(tag: .date, bits: UInt64(bitPattern: sqlite3_value_int64(cell)))
        case .double: return ColumnField(tag: .double, bits: sqlite3_value_double(cell).bitPattern)
        case .string:
            guard let text = sqlite3_value_text(cell) else { return nil }
            let count = Int(sqlite3_value_bytes(cell))
            guard count > 0 else { return ColumnField(tag: .string) }
            guard count <= kind.maxBytes else { return nil }
            let bytes = UnsafeRawBufferPointer(start: text, count: count)
            return UTF8Text.isValid(bytes) ? ColumnField(tag: .string, bytes: bytes) : nil
        case .bytes, .uuid:
            let pointer = sqlite3_value_blob(cell)
            let count = Int(sqlite3_value_bytes(cell))
            if kind.type == .uuid { guard count == 16, pointer != nil else { return nil } } else {
                guard count <= kind.maxBytes else { return nil }
                guard count > 0 else { return ColumnField(tag: .bytes) }
                guard pointer != nil else { return nil }
            }
            return ColumnField(tag: kind.type == .uuid ? .uuid : .bytes, bytes: UnsafeRawBufferPointer(start: pointer, count: count))
        }
    }

    /// The column's value when it holds what `kind` asks for, `nil` when it does not.
    ///
    /// The column is read through its `sqlite3_value` (`sqlite3_column_value`), one call into
    /// SQLite for the column instead of one for its type and one or two for its contents: each
    /// `sqlite3_column_*` call looks the column up again and checks the connection for a failed
    /// allocation. SQLite documents the value as unprotected, that is not guarded by the
    /// connection's mutex; the store opens its connections without one (`SQLITE_OPEN_NOMUTEX`)
    /// and uses each from one thread at a time, and the value is read before the statement
    /// steps again.
    @inline(__always)
    private func checkedValue(at column: Int32, _ kind: SQLiteColumnKind) -> Value? {
        Self.checkedValue(sqlite3_column_value(handle, column), kind)
    }

    /// The value when it holds what `kind` asks for, `nil` when it does not: the check every read
    /// makes, also for the converted argument of the SQL function a schema step's copy calls
    /// (``SQLiteTableCopy``).
    @inline(__always)
    static func checkedValue(_ cell: OpaquePointer?, _ kind: SQLiteColumnKind) -> Value? {
        checkedField(cell, kind)?.value
    }

    /// Whether ``checkedValue(_:_:)`` reads the value, decided without building it (no string or
    /// array made and freed): what a schema step's copy asks of every column of every row. The
    /// same checks in the same order; `aSchemaStepCopiedBySQLiteFindsWhatAReadFindsAndChangesNothing`
    /// plants each kind of value a read refuses and expects the copy to refuse it too.
    static func holdsValue(_ cell: OpaquePointer?, _ kind: SQLiteColumnKind) -> Bool {
        guard let cell else { return kind.optional }
        let stored = sqlite3_value_type(cell)
        guard stored == kind.storage else { return stored == SQLITE_NULL && kind.optional }
        switch kind.type {
        case .bool:
            let n = sqlite3_value_int64(cell)
            return n == 0 || n == 1
        case .int, .date, .double: return true
        case .string:
            guard let text = sqlite3_value_text(cell) else { return false }
            let count = Int(sqlite3_value_bytes(cell))
            return count == 0 || count <= kind.maxBytes && UTF8Text.isValid(UnsafeRawBufferPointer(start: text, count: count))
        case .bytes, .uuid:
            let pointer = sqlite3_value_blob(cell)
            let count = Int(sqlite3_value_bytes(cell))
            return kind.type == .uuid ? count == 16 && pointer != nil : count == 0 || pointer != nil && count <= kind.maxBytes
        }
    }

    /// Why the column does not read as `kind` (it did not in ``checkedValue(at:_:)``): the
    /// checks again, each with its message. A column that reads fine this time failed for
    /// want of memory, the one failure that does not repeat.
    private func failure(at column: Int32, _ kind: SQLiteColumnKind) -> ColumnReadFailure {
        let cell = sqlite3_column_value(handle, column)
        let stored = cell.map(sqlite3_value_type) ?? SQLITE_NULL
        guard let cell, stored != SQLITE_NULL else {
            return ColumnReadFailure(detail: "is null, but the attribute is required")
        }
        guard stored == kind.storage else {
            return ColumnReadFailure(detail: "holds a SQLite \(Self.typeNames[Int(stored)] ?? "type \(stored)") value, not \(kind.type)")
        }
        if kind.type == .string || kind.type == .bytes, case let count = Int(sqlite3_value_bytes(cell)),
           count > kind.maxBytes {
            return ColumnReadFailure(detail: "holds \(count) bytes; at most \(kind.maxBytes) are allowed"
                + (kind.maxBytes == Limits.maxStringKeyBytes ? " in a primary key" : ""))
        }
        switch kind.type {
        case .bool:
            let n = sqlite3_value_int64(cell)
            if n != 0 && n != 1 { return ColumnReadFailure(detail: "holds \(n), which is not a bool (0 or 1)") }
        case .string:
            if let text = sqlite3_value_text(cell), case let count = Int(sqlite3_value_bytes(cell)), count > 0,
               UTF8Text.string(UnsafeRawBufferPointer(start: text, count: count)) == nil {
                return ColumnReadFailure(detail: "holds text that is not valid UTF-8")
            }
        case .uuid:
            if let bytes = Self.blob(cell), UUID(bytes: bytes) == nil {
                return ColumnReadFailure(detail: "is not a 16-byte uuid")
            }
        case .int, .date, .double, .bytes: break
        }
        return .outOfMemory
    }

    /// A blob value's bytes (blob first, then its length), `nil` when SQLite could not
    /// allocate them (a blob that is not empty without a pointer). An empty blob has none.
    @inline(__always)
    private static func blob(_ cell: OpaquePointer) -> [UInt8]? {
        let pointer = sqlite3_value_blob(cell)
        let count = Int(sqlite3_value_bytes(cell))
        guard count > 0 else { return [] }
        guard let pointer else { return nil }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}

/// What a column of a row must hold: its attribute's type, and whether it may be null.
struct SQLiteColumnKind: Sendable {
    let type: ValueType
    let optional: Bool
    /// The SQLite storage class of the type's values.
    let storage: Int32
    /// The most bytes a text or blob may hold (``Limits``): a row written outside the package
    /// past a limit is damage, which the store refuses as it would refuse the write.
    let maxBytes: Int

    init(type: ValueType, optional: Bool, isPrimaryKey: Bool = false, isSealed: Bool = false) {
        self.type = type
        self.optional = optional
        maxBytes = isPrimaryKey && type == .string ? Limits.maxStringKeyBytes
            : isSealed ? Limits.maxSealedBytes : Limits.maxValueBytes
        switch type {
        case .bool, .int, .date: storage = SQLITE_INTEGER
        case .double: storage = SQLITE_FLOAT
        case .string: storage = SQLITE_TEXT
        case .bytes, .uuid: storage = SQLITE_BLOB
        }
    }
}

/// How to read an entity's rows: what each column must hold, in attribute order, and the
/// layout of the records they become, taken out of the entity once per request.
struct SQLiteRowPlan: Sendable {
    let kinds: [SQLiteColumnKind]
    let layout: RecordLayout
    /// Whether the row's checksum follows its columns (``SQLiteRowSum``), to be checked.
    let sealed: Bool

    init(_ entity: EntitySchema, sealed: Bool) {
        self.sealed = sealed
        kinds = entity.attributes.map {
            SQLiteColumnKind(type: $0.type, optional: $0.isOptional, isPrimaryKey: $0.name == entity.primaryKey,
                             isSealed: $0.name == Limits.sealedAttribute)
        }
        layout = entity.layout
    }
}

/// Why a column could not be read as its attribute's type (``SQLiteStatement/value(at:as:optional:)``).
struct ColumnReadFailure: Error {
    let detail: String
    /// SQLite could not allocate memory to hand the value over: nothing is wrong with the store.
    var outOfMemory = false

    static let outOfMemory = ColumnReadFailure(detail: "could not be read: SQLite is out of memory", outOfMemory: true)
}

/// One row's parameters bound into a statement's buffer (``SQLiteStatement``'s
/// `parameterBytes`): short texts and blobs are copied there and bound with `SQLITE_STATIC`,
/// longer ones bound with `SQLITE_TRANSIENT` (SQLite copies them). A value, not a reference to
/// the statement, so that binding a row retains nothing; each method returns SQLite's result
/// code, which the statement turns into its error (``SQLiteStatement/check(_:_:)``).
struct SQLiteParameters {
    let handle: OpaquePointer
    private let buffer: UnsafeMutableRawBufferPointer
    private var used = 0

    init(_ handle: OpaquePointer, _ buffer: UnsafeMutableRawBufferPointer) {
        (self.handle, self.buffer) = (handle, buffer)
    }

    mutating func bind(_ value: Value, at index: Int32) -> Int32 {
        switch value {
        case .null: return sqlite3_bind_null(handle, index)
        case .bool(let b): return sqlite3_bind_int64(handle, index, b ? 1 : 0)
        case .int(let n): return sqlite3_bind_int64(handle, index, n)
        case .double(let d): return sqlite3_bind_double(handle, index, d)
        case .date(let t): return sqlite3_bind_int64(handle, index, t.microsecondsSinceEpoch)
        case .string(var s): return s.withUTF8 { bindText(UnsafeRawBufferPointer($0), at: index) }
        case .bytes(let b): return b.withUnsafeBytes { bindBlob($0, at: index) }
        case .uuid(let u): return withUnsafeBytes(of: u.uuid) { bindBlob($0, at: index) }
        }
    }

    @inline(__always)
    func bindInt(_ value: Int64, at index: Int32) -> Int32 { sqlite3_bind_int64(handle, index, value) }

    mutating func bindText(_ utf8: UnsafeRawBufferPointer, at index: Int32) -> Int32 {
        if utf8.isEmpty { return sqlite3_bind_text(handle, index, "", 0, sqliteStatic) }
        if let kept = copy(utf8) {
            return sqlite3_bind_text(handle, index, kept.assumingMemoryBound(to: CChar.self), Int32(utf8.count), sqliteStatic)
        }
        return sqlite3_bind_text(handle, index, utf8.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(utf8.count),
                                 sqliteTransient)
    }

    mutating func bindBlob(_ bytes: UnsafeRawBufferPointer, at index: Int32) -> Int32 {
        // An empty blob bound from a pointer would be NULL; zeroblob(0) is an empty, non-null blob.
        if bytes.isEmpty { return sqlite3_bind_zeroblob(handle, index, 0) }
        if let kept = copy(bytes) { return sqlite3_bind_blob(handle, index, kept, Int32(bytes.count), sqliteStatic) }
        return sqlite3_bind_blob(handle, index, bytes.baseAddress, Int32(bytes.count), sqliteTransient)
    }

    /// Copies `bytes` into the buffer, or returns `nil` when they do not fit there.
    private mutating func copy(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawPointer? {
        guard bytes.count <= SQLiteStatement.maxParameterBytes else { return nil }
        guard bytes.count <= buffer.count - used, let base = buffer.baseAddress, let source = bytes.baseAddress else {
            return nil
        }
        let target = base + used
        target.copyMemory(from: source, byteCount: bytes.count)
        used += bytes.count
        return UnsafeRawPointer(target)
    }
}
