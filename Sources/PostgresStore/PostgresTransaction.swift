#if Postgres
@_spi(Backend) import DataStoreAPI
import Foundation
import PostgresNIO

/// A read or write transaction on one session.
final class PostgresTransaction: StorageWriter, ChangeLogWriting, BulkInserting {
    let session: PostgresSession
    let engine: PostgresEngine?
    let s: String

    /// The change feed's stored state (`_ds_meta`'s `datastore.feed`) and its entries' bounds as
    /// a write transaction's first statement read them ahead (the feed asks for both before each
    /// recorded commit); kept up to date by this transaction's own writes, and nobody else's can
    /// come, since it holds the commit counter's row lock. `nil`: not known, ask the server.
    var feedState: [UInt8]??
    var feedBounds: (first: UInt64, last: UInt64)??
    /// Feed writes not yet sent: the entry appended and the removal of old entries that
    /// follows it go as one statement, queued before COMMIT without a wait of their own
    /// (``sendPending()``), or sent before any read of the feed (``flush()``).
    private var pendingEntry: (sequence: UInt64, entry: [UInt8])?
    private var pendingRemoval: UInt64?

    static let feedStateKey = "datastore.feed"

    init(session: PostgresSession, engine: PostgresEngine?, quotedSchema: String) {
        self.session = session
        self.engine = engine
        s = quotedSchema
    }

    /// Sends what this transaction holds back and waits for it.
    func flush() throws {
        if let sent = sendPending() { try session.wait(sent, sql: "the change feed's entry") }
    }

    /// Queues what this transaction holds back without waiting: before COMMIT, whose answer
    /// comes after this statement's (a failed statement turns the COMMIT into a rollback, so the
    /// caller checks this outcome after the COMMIT's).
    func sendPending() -> EventLoopFuture<PostgresQueryResult>? {
        var binds = PostgresBindings()
        let sql: String
        switch (pendingEntry, pendingRemoval) {
        case (nil, nil):
            return nil
        case let (nil, before?):
            binds.append(Int64(before))
            sql = "DELETE FROM \(s)._ds_feed WHERE seq < $1"
        case let ((sequence, entry)?, before):
            binds.append(Int64(sequence))
            binds.append(ByteBuffer(bytes: entry))
            if let before {
                binds.append(Int64(before))
                sql = "WITH gone AS (DELETE FROM \(s)._ds_feed WHERE seq < $3) INSERT INTO \(s)._ds_feed (seq, entry) "
                    + "VALUES ($1, $2)"
            } else {
                sql = "INSERT INTO \(s)._ds_feed (seq, entry) VALUES ($1, $2)"
            }
        }
        pendingEntry = nil
        pendingRemoval = nil
        return session.send(sql, binds)
    }

    private func table(_ entity: EntitySchema) -> String { PostgresSQL.table(entity, schema: s) }
    private func columns(_ entity: EntitySchema) -> String {
        entity.attributes.map { PostgresSQL.quote($0.name) }.joined(separator: ", ")
    }
    private func pk(_ entity: EntitySchema) -> String { PostgresSQL.quote(entity.primaryKey) }

    /// The rows as records, their values in one arena's shared storage.
    private func records(_ rows: [PostgresRow], _ entity: EntitySchema) throws -> [Record] {
        var arena = RecordArena()
        var records: [Record] = []
        records.reserveCapacity(rows.count)
        let (attributes, layout) = (entity.attributes, entity.layout)
        for row in rows {
            let cells = row.makeRandomAccess()
            var failure: (any Error)?
            let record = arena.record(layout: layout) { sink in
                do {
                    for (i, attribute) in attributes.enumerated() {
                        let value = try PostgresSQL.value(cells[i], attribute, entity: entity)
                        if value.isNull && !attribute.isOptional {
                            throw StoreError(.corrupt, "\(session.location): \(entity.name).\(attribute.name) is "
                                + "null, but the attribute is required")
                        }
                        sink.append(value)
                    }
                    return true
                } catch {
                    failure = error
                    return false
                }
            }
            guard let record else {
                throw failure ?? StoreError(.corrupt, "\(session.location): a row of '\(entity.name)' could not be read")
            }
            records.append(record)
        }
        return records
    }

