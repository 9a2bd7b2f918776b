internal import CLMDB
@_spi(Backend) import DataStoreAPI
import Foundation

/// The items of a store inside one LMDB transaction: records in `e.<Entity>` under
/// `0x00 + encoded key` (LMDB refuses empty keys, and a string key may be empty), index entries
/// in `i.<Entity>.<index>`.
final class LMDBTransaction: StorageWriter {
    let txn: LMDBRawTransaction
    /// The databases of the schema; a schema upgrade changes them as it creates and drops.
    var databases: LMDBDatabases {
        didSet {
            lastDBI = nil
            lastRead = nil
            lastIndexPlan = nil
        }
    }
    /// The database of the entity asked for last (a loop of requests asks for one entity again
    /// and again; a dictionary lookup per request cost more than LMDB's own descent).
    private var lastDBI: (name: String, dbi: MDB_dbi)?
    /// The storage of the index keys a write builds, kept from one write to the next.
    private var indexKeys: (new: [UInt8], old: [UInt8]) = ([], [])

    private var fieldChecks: NameIndex<LMDBFieldCheck> = [:]
    private var lastFieldCheck: LMDBFieldCheck?
    /// The database and checking walk of the entity a get asked for last, with that very
    /// definition (``EntitySchema/isSameDefinition(as:)``): a loop of gets finds both by one
    /// comparison of two references, where comparing the name with ``lastDBI``'s and the
    /// attributes with ``lastFieldCheck``'s retained and released four references a get.
    private var lastRead: (entity: EntitySchema, dbi: MDB_dbi, check: LMDBFieldCheck)?
    /// The indexes of the entity a write asked for last, with that very definition.
    private var lastIndexPlan: LMDBIndexPlan?

    init(txn: LMDBRawTransaction, databases: LMDBDatabases) {
        self.txn = txn
        self.databases = databases
    }

    /// LMDB's transaction ids (``LMDBRawTransaction/commitVersion(afterWrites:)``): a commit of any process
    /// takes the next id, so a write transaction that finds the id the last one left knows that
    /// nothing was committed in between.
    func commitVersion(afterWrites: Bool) throws -> CommitVersion? {
        guard txn.isWrite else { return nil }
        return CommitVersion(txn.commitVersion(afterWrites: afterWrites))
    }

    /// The checking walk of the entity's records: the one the databases share
    /// (``LMDBDatabases/fieldChecks``), or one built for this transaction when the entity's
    /// attributes are not those it was built for (as a schema upgrade changes them). The last one
    /// asked for is found by one comparison of two arrays' storage.
    func fieldCheck(_ entity: EntitySchema) -> LMDBFieldCheck {
        if let last = lastFieldCheck, last.attributes == entity.attributes { return last }
        let check: LMDBFieldCheck
        if let shared = databases.fieldChecks[entity.name], shared.attributes == entity.attributes {
            check = shared
        } else if let kept = fieldChecks[entity.name], kept.attributes == entity.attributes {
            check = kept
        } else {
            check = LMDBFieldCheck(entity.attributes)
            fieldChecks[entity.name] = check
        }
        lastFieldCheck = check
        return check
    }

    /// The entity's database and checking walk (``lastRead``).
    @inline(__always)
    private func reading(_ entity: EntitySchema) throws(StoreError) -> (MDB_dbi, LMDBFieldCheck) {
        if let last = lastRead, last.entity.isSameDefinition(as: entity) { return (last.dbi, last.check) }
        let found = (try dbi(entity), fieldCheck(entity))
        lastRead = (entity, found.0, found.1)
        return found
    }

    func dbi(_ entity: EntitySchema) throws(StoreError) -> MDB_dbi {
        if let last = lastDBI, last.name == entity.name { return last.dbi }
        guard let dbi = databases.entities[entity.name] else {
            throw StoreError(.unknownEntity, "no database for entity '\(entity.name)'")
        }
        lastDBI = (entity.name, dbi)
        return dbi
    }

