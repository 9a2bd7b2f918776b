@_spi(Backend) import DataStoreAPI

/// Which index, and which runs of its keys, give a superset of the items a filter matches: a
/// pure function of the filter and the schema (unit-tested), apart from the index key format
/// (``LMDBIndexKeys``) and the cursor that visits the runs.
enum LMDBQueryPlan {
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
                    return (index, [.prefix(LMDBIndexKeys.equalityPrefix([value]))])
                case let .among(name, values) where name == first:
                    // Each prefix once, in key order (not a set's): the runs are read in that order,
                    // so the first damaged item reported is the same in every process.
                    let prefixes = Set(values.map { LMDBIndexKeys.equalityPrefix([$0]) })
                    return (index, prefixes.sorted { Value.compareBytes($0, $1) < 0 }.map { .prefix($0) })
                case .isNull(let name) where name == first:
                    return (index, [.prefix([0x00])])
                case let .hasPrefix(name, prefix) where name == first:
                    var encoded = KeyEncoding.encodeTuple([.string(prefix)])
                    encoded.removeLast()
                    if encoded.count > LMDBIndexKeys.maxTupleBytes {
                        encoded.removeLast(encoded.count - LMDBIndexKeys.maxTupleBytes)
                    }
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
            case .greater, .greaterOrEqual:
                lower = max(lower, LMDBIndexKeys.tuple([v]), by: { Value.compareBytes($0, $1) < 0 })
            case .less, .lessOrEqual:
                let bound = LMDBIndexKeys.tuple([v])
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

}