    private func binds(_ values: [Value]) -> PostgresBindings {
        var binds = PostgresBindings()
        for value in values { PostgresSQL.bind(value, into: &binds) }
        return binds
    }

    /// One query for many keys (each get is a round trip to the server).
    func get(_ entity: EntitySchema, keyValues: [Value]) throws -> [Record] {
        guard keyValues.count > 1 else { return try keyValues.compactMap { try get(entity, keyValue: $0) } }
        return try fetch(FetchRequest(entity.name, filter: .among(entity.primaryKey, keyValues)), in: entity)
    }

    func get(_ entity: EntitySchema, key: PrimaryKey) throws -> Record? {
        try records(session.query("SELECT \(columns(entity)) FROM \(table(entity)) WHERE \(pk(entity)) = $1",
                                  binds([key.value])), entity).first
    }

    func contains(_ entity: EntitySchema, key: PrimaryKey) throws -> Bool {
        try !session.query("SELECT 1 FROM \(table(entity)) WHERE \(pk(entity)) = $1", binds([key.value])).isEmpty
    }

    /// Every item in key order, a page at a time, until `body` says stop.
    private func forEach(_ entity: EntitySchema, _ body: ([UInt8], Record) throws -> Bool) throws {
        var after: Value?
        while true {
            let page = try scan(entity, after: after.map { try PrimaryKey($0) }, limit: 1_000)
            for record in page {
                if try !body(try PrimaryKey(record[entity.primaryKey]).bytes, record) { return }
            }
            guard page.count == 1_000, let last = page.last else { return }
            after = last[entity.primaryKey]
        }
    }

    func fetch(_ request: FetchRequest, in entity: EntitySchema) throws -> [Record] {
        if let select = PostgresRequestSQL.select(request, entity, columns: columns(entity), table: table(entity),
                                                   schema: s) {
            return try records(session.query(select.sql, select.binds), entity)
        }
        var stages = RequestStages(request)
        try forEach(entity) { key, record in stages.offer(key: key, record: record) }
        return stages.finish()
    }

    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int {
        if case .all = filter {
            guard let row = try session.query("SELECT count(*) FROM \(table(entity))").first else { return 0 }
            return Int(try row.makeRandomAccess()[0].decode(Int64.self))
        }
        if let query = PostgresRequestSQL.count(filter, entity, table: table(entity), schema: s),
            let row = try session.query(query.sql, query.binds).first
        {
            return Int(try row.makeRandomAccess()[0].decode(Int64.self))
        }
        var count = 0
        try forEach(entity) { _, record in
            if filter.matches(record) { count += 1 }
            return true
        }
        return count
    }