    static func recordKey(_ key: PrimaryKey) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(1 + key.bytes.count)
        bytes.append(0x00)
        bytes.append(contentsOf: key.bytes)
        return bytes
    }

    /// ``recordKey(_:)`` on the stack, for a write.
    @inline(__always)
    private func withRecordKey<R>(_ key: PrimaryKey, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try key.bytes.withUnsafeBytes { try LMDBRawTransaction.withPrefixed(0x00, $0, body) }
    }

    func get(_ entity: EntitySchema, key: PrimaryKey) throws -> Record? {
        try record(entity, keyBytes: key.bytes)
    }

    /// The key encoded on the stack, not in a ``PrimaryKey``'s array.
    func get(_ entity: EntitySchema, keyValue: Value) throws -> Record? {
        try KeyEncoding.withEncodedKey(keyValue) { try record(entity, keyBytes: $0) }
    }

    /// The record stored under an encoded key (index entries hold encoded keys).
    private func record(_ entity: EntitySchema, keyBytes: [UInt8]) throws -> Record? {
        try keyBytes.withUnsafeBytes { try record(entity, keyBytes: $0) }
    }

    private func record(_ entity: EntitySchema, keyBytes: UnsafeRawBufferPointer) throws -> Record? {
        let (dbi, check) = try reading(entity)
        // Decoded where it lies, with nothing written in between.
        guard let bytes = try txn.value(dbi, prefix: 0x00, keyBytes) else { return nil }
        let layout = entity.layout
        var arena = CompactArena()
        if let record = check.record(bytes, layout: layout, arena: &arena) { return record }
        let (record, damage) = LMDBRecordCoding.decode(bytes, attributes: check.attributes, layout: layout)
        if let damage { throw damaged(damage, entity, key: Array(keyBytes)) }
        return record
    }

    /// Throws `corrupt` when `record` does not carry the key it is stored under (`storedUnder`,
    /// with its prefix byte): the key-ordered scans that copy, verify and sync compare stores by
    /// would otherwise take it for the item it names.
    private func checkCarriedKey(_ record: Record, _ entity: EntitySchema,
                                 storedUnder key: UnsafeRawBufferPointer) throws {
        let carried = record[entity.primaryKey]
        let matches = try KeyEncoding.withEncodedKey(carried) { $0.elementsEqual(key.dropFirst()) }
        guard key.first == 0x00, matches else {
            throw StoreError(.corrupt, "\(txn.environment.path): item \(entity.name)[\(carried)] is stored under "
                + "another key (\(Self.hex(key)))")
        }
    }

    /// Decodes a stored record; a damaged one is `corrupt` naming the environment, entity and key.
    private func decode(_ bytes: UnsafeRawBufferPointer, _ entity: EntitySchema,
                        key: some Collection<UInt8>) throws(StoreError) -> Record {
        do {
            return try LMDBRecordCoding.decode(bytes, entity)
        } catch {
            throw damaged(error, entity, key: key)
        }
    }

    /// What ``LMDBRecordCoding`` found damaged, as `corrupt` naming the environment, entity and key.
    func damaged(_ damage: String, _ entity: EntitySchema, key: some Collection<UInt8>) -> StoreError {
        damaged(LMDBRecordCoding.corrupt(entity, damage), entity, key: key)
    }

    /// A decoding error, naming the environment, entity and key.
    private func damaged(_ error: StoreError, _ entity: EntitySchema, key: some Collection<UInt8>) -> StoreError {
        let keyText = (try? PrimaryKey(bytes: key, type: entity.primaryKeyAttribute.type))?.description
            ?? Self.hex(key)
        return StoreError(.corrupt, "\(txn.environment.path): item \(entity.name)[\(keyText)]: \(error.message)")
    }

    static func hex(_ bytes: some Collection<UInt8>) -> String {
        "0x" + bytes.map { String(format: "%02x", $0) }.joined()
    }

    /// Candidate keys from an index, in key order; `nil` when no index applies.
    private func candidates(_ filter: Filter, _ entity: EntitySchema) throws -> [[UInt8]]? {
        guard let (index, ranges) = LMDBQueryPlan.plan(filter, entity),
              let dbi = databases.indexes[entity.name]?[index.name] else { return nil }
        var keys: [[UInt8]] = []
        for range in ranges {
            try LMDBIndexKeys.primaryKeys(in: range, of: dbi, txn) { keys.append($0) }
        }
        // One equality prefix yields its keys in key order already; anything else is merged here.
        if ranges.count > 1 { keys = Array(Set(keys)) }
        if zip(keys, keys.dropFirst()).contains(where: { Value.compareBytes($0, $1) >= 0 }) {
            keys.sort { Value.compareBytes($0, $1) < 0 }
        }
        return keys
    }

    /// Offers the entity's records in key order to `visit` while it returns true: the index's
    /// candidates when one applies (the filter is re-checked on each record by the caller),
    /// every record otherwise.
    /// Each candidate is a compact record of one arena (its stored fields copied as they are
    /// after one checking walk): a new chunk every 32 KiB of rows, whether `visit` keeps the
    /// records or not, which costs less than decoding each into values of a reused record.
    private func candidates(_ filter: Filter, _ entity: EntitySchema,
                            _ visit: (() -> [UInt8], Record) throws -> Bool) throws {
        // In the loops below the entity is used only to name damage: a closure that passes it on
        // for every record copies it (five references retained and released) each time.
        let attributes = entity.attributes
        let reader = LMDBRecordReader(entity, fieldCheck(entity))
        /// Decodes a candidate into a new record of the arena.
        func decode(_ bytes: UnsafeRawBufferPointer, key: some Collection<UInt8>) throws(StoreError) -> Record {
            let (fresh, damage) = reader.decode(bytes)
            if let damage { throw damaged(damage, entity, key: key) }
            return fresh
        }
        if let keys = try candidates(filter, entity) {
            let dbi = try dbi(entity)
            for key in keys {
                // The record's key (prefix and primary key) built on the stack, not in an array,
                // and the record decoded where it lies, with nothing written in between.
                let bytes = try key.withUnsafeBytes { try txn.value(dbi, prefix: 0x00, $0) }
                guard let found = try bytes.map({ try decode($0, key: key) }) else {
                    throw StoreError(.corrupt, "\(txn.environment.path): an index of '\(entity.name)' names the "
                        + "missing item \(Self.hex(key))")
                }
                if !(try visit({ key }, found)) { return }
            }
            return
        }
        // A range of primary keys in the filter (`id > last`, keyset paging) starts and ends the
        // cursor there instead of at the entity's ends.
        let (start, end) = Self.keyRange(filter, entity)
        func beyond(_ key: UnsafeRawBufferPointer) -> Bool {
            guard let end else { return false }
            return Value.compareBytes(key.dropFirst(), end) > 0
        }
        // A filter that reads only some attributes: those are decoded first, and the whole record
        // only when they match (`visit` checks the filter again, on the whole record).
        let compiled = CompiledFilter(filter, layout: entity.layout)
        if !compiled.readsEveryAttributeOrNone {
            // Each record checked once into a field table, where the filter reads its fields.
            let probe = LMDBRowCursor(entity, fieldCheck(entity))
            let table = probe.table
            try txn.forEach(dbi(entity), from: start) { key, value in
                if beyond(key) { return false }
                guard probe.load(value) else {
                    var ranges: [Range<Int>] = []
                    let damage = LMDBRecordCoding.fields(value, attributes: attributes, into: &ranges)
                    throw damaged(damage ?? "a field the check refused", entity, key: key.dropFirst())
                }
                guard compiled.matches(table) else { return true }
                return try visit({ Array(key.dropFirst()) }, decode(value, key: key.dropFirst()))
            }
            return
        }
        // Every record, or a filter that reads every attribute.
        try txn.forEach(dbi(entity), from: start) { key, value in
            if beyond(key) { return false }
            return try visit({ Array(key.dropFirst()) }, decode(value, key: key.dropFirst()))
        }
    }

    /// The first entity key at or after which the items a filter can match begin, and the last
    /// encoded primary key they can have, from its top-level comparisons of the primary key; the
    /// caller still checks the filter on every record.
    static func keyRange(_ filter: Filter, _ entity: EntitySchema) -> (start: [UInt8]?, end: [UInt8]?) {
        let terms: [Filter]
        if case .and(let all) = filter { terms = all } else { terms = [filter] }
        var start: [UInt8]?
        var end: [UInt8]?
        for case let .compare(name, op, value) in terms where name == entity.primaryKey {
            guard let key = try? PrimaryKey(value).bytes else { continue }
            switch op {
            case .greater, .greaterOrEqual:
                if start.map({ Value.compareBytes(key, $0) > 0 }) ?? true { start = key }
            case .less, .lessOrEqual:
                if end.map({ Value.compareBytes(key, $0) < 0 }) ?? true { end = key }
            case .equal:
                if start.map({ Value.compareBytes(key, $0) > 0 }) ?? true { start = key }
                if end.map({ Value.compareBytes(key, $0) < 0 }) ?? true { end = key }
            case .notEqual:
                continue
            }
        }
        return (start.map { [0x00] + $0 }, end)
    }

    func fetch(_ request: FetchRequest, in entity: EntitySchema) throws -> [Record] {
        var stages = RequestStages(request)
        guard request.filter == .all else {
            try candidates(request.filter, entity) { key, record in
                stages.offer(key: key(), record: record)
            }
            return stages.finish()
        }
        // Every record is kept: each is decoded into a new record of the arena and moved into the
        // answer (handed on through a closure, it would be copied: two references retained and
        // released per record).
        let dbi = try dbi(entity)
        stages.reserve(candidates: try txn.count(dbi))
        let reader = LMDBRecordReader(entity, fieldCheck(entity))
        try txn.forEach(dbi, from: nil) { key, value in
            let (fresh, damage) = reader.decode(value)
            if let damage { throw damaged(damage, entity, key: key.dropFirst()) }
            return stages.offer(key: Array(key.dropFirst()), record: fresh)
        }
        return stages.finish()
    }

    /// Streams from the cursor when the request has no sort keys (candidates come in key order).
    func forEach(_ request: FetchRequest, in entity: EntitySchema, _ body: (Record) throws -> Bool) throws {
        guard request.sort.isEmpty else { return try forEachFetched(request, in: entity, body) }
        var stages = RequestStages(request)
        try candidates(request.filter, entity) { _, record in try stages.pass(record, to: body) }
    }

    /// Every item of an entity in key order, read in the map: each record's fields are found and
    /// checked (as a decode checks them), and nothing is built. Filtered or sorted requests visit
    /// records (``StorageReader/visitRecords(_:in:_:)``).
    func visitsInPlace(_ request: FetchRequest) -> Bool {
        guard request.sort.isEmpty, case .all = request.filter else { return false }
        return true
    }

    func visit(_ request: FetchRequest, in entity: EntitySchema, _ body: (any RowCursor) throws -> Bool) throws {
        guard request.sort.isEmpty, case .all = request.filter else { return try visitRecords(request, in: entity, body) }
        let (offset, limit) = (request.offset, request.limit ?? .max)
        guard limit > 0 else { return }
        let cursor = LMDBRowCursor(entity, fieldCheck(entity))
        let attributes = entity.attributes
        var (skipped, taken) = (0, 0)
        try txn.forEach(dbi(entity), from: nil) { key, value in
            guard cursor.load(value) else {
                var ranges: [Range<Int>] = []
                let damage = LMDBRecordCoding.fields(value, attributes: attributes, into: &ranges)
                throw damaged(damage ?? "a field the visit's check refused", entity, key: key.dropFirst())
            }
            if skipped < offset {
                skipped += 1
                return true
            }
            taken += 1
            return try body(cursor) && taken < limit
        }
    }

    /// Every item of an entity in key order, as ``visit(_:in:_:)`` reads them, each record's
    /// fields handed over once its checksum matched (what a model's `init?(storedFields:)` reads
    /// and checks field by field). A record whose checksum does not match ends the visit:
    /// `false`, and the caller's ordinary read names the damage.
    func visitStoredFields(_ request: FetchRequest, in entity: EntitySchema,
                           _ body: (inout StoredFieldReader) throws -> Bool) throws -> Bool {
        guard visitsInPlace(request) else { return false }
        let (offset, limit) = (request.offset, request.limit ?? .max)
        guard limit > 0 else { return true }
        var (skipped, taken, sound) = (0, 0, true)
        let check = fieldCheck(entity)
        try txn.forEach(dbi(entity), from: nil) { _, value in
            // A record of the format before checksums (1) has none to match: read by name.
            guard let unsealed = LMDBRecordCoding.unsealed(value), unsealed.count < value.count else {
                sound = false
                return false
            }
            if skipped < offset {
                // Skipped records are checked field by field, as the visit checks them.
                guard check.walk(value, { _, _, _ in }) else {
                    sound = false
                    return false
                }
                skipped += 1
                return true
            }
            taken += 1
            var fields = StoredFieldReader(UnsafeRawBufferPointer(rebasing: unsealed[1...]))
            return try body(&fields) && taken < limit
        }
        return sound
    }

    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int {
        if filter == .all { return try txn.count(dbi(entity)) }
        var count = 0
        let compiled = CompiledFilter(filter, layout: entity.layout)
        try candidates(filter, entity) { _, record in
            if compiled.matches(record) { count += 1 }
            return true
        }
        return count
    }

    func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int) throws -> [Record] {
        var result: [Record] = []
        let start = key.map { Self.recordKey($0) }
        let reader = LMDBRecordReader(entity, fieldCheck(entity))
        try txn.forEach(dbi(entity), from: start) { k, value in
            if let start, k.elementsEqual(start) { return true }
            let (fresh, damage) = reader.decode(value)
            if let damage { throw damaged(damage, entity, key: k.dropFirst()) }
            try checkCarriedKey(fresh, entity, storedUnder: k)
            result.append(fresh)
            return result.count < limit
        }
        return result
    }

    /// The page's records, compact records of one arena (fewer instructions than refilling values
    /// of the page's own, which built each text and blob again), in the page's array.
    func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int, into page: inout [Record]) throws {
        let start = key.map { Self.recordKey($0) }
        let reader = LMDBRecordReader(entity, fieldCheck(entity))
        page.removeAll(keepingCapacity: true)
        guard limit > 0 else { return }
        try txn.forEach(dbi(entity), from: start) { k, value in
            if let start, k.elementsEqual(start) { return true }
            let (fresh, damage) = reader.decode(value)
            if let damage { throw damaged(damage, entity, key: k.dropFirst()) }
            try checkCarriedKey(fresh, entity, storedUnder: k)
            page.append(fresh)
            return page.count < limit
        }
    }

    /// Decodes every record of the entity and checks that each carries the primary key it is
    /// stored under (damage can turn one key into another valid one); returns how many.
    /// - Throws: `corrupt` naming the environment, entity and key.
    /// Reads every record of `entity`, each checked as a read checks it and against the key it is
    /// stored under; what is damaged is added to `damage` (one line per record, naming it), and
    /// the walk goes on.
    /// - Parameter sealed: whether every record must carry a checksum (a store of the current
    ///   format); a record without one is then damage too.
    /// - Returns: the records read.
    func checkRecords(_ entity: EntitySchema, sealed: Bool, damage: inout [String]) throws -> Int {
        var count = 0
        try txn.forEach(dbi(entity), from: nil) { key, value in
            count += 1
            do {
                if sealed && value.first == LMDBRecordCoding.unsealedVersion {
                    throw damaged("it carries no checksum, in a store whose records all do", entity, key: key.dropFirst())
                }
                try checkCarriedKey(try decode(value, entity, key: key.dropFirst()), entity, storedUnder: key)
            } catch let error as StoreError where error.code == .corrupt {
                let prefix = txn.environment.path + ": "
                damage.append(error.message.hasPrefix(prefix) ? String(error.message.dropFirst(prefix.count)) : error.message)
            }
            return true
        }
        return count
    }

    /// Rewrites every record of `entity` written without a checksum (format 1) sealed with one,
    /// each checked first as a read checks it: a damaged record is refused, naming it, rather
    /// than sealed.
    func sealRecords(_ entity: EntitySchema) throws {
        let attributes = entity.attributes
        var ranges: [Range<Int>] = []
        try rewriteRecords(try dbi(entity)) { key, value, buffer in
            if let damage = LMDBRecordCoding.fields(value, attributes: attributes, into: &ranges) {
                throw damaged(damage, entity, key: key.dropFirst())
            }
            let recordStart = buffer.count
            if value.first == LMDBRecordCoding.unsealedVersion {
                buffer.append(LMDBRecordCoding.version)
                buffer.append(contentsOf: value.dropFirst())
                LMDBRecordCoding.seal(&buffer, from: recordStart)
            } else {
                buffer.append(contentsOf: value)
            }
        } visited: { _ in }
    }

    /// Rewrites every entry of `dbi` with the value `rewrite` appends to the buffer it is given
    /// (from the stored key and value), in pages of 1,000 read by key: a page's new entries are
    /// kept in one buffer, each its key then its value, and written after the cursor that read
    /// them is closed. `visited` is told each page's size.
    func rewriteRecords(_ dbi: MDB_dbi,
                        _ rewrite: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer,
                                    _ buffer: inout [UInt8]) throws -> Void,
                        visited: (Int) -> Void) throws {
        var buffer: [UInt8] = []
        var page: [(keyEnd: Int, end: Int)] = []
        var start: [UInt8]?
        repeat {
            buffer.removeAll(keepingCapacity: true)
            page.removeAll(keepingCapacity: true)
            try txn.forEach(dbi, from: start) { key, value in
                buffer.append(contentsOf: key)
                let keyEnd = buffer.count
                try rewrite(key, value, &buffer)
                page.append((keyEnd, buffer.count))
                return page.count < 1_000
            }
            try buffer.withUnsafeBytes { bytes in
                var offset = 0
                for (keyEnd, end) in page {
                    try txn.put(dbi, UnsafeRawBufferPointer(rebasing: bytes[offset..<keyEnd]),
                                UnsafeRawBufferPointer(rebasing: bytes[keyEnd..<end]))
                    offset = end
                }
            }
            visited(page.count)
            // The least key after the page's last.
            start = page.last.map { last in
                Array(buffer[(page.count > 1 ? page[page.count - 2].end : 0)..<last.keyEnd]) + [0x00]
            }
        } while page.count == 1_000
    }

    func metadata(forKey key: String) throws -> [UInt8]? {
        try txn.withValue(databases.meta, Array(key.utf8)) { Array($0) }
    }

    /// Writes the record only if its key is new (one descent of the tree finds out and writes:
    /// `MDB_NOOVERWRITE`), then checks the unique indexes (taking the record out again when one
    /// refuses it), then writes its index entries: a refused insert leaves nothing, and a taken
    /// key is reported before a unique violation, as on every backend.
    func insert(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        let (dbi, values) = (try dbi(entity), record.values(in: entity.layout))
        let inserted = try withRecordKey(key) { recordKey in
            try LMDBRecordCoding.withEncoded(values) { try txn.insert(dbi, recordKey, $0) }
        }
        guard inserted else { throw StoreError.keyExists(entity, record) }
        do {
            try checkUnique(record, key: key, in: entity)
        } catch {
            _ = try withRecordKey(key) { try txn.delete(dbi, $0) }
            throw error
        }
        try writeIndexes(record, values: values, key: key, old: nil, in: entity)
    }

    func put(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        let old = try get(entity, key: key)
        try checkUnique(record, key: key, in: entity)
        try writeIndexes(record, key: key, old: old, in: entity)
        let (dbi, values) = (try dbi(entity), record.values(in: entity.layout))
        try withRecordKey(key) { recordKey in
            try LMDBRecordCoding.withEncoded(values) { try txn.put(dbi, recordKey, $0) }
        }
    }

    private func checkUnique(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        try UniqueIndexRule.check(record, key: key, in: entity) { index, values in
            guard let dbi = databases.indexes[entity.name]?[index.name] else { return [] }
            var holders: [[UInt8]] = []
            try LMDBIndexKeys.primaryKeys(in: .prefix(LMDBIndexKeys.equalityPrefix(values)), of: dbi, txn) {
                holders.append($0)
            }
            return try holders.compactMap { try self.record(entity, keyBytes: $0) }
        }
    }

    /// Writes the record's index entries (and deletes the old record's that changed), each key
    /// built in storage kept from the last write.
    /// - Parameter values: the record's values in the entity's order, when the caller has them.
    private func writeIndexes(_ record: Record, values: RecordValues? = nil, key: PrimaryKey, old: Record?,
                              in entity: EntitySchema) throws {
        guard !entity.indexes.isEmpty, let plan = indexPlan(entity) else { return }
        var (newKey, oldKey) = indexKeys
        indexKeys = ([], [])
        defer { indexKeys = (newKey, oldKey) }
        let layout = entity.layout
        let (values, oldValues) = (values ?? record.values(in: layout), old?.values(in: layout))
        // The slots are the plan's memory: the plan is kept alive while they are read.
        try withExtendedLifetime(plan) {
            for i in 0..<plan.count {
                let (dbi, slots) = plan.index(i)
                LMDBIndexKeys.key(slots: slots, of: values, primaryKey: key.bytes, into: &newKey)
                if let oldValues {
                    LMDBIndexKeys.key(slots: slots, of: oldValues, primaryKey: key.bytes, into: &oldKey)
                    if oldKey == newKey { continue }
                    try txn.delete(dbi, oldKey)
                }
                try txn.put(dbi, newKey, key.bytes)
            }
        }
    }

    /// The entity's index plan (``lastIndexPlan``); `nil` when it has none.
    private func indexPlan(_ entity: EntitySchema) -> LMDBIndexPlan? {
        if let last = lastIndexPlan, last.entity.isSameDefinition(as: entity) { return last }
        guard let dbis = databases.indexes[entity.name] else { return nil }
        let plan = LMDBIndexPlan(entity, databases: dbis)
        lastIndexPlan = plan
        return plan
    }

    func delete(key: PrimaryKey, in entity: EntitySchema) throws -> Bool {
        guard let old = try get(entity, key: key) else { return false }
        for index in entity.indexes {
            guard let dbi = databases.indexes[entity.name]?[index.name] else { continue }
            try txn.delete(dbi, LMDBIndexKeys.key(index, old, primaryKey: key.bytes))
        }
        let dbi = try dbi(entity)
        return try withRecordKey(key) { try txn.delete(dbi, $0) }
    }

    func deleteAll(in entity: EntitySchema) throws -> Int {
        let dbi = try dbi(entity)
        let count = try txn.count(dbi)
        try txn.drop(dbi)
        for (_, indexDBI) in databases.indexes[entity.name] ?? [:] { try txn.drop(indexDBI) }
        return count
    }

    func setMetadata(_ value: [UInt8]?, forKey key: String) throws {
        if let value {
            try txn.put(databases.meta, Array(key.utf8), value)
        } else {
            try txn.delete(databases.meta, Array(key.utf8))
        }
    }
}
