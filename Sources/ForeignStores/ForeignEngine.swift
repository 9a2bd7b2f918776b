internal import CSQLite
@_spi(Backend) import DataStoreAPI
import Foundation

/// A foreign SQLite database read as a store: the engine of ``CoreDataStore`` and
/// ``PlainSQLiteStore``. Every read is SQL on the user's tables through the mapping; writes are
/// refused with `readOnly` (a foreign store is a source, copied into a store of this toolkit).
final class ForeignEngine: StorageEngine, CommitCounting {
    let database: ForeignDatabase
    let mapping: ForeignMapping
    let kindName: String
    var schema: Schema { mapping.schema }

    init(database: ForeignDatabase, mapping: ForeignMapping, kindName: String) {
        self.database = database
        self.mapping = mapping
        self.kindName = kindName
    }

    func withReader<T>(_ body: (any StorageReader) throws -> T) throws -> T {
        try database.withConnection {
            try body(ForeignReader(engine: self))
        }
    }

    func withWriter<T>(_ body: (any StorageWriter) throws -> T) throws -> T {
        throw StoreError(.readOnly, "\(kindName):\(database.path) is read as a source and never written: copy it "
            + "into a store of this toolkit (migrate-store copy --from \(kindName):\(database.path) --to …)")
    }

    func close() throws { database.close() }

    /// The source never changes under a reader (a snapshot, or a rollback-mode file read under a
    /// shared lock per read).
    func commitCounter() throws -> UInt64 { 0 }

    func foreignEntity(_ entity: EntitySchema) throws -> ForeignEntity {
        guard let foreign = mapping.entities[entity.name] else {
            throw StoreError(.unknownEntity, "\(kindName):\(database.path) has no entity '\(entity.name)'")
        }
        return foreign
    }
}

/// A read on a foreign database (one at a time: the engine holds the connection's lock).
struct ForeignReader: StorageReader {
    let engine: ForeignEngine

    /// The columns a select reads: the key's, then each attribute's.
    private func selectList(_ foreign: ForeignEntity) -> String {
        var list: [String] = []
        switch foreign.key {
        case .column(let column): list.append(column.expression)
        case .pair(let first, let second): list += [first, second]
        }
        list += foreign.columns.map(\.expression)
        return list.joined(separator: ", ")
    }

    private func orderList(_ foreign: ForeignEntity) -> String {
        switch foreign.key {
        case .column(let column):
            column.conversion == .string ? "\(column.expression) COLLATE BINARY" : column.expression
        case .pair(let first, let second): "\(first), \(second)"
        }
    }

    /// `SELECT … FROM … WHERE filter AND condition ORDER BY key LIMIT limit`.
    private func sql(_ foreign: ForeignEntity, condition: String?, limit: Int?) -> String {
        let conditions = [foreign.filter, condition].compactMap { $0 }
        return "SELECT \(selectList(foreign)) FROM \(foreign.from)"
            + (conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND "))
            + " ORDER BY \(orderList(foreign))" + (limit.map { " LIMIT \($0)" } ?? "")
    }

    /// The condition and its values for "key after/equal to `key`".
    private func keyCondition(_ foreign: ForeignEntity, _ key: PrimaryKey, _ op: String) throws -> (String, [Value]) {
        switch foreign.key {
        case .column(let column):
            let value: Value
            switch key.value {
            case .uuid(let u) where column.conversion == .uuid:
                value = .bytes(withUnsafeBytes(of: u.uuid) { Array($0) })
            default: value = key.value
            }
            let collate = column.conversion == .string ? " COLLATE BINARY" : ""
            return ("\(column.expression)\(collate) \(op) ?", [value])
        case .pair(let first, let second):
            let (a, b) = try Self.pair(of: key)
            return ("(\(first), \(second)) \(op) (?, ?)", [.int(a), .int(b)])
        }
    }

    /// The two numbers a pair key encodes.
    static func pair(of key: PrimaryKey) throws -> (Int64, Int64) {
        guard case .uuid(let u) = key.value else {
            throw StoreError(.invalidArgument, "\(key) is not the key of a pair")
        }
        let bytes = withUnsafeBytes(of: u.uuid) { Array($0) }
        func number(_ slice: ArraySlice<UInt8>) -> Int64 {
            Int64(bitPattern: slice.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } ^ (1 << 63))
        }
        return (number(bytes[0..<8]), number(bytes[8..<16]))
    }