    func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int) throws -> [Record] {
        let select = "SELECT \(columns(entity)) FROM \(table(entity))"
        if let key {
            return try records(session.query(select + " WHERE \(pk(entity)) > $1 ORDER BY \(pk(entity)) LIMIT $2",
                                             binds([key.value, .int(Int64(limit))])), entity)
        }
        return try records(session.query(select + " ORDER BY \(pk(entity)) LIMIT $1", binds([.int(Int64(limit))])),
                           entity)
    }

    func metadata(forKey key: String) throws -> [UInt8]? {
        if key == Self.feedStateKey, let known = feedState { return known }
        var binds = PostgresBindings()
        binds.append(PostgresSQL.escape(key))
        guard let row = try session.query("SELECT value FROM \(s)._ds_meta WHERE key = $1", binds).first else {
            return nil
        }
        return Array(try row.makeRandomAccess()[0].decode(ByteBuffer.self).readableBytesView)
    }

    // MARK: Writing

    /// The unique-index rule, checked before a write so that a violation leaves the transaction
    /// usable (a failed statement would abort it).
    private func checkUnique(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        try UniqueIndexRule.check(record, key: key, in: entity) { index, values in
            let attributes = index.attributes.compactMap { name in entity.attributes.first { $0.name == name } }
            let conditions = attributes.enumerated().map { i, attribute in
                let type = PostgresSQL.castType(attribute.type)
                return PostgresSQL.indexTerm(attribute, schema: s) + " = "
                    + PostgresSQL.indexTerm(attribute, schema: s, operand: "$\(i + 1)::\(type)")
            }
            return try records(session.query("SELECT \(columns(entity)) FROM \(table(entity)) WHERE "
                                              + conditions.joined(separator: " AND "), binds(values)), entity)
        }
    }

    private func placeholders(_ entity: EntitySchema) -> String {
        (1...entity.attributes.count).map { "$\($0)" }.joined(separator: ", ")
    }

    func insert(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        if entity.indexes.contains(where: \.isUnique) {
            if try contains(entity, key: key) { throw StoreError.keyExists(entity, record) }
            try checkUnique(record, key: key, in: entity)
        }
        let inserted = try session.query("INSERT INTO \(table(entity)) (\(columns(entity))) VALUES "
            + "(\(placeholders(entity))) ON CONFLICT (\(pk(entity))) DO NOTHING RETURNING 1",
            binds(entity.attributes.map { record[$0.name] }))
        if inserted.isEmpty { throw StoreError.keyExists(entity, record) }
    }

    /// Inserts by COPY (or one multi-row statement) when no item of the batch clashes (keys taken or given
    /// twice, values a unique index holds or that two items of the batch share); otherwise
    /// stores nothing and returns `false`.
    func insertAllOrNone(_ records: [(record: Record, key: PrimaryKey)], in entity: EntitySchema) throws -> Bool {
        guard !records.isEmpty else { return true }
        guard try bulkIsClean(records, entity) else { return false }
        // Large batches go by COPY, small ones as one multi-row INSERT.
        if records.count >= 64 {
            try session.copy(records, into: entity)
            return true
        }
        var binds = PostgresBindings()
        var rows: [String] = []
        var n = 0
        for (record, _) in records {
            var marks: [String] = []
            for attribute in entity.attributes {
                PostgresSQL.bind(record[attribute.name], into: &binds)
                n += 1
                marks.append("$\(n)")
            }
            rows.append("(" + marks.joined(separator: ", ") + ")")
        }
        try session.query("INSERT INTO \(table(entity)) (\(columns(entity))) VALUES " + rows.joined(separator: ", "), binds)
        return true
    }

    /// Whether a batch can go in one statement: no key taken or repeated, and no unique value
    /// held already or shared within the batch (single-attribute unique indexes are checked in
    /// one query each; an entity with a unique index over several attributes goes one by one).
    private func bulkIsClean(_ records: [(record: Record, key: PrimaryKey)], _ entity: EntitySchema) throws -> Bool {
        guard Set(records.map(\.key)).count == records.count else { return false }
        for chunk in stride(from: 0, to: records.count, by: 10_000).map({ records[$0..<min(records.count, $0 + 10_000)] }) {
            var binds = PostgresBindings()
            let marks = chunk.enumerated().map { i, item -> String in
                PostgresSQL.bind(item.key.value, into: &binds)
                return "$\(i + 1)"
            }
            if try !session.query("SELECT 1 FROM \(table(entity)) WHERE \(pk(entity)) IN (\(marks.joined(separator: ", "))) "
                + "LIMIT 1", binds).isEmpty { return false }
        }
        for index in entity.indexes where index.isUnique {
            guard index.attributes.count == 1, let attribute = entity.attribute(named: index.attributes[0]) else {
                return false
            }
            var seen = Set<[Value]>()
            var values: [Value] = []
            for (record, _) in records {
                guard let tuple = UniqueIndexRule.tuple(record, index) else { continue }
                guard seen.insert(tuple).inserted else { return false }
                values.append(tuple[0])
            }
            let type = PostgresSQL.castType(attribute.type)
            var start = 0
            while start < values.count {
                let chunk = values[start..<min(values.count, start + 10_000)]
                var binds = PostgresBindings()
                let terms = chunk.enumerated().map { i, value -> String in
                    PostgresSQL.bind(value, into: &binds)
                    return PostgresSQL.indexTerm(attribute, schema: s, operand: "$\(i + 1)::\(type)")
                }
                if try !session.query("SELECT 1 FROM \(table(entity)) WHERE \(PostgresSQL.indexTerm(attribute, schema: s)) "
                    + "IN (\(terms.joined(separator: ", "))) LIMIT 1", binds).isEmpty { return false }
                start += chunk.count
            }
        }
        return true
    }

    func put(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        if entity.indexes.contains(where: \.isUnique) { try checkUnique(record, key: key, in: entity) }
        let updates = entity.attributes.filter { $0.name != entity.primaryKey }
            .map { "\(PostgresSQL.quote($0.name)) = EXCLUDED.\(PostgresSQL.quote($0.name))" }
        try session.query("INSERT INTO \(table(entity)) (\(columns(entity))) VALUES (\(placeholders(entity))) "
            + "ON CONFLICT (\(pk(entity))) DO " + (updates.isEmpty ? "NOTHING" : "UPDATE SET " + updates.joined(separator: ", ")),
            binds(entity.attributes.map { record[$0.name] }))
    }

    func delete(key: PrimaryKey, in entity: EntitySchema) throws -> Bool {
        try !session.query("DELETE FROM \(table(entity)) WHERE \(pk(entity)) = $1 RETURNING 1", binds([key.value]))
            .isEmpty
    }

    func deleteAll(in entity: EntitySchema) throws -> Int {
        guard let row = try session.query("WITH gone AS (DELETE FROM \(table(entity)) RETURNING 1) "
            + "SELECT count(*) FROM gone").first else { return 0 }
        return Int(try row.makeRandomAccess()[0].decode(Int64.self))
    }

    func setMetadata(_ value: [UInt8]?, forKey key: String) throws {
        if key == Self.feedStateKey { feedState = nil }
        // Keys are text: NUL and the escape's own byte are escaped as in values.
        var binds = PostgresBindings()
        binds.append(PostgresSQL.escape(key))
        guard let value else {
            try session.query("DELETE FROM \(s)._ds_meta WHERE key = $1", binds)
            return
        }
        binds.append(ByteBuffer(bytes: value))
        try session.query("INSERT INTO \(s)._ds_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE "
            + "SET value = EXCLUDED.value", binds)
    }

    // MARK: The change feed's entries

    func changeLogBounds() throws -> (first: UInt64, last: UInt64)? {
        if let known = feedBounds { return known }
        try flush()
        guard let row = try session.query("SELECT min(seq), max(seq) FROM \(s)._ds_feed").first else { return nil }
        let bounds = try Self.bounds(row.makeRandomAccess(), at: 0)
        feedBounds = .some(bounds)
        return bounds
    }

    /// Bounds from two cells (min, max) starting at `index`.
    static func bounds(_ cells: PostgresRandomAccessRow, at index: Int) throws -> (first: UInt64, last: UInt64)? {
        guard cells[index].bytes != nil else { return nil }
        return (UInt64(try cells[index].decode(Int64.self)), UInt64(try cells[index + 1].decode(Int64.self)))
    }

    func changeLogEntry(_ sequence: UInt64) throws -> [UInt8]? {
        try flush()
        var binds = PostgresBindings()
        binds.append(Int64(sequence))
        guard let row = try session.query("SELECT entry FROM \(s)._ds_feed WHERE seq = $1", binds).first else {
            return nil
        }
        return Array(try row.makeRandomAccess()[0].decode(ByteBuffer.self).readableBytesView)
    }

    func appendChangeLog(_ sequence: UInt64, _ entry: [UInt8]) throws {
        if pendingEntry != nil { try flush() }
        pendingEntry = (sequence, entry)
        if let known = feedBounds {
            feedBounds = .some((known?.first ?? sequence, sequence))
        }
    }

    func removeChangeLog(before sequence: UInt64) throws {
        // A removal that would reach the entry held back goes after it.
        if let pending = pendingEntry, pending.sequence < sequence { try flush() }
        pendingRemoval = max(pendingRemoval ?? 0, sequence)
        feedBounds = nil
    }
}
#endif
