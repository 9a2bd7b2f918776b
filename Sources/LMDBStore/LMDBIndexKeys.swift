internal import CLMDB
@_spi(Backend) import DataStoreAPI

/// Index keys of the LMDB backend and the index ranges a filter can use.
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
/// stops at the first key past its bound would stop early (format 1 did; see ``Range``).
enum LMDBIndexKeys {
    static let maxTupleBytes = 240

    static func tuple(_ values: [Value]) -> [UInt8] {
        var tuple = KeyEncoding.encodeTuple(values)
        if tuple.count > maxTupleBytes { tuple.removeLast(tuple.count - maxTupleBytes) }
        return tuple
    }

    static func key(_ index: Index, _ record: Record, primaryKey: [UInt8]) -> [UInt8] {
        tuple(index.attributes.map { record[$0] }) + [0x00] + primaryKey
    }

    /// The prefix of every index key whose leading values equal `values`: the complete tuple and
    /// the separator, or the cut tuple when it is longer than ``maxTupleBytes``.
    static func equalityPrefix(_ values: [Value]) -> [UInt8] {
        let full = KeyEncoding.encodeTuple(values)
        return full.count > maxTupleBytes ? tuple(values) : full
    }

    /// A run of index keys to visit.
    enum Range: Equatable {
        /// Keys that start with these bytes.
        case prefix([UInt8])
        /// Keys from `lower`, while the first `upper.count` bytes of their tuple part are not
        /// greater than `upper`.
        case between(lower: [UInt8], upper: [UInt8]?)
    }

    /// The index and ranges that give a superset of the items matching `filter`, if any:
    /// equality, `in`, is-null and prefix on an index's first attribute first, then ranges.
    static func plan(_ filter: Filter, _ entity: EntitySchema) -> (Index, [Range])? {
        let terms: [Filter]
        if case .and(let all) = filter { terms = all } else { terms = [filter] }
        var best: (Index, [Range], isPrefix: Bool)?
        for index in entity.indexes {
            guard let first = index.attributes.first else { continue }
            for term in terms {
                switch term {
                case let .compare(name, .equal, value) where name == first:
                    return (index, [.prefix(equalityPrefix([value]))])
                case let .among(name, values) where name == first:
                    return (index, Set(values).map { .prefix(equalityPrefix([$0])) })
                case .isNull(let name) where name == first:
                    return (index, [.prefix([0x00])])
                case let .hasPrefix(name, prefix) where name == first:
                    var encoded = KeyEncoding.encodeTuple([.string(prefix)])
                    encoded.removeLast()
                    if encoded.count > maxTupleBytes { encoded.removeLast(encoded.count - maxTupleBytes) }
                    best = (index, [.prefix(encoded)], true)
                case let .compare(name, op, value) where name == first && !value.isNull && op != .notEqual:
                    if best == nil { best = (index, [range(terms, first)], false) }
                default:
                    continue
                }
            }
        }
        return best.map { ($0.0, $0.1) }
    }

    private static func range(_ terms: [Filter], _ name: String) -> Range {
        var lower: [UInt8] = [0x01]
        var upper: [UInt8]?
        for term in terms {
            guard case let .compare(n, o, v) = term, n == name, !v.isNull else { continue }
            switch o {
            case .greater, .greaterOrEqual: lower = max(lower, tuple([v]), by: { Value.compareBytes($0, $1) < 0 })
            case .less, .lessOrEqual:
                let bound = tuple([v])
                upper = upper.map { min($0, bound, by: { Value.compareBytes($0, $1) < 0 }) } ?? bound
            default: continue
            }
        }
        return .between(lower: lower, upper: upper)
    }

    private static func max(_ a: [UInt8], _ b: [UInt8], by less: ([UInt8], [UInt8]) -> Bool) -> [UInt8] {
        less(a, b) ? b : a
    }

    private static func min(_ a: [UInt8], _ b: [UInt8], by less: ([UInt8], [UInt8]) -> Bool) -> [UInt8] {
        less(b, a) ? b : a
    }

    /// Visits the primary keys of the index entries in `range`.
    static func primaryKeys(in range: Range, of dbi: MDB_dbi, _ txn: LMDBTransaction,
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
