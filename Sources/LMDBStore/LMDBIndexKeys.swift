internal import CLMDB
@_spi(Backend) import DataStoreAPI

/// Index keys of the LMDB backend (``LMDBQueryPlan`` chooses which to visit).
///
/// An index key is the tuple encoding of the indexed values, cut to ``maxTupleBytes``, then a
/// 0x00 separator, then the item's primary key; its value is the primary key, so the tuple part
/// of a key is its first `key.count - value.count - 1` bytes. LMDB keys hold at most 511 bytes,
/// so long strings are indexed by a prefix: every lookup treats index hits as candidates and
/// re-checks the filter on the record.
///
/// The separator makes key order equal tuple order: a string's tuple ends with 0x00 and a longer
/// string continues with the escape 0xFF, so without it the primary key's first byte (0xFF for
/// large ints and some uuids) would sort an item among the longer strings, and a range scan that
/// stops at the first key past its bound would stop early (format 1 did).
enum LMDBIndexKeys {
    static let maxTupleBytes = 240

    static func tuple(_ values: [Value]) -> [UInt8] {
        var tuple = KeyEncoding.encodeTuple(values)
        if tuple.count > maxTupleBytes { tuple.removeLast(tuple.count - maxTupleBytes) }
        return tuple
    }

    static func key(_ index: Index, _ record: Record, primaryKey: [UInt8]) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(24 + primaryKey.count)
        self.key(index, record, primaryKey: primaryKey, into: &key)
        return key
    }

    /// The index key of `record`, written in place of what `key` held (its storage reused): no
    /// array of values, no tuple and no concatenations.
    static func key(_ index: Index, _ record: Record, primaryKey: [UInt8], into key: inout [UInt8]) {
        key.removeAll(keepingCapacity: true)
        for name in index.attributes { KeyEncoding.appendTupleElement(record[name], to: &key) }
        finish(&key, primaryKey: primaryKey)
    }

    /// The index key of a record whose values in its entity's order are `values`, its index's
    /// attributes at `slots` of them (``LMDBIndexPlan``), written in place of what `key` held:
    /// the same bytes as ``key(_:_:primaryKey:into:)``, without a lookup of each name.
    /// A slot of -1 is an attribute the entity lacks, keyed as null (as `record[name]` reads it).
    static func key(slots: UnsafeBufferPointer<Int>, of values: RecordValues, primaryKey: [UInt8], into key: inout [UInt8]) {
        key.removeAll(keepingCapacity: true)
        for slot in slots { KeyEncoding.appendTupleElement(slot < 0 ? .null : values[slot], to: &key) }
        finish(&key, primaryKey: primaryKey)
    }

    /// Ends an index key whose tuple `key` holds: the tuple cut to ``maxTupleBytes``, the
    /// separator, the item's primary key.
    static func finish(_ key: inout [UInt8], primaryKey: some Collection<UInt8>) {
        if key.count > maxTupleBytes { key.removeLast(key.count - maxTupleBytes) }
        key.append(0x00)
        key.append(contentsOf: primaryKey)
    }

    /// The prefix of every index key whose leading values equal `values`: the complete tuple and
    /// the separator, or the cut tuple when it is longer than ``maxTupleBytes``.
    static func equalityPrefix(_ values: [Value]) -> [UInt8] {
        let full = KeyEncoding.encodeTuple(values)
        return full.count > maxTupleBytes ? tuple(values) : full
    }

    /// Visits the primary keys of the index entries in `range`.
    static func primaryKeys(in range: LMDBQueryPlan.Range, of dbi: MDB_dbi, _ txn: LMDBRawTransaction,
                            _ visit: ([UInt8]) -> Void) throws {
        switch range {
        case .prefix(let prefix):
            try txn.forEach(dbi, from: prefix) { key, value in
                guard key.starts(with: prefix) else { return false }
                visit(Array(value))
                return true
            }
        case let .between(lower, upper):
            try txn.forEach(dbi, from: lower) { key, value in
                let tuple = key.prefix(Swift.max(0, key.count - value.count - 1))
                if let upper, Value.compareBytes(tuple.prefix(upper.count), upper) > 0 { return false }
                visit(Array(value))
                return true
            }
        }
    }
}

/// The indexes of one entity definition as a write uses them: each index's database and the
/// slots of its attributes in the entity's order, found once per definition and transaction
/// (a write looked each database up by two names and each attribute by its name, retaining
/// and releasing the index's parts, for every record).
final class LMDBIndexPlan {
    /// The definition the plan was made for (``EntitySchema/isSameDefinition(as:)``).
    let entity: EntitySchema
    let count: Int
    /// Per index, its database and where its slots are in `slots` (`start..<end`). In memory of
    /// the plan's own, not arrays: a slice of an array retained and released it per index and
    /// write.
    private let indexes: UnsafeMutableBufferPointer<(dbi: MDB_dbi, start: Int, end: Int)>
    /// Every index's slots one after another.
    private let slots: UnsafeMutableBufferPointer<Int>

    /// An index without a database is left out, and an attribute the entity lacks is keyed as
    /// null (slot -1), as the writes by name did. Neither happens to an entity of an opened
    /// schema.
    init(_ entity: EntitySchema, databases: NameIndex<MDB_dbi>) {
        var (dbis, slots, starts) = ([MDB_dbi](), [Int](), [0])
        for index in entity.indexes {
            guard let dbi = databases[index.name] else { continue }
            for name in index.attributes { slots.append(entity.layout.slot(of: name) ?? -1) }
            dbis.append(dbi)
            starts.append(slots.count)
        }
        self.entity = entity
        count = dbis.count
        indexes = .allocate(capacity: max(count, 1))
        for i in 0..<count { indexes.initializeElement(at: i, to: (dbis[i], starts[i], starts[i + 1])) }
        self.slots = .allocate(capacity: max(slots.count, 1))
        _ = self.slots.initialize(fromContentsOf: slots)
    }

    deinit {
        indexes.deallocate()
        slots.deallocate()
    }

    /// Index `i`'s database and the slots of its attributes (valid while the plan lives).
    @inline(__always)
    func index(_ i: Int) -> (dbi: MDB_dbi, slots: UnsafeBufferPointer<Int>) {
        let index = indexes[i]
        return (index.dbi, UnsafeBufferPointer(rebasing: slots[index.start..<index.end]))
    }
}
