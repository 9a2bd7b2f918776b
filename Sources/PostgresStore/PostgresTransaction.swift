#if Postgres
@_spi(Backend) import DataStoreAPI
import Foundation
import PostgresNIO

/// A read or write transaction on one session.
final class PostgresTransaction: StorageWriter, ChangeLogWriting, BulkInserting {
    let session: PostgresSession
    let engine: PostgresEngine?
    let s: String

    init(session: PostgresSession, engine: PostgresEngine?, quotedSchema: String) {
        self.session = session
        self.engine = engine
        s = quotedSchema
    }

    private func table(_ entity: EntitySchema) -> String { PostgresSQL.table(entity, schema: s) }
    private func columns(_ entity: EntitySchema) -> String {
        entity.attributes.map { PostgresSQL.quote($0.name) }.joined(separator: ", ")
    }
    private func pk(_ entity: EntitySchema) -> String { PostgresSQL.quote(entity.primaryKey) }

    private func records(_ rows: [PostgresRow], _ entity: EntitySchema) throws -> [Record] {
        try rows.map { row in
            let cells = row.makeRandomAccess()
            var values: [Value] = []
            values.reserveCapacity(entity.attributes.count)
            for (i, attribute) in entity.attributes.enumerated() {
                let value = try PostgresSQL.value(cells[i], attribute, entity: entity)
                if value.isNull && !attribute.isOptional {
                    throw StoreError(.corrupt, "\(session.location): \(entity.name).\(attribute.name) is null, but "
                        + "the attribute is required")
                }
                values.append(value)
            }
            return Record(layout: entity.layout, values: values)
        }
    }

    private func binds(_ values: [Value]) -> PostgresBindings {
        var binds = PostgresBindings()
        for value in values { PostgresSQL.bind(value, into: &binds) }
        return binds
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
        if let select = PostgresRequestSQL.select(request, entity, columns: columns(entity), table: table(entity)) {
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
        if let query = PostgresRequestSQL.count(filter, entity, table: table(entity)),
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
        var binds = PostgresBindings()
        binds.append(key)
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
    /// twice, values a unique index holds or that two items of the batch share); otherwise one
    /// by one, so that the error comes from the first item that cannot be stored, as in order.
    func insert(contentsOf records: [(record: Record, key: PrimaryKey)], in entity: EntitySchema) throws {
        guard !records.isEmpty else { return }
        guard try bulkIsClean(records, entity) else {
            for (record, key) in records { try insert(record, key: key, in: entity) }
            return
        }
        // Large batches go by COPY, small ones as one multi-row INSERT.
        if records.count >= 64 { return try session.copy(records, into: entity, schema: s) }
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
        var binds = PostgresBindings()
        binds.append(key)
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
        guard let row = try session.query("SELECT min(seq), max(seq) FROM \(s)._ds_feed").first else { return nil }
        let cells = row.makeRandomAccess()
        guard cells[0].bytes != nil else { return nil }
        return (UInt64(try cells[0].decode(Int64.self)), UInt64(try cells[1].decode(Int64.self)))
    }

    func changeLogEntry(_ sequence: UInt64) throws -> [UInt8]? {
        var binds = PostgresBindings()
        binds.append(Int64(sequence))
        guard let row = try session.query("SELECT entry FROM \(s)._ds_feed WHERE seq = $1", binds).first else {
            return nil
        }
        return Array(try row.makeRandomAccess()[0].decode(ByteBuffer.self).readableBytesView)
    }

    func appendChangeLog(_ sequence: UInt64, _ entry: [UInt8]) throws {
        var binds = PostgresBindings()
        binds.append(Int64(sequence))
        binds.append(ByteBuffer(bytes: entry))
        try session.query("INSERT INTO \(s)._ds_feed (seq, entry) VALUES ($1, $2)", binds)
    }

    func removeChangeLog(before sequence: UInt64) throws {
        var binds = PostgresBindings()
        binds.append(Int64(sequence))
        try session.query("DELETE FROM \(s)._ds_feed WHERE seq < $1", binds)
    }
}
#endif