    /// The uuid key of the pair `(a, b)`.
    static func pairKey(_ a: Int64, _ b: Int64) -> Value {
        var bytes: [UInt8] = []
        for n in [a, b] {
            let encoded = UInt64(bitPattern: n) ^ (1 << 63)
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: encoded >> UInt64(shift))) }
        }
        return .uuid(UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                                 bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15])))
    }

    /// Runs `sql` and hands each row, as (key, record), to `body` until it returns false.
    private func rows(_ foreign: ForeignEntity, _ entity: EntitySchema, sql: String, values: [Value],
                      _ body: (Value, Record) throws -> Bool) throws {
        let statement = try engine.database.prepare(sql)
        try statement.bind(values)
        let layout = RecordLayout(entity.attributes.map(\.name))
        let slots = foreign.columns.map { layout.slot(of: $0.attribute) }
        let keySlot = layout.slot(of: entity.primaryKey)
        let keyColumns: Int32
        switch foreign.key {
        case .column: keyColumns = 1
        case .pair: keyColumns = 2
        }
        while try statement.step() {
            var values = [Value](repeating: .null, count: layout.names.count)
            let key: Value
            switch foreign.key {
            case .column(let column):
                let raw = statement.rawValue(at: 0)
                key = try ForeignValues.convert(raw, column, row: "the row with key \(raw)")
            case .pair:
                key = Self.pairKey(statement.int64(at: 0), statement.int64(at: 1))
            }
            for (offset, column) in foreign.columns.enumerated() {
                let value = try ForeignValues.convert(statement.rawValue(at: keyColumns + Int32(offset)), column,
                                                      row: "the row with key \(key)")
                if let slot = slots[offset] { values[slot] = value }
            }
            if let keySlot { values[keySlot] = key }
            guard try body(key, Record(layout: layout, values: values)) else { return }
        }
    }

    func get(_ entity: EntitySchema, key: PrimaryKey) throws -> Record? {
        let foreign = try engine.foreignEntity(entity)
        let (condition, values) = try keyCondition(foreign, key, "=")
        var found: Record?
        try rows(foreign, entity, sql: sql(foreign, condition: condition, limit: 1), values: values) { _, record in
            found = record
            return false
        }
        return found
    }

    func fetch(_ request: FetchRequest, in entity: EntitySchema) throws -> [Record] {
        let foreign = try engine.foreignEntity(entity)
        var stages = RequestStages(request)
        try rows(foreign, entity, sql: sql(foreign, condition: nil, limit: nil), values: []) { key, record in
            stages.offer(key: (try? KeyEncoding.encodeKey(key)) ?? [], record: record)
        }
        return stages.finish()
    }

    /// Streams the items (no sort: in key order, as read) without keeping them; with a sort,
    /// through ``fetch(_:in:)``.
    func forEach(_ request: FetchRequest, in entity: EntitySchema, _ body: (Record) throws -> Bool) throws {
        guard request.sort.isEmpty, request.offset == 0, request.limit == nil else {
            for record in try fetch(request, in: entity) where !(try body(record)) { return }
            return
        }
        let foreign = try engine.foreignEntity(entity)
        try rows(foreign, entity, sql: sql(foreign, condition: nil, limit: nil), values: []) { _, record in
            guard request.filter.matches(record) else { return true }
            return try body(record)
        }
    }

    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int {
        let foreign = try engine.foreignEntity(entity)
        if case .all = filter {
            let statement = try engine.database.prepare("SELECT count(*) FROM \(foreign.from)"
                + (foreign.filter.map { " WHERE \($0)" } ?? ""))
            guard try statement.step() else { return 0 }
            return Int(statement.int64(at: 0))
        }
        var count = 0
        try rows(foreign, entity, sql: sql(foreign, condition: nil, limit: nil), values: []) { _, record in
            if filter.matches(record) { count += 1 }
            return true
        }
        return count
    }

    func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int) throws -> [Record] {
        let foreign = try engine.foreignEntity(entity)
        let (condition, values) = try key.map { try keyCondition(foreign, $0, ">") } ?? (nil, [])
        var page: [Record] = []
        page.reserveCapacity(min(limit, 10_000))
        try rows(foreign, entity, sql: sql(foreign, condition: condition, limit: limit), values: values) { _, record in
            page.append(record)
            return true
        }
        return page
    }

    func metadata(forKey key: String) throws -> [UInt8]? { nil }
}
