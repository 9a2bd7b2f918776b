import DataStoreAPI
import PropertyBased

/// Random requests over ``EdgeDomain`` data, as a generator with a shrinker: a request that a
/// backend answers differently from the oracle comes back as small as it still fails.
enum EdgeRequests {
    /// The stored values of each attribute of each entity, which bounds are drawn near.
    typealias StoredValues = [String: [String: [Value]]]

    static func storedValues(_ items: [String: [Record]]) -> StoredValues {
        items.mapValues { records in
            Dictionary(
                uniqueKeysWithValues: (["id"] + EdgeDomain.attributeNames).map { name in
                    (name, records.map { $0[name] }.filter { !$0.isNull })
                })
        }
    }

    static func generator(_ stored: StoredValues) -> Generator<FetchRequest, [FetchRequest]> {
        Generator(run: { rng in request(stored, &rng) }, shrink: { shrink($0) })
    }

    static func request(_ stored: StoredValues, _ rng: inout some RandomNumberGenerator) -> FetchRequest {
        let entity = EdgeDomain.pick(EdgeDomain.entityNames, &rng)
        let values = stored[entity] ?? [:]
        var filter = self.filter(values, depth: 3, &rng)
        if rng.next() % 10 == 0 {
            // Nested deeper than SQLite's parser takes: the SQLite backend answers such
            // requests in Swift, and must answer them alike.
            for _ in 0..<24 { filter = .not(filter) }
        }
        var sort: [SortKey] = []
        for _ in 0..<Int(rng.next() % 4) {
            let name = EdgeDomain.pick(EdgeDomain.attributeNames + ["id"], &rng)
            let fold = EdgeDomain.stringAttributes.contains(name) && rng.next() % 2 == 0
            sort.append(SortKey(name, ascending: rng.next() % 2 == 0, caseInsensitive: fold))
        }
        let offset = EdgeDomain.pick([0, 0, 0, 1, 2, 5, Int(rng.next() % 60), Int.max], &rng)
        let limit = EdgeDomain.pick([nil, nil, 0, 1, 3, 10, Int(rng.next() % 60), Int.max], &rng)
        return FetchRequest(entity, filter: filter, sort: sort, offset: offset, limit: limit)
    }

    static func filter(
        _ values: [String: [Value]], depth: Int, _ rng: inout some RandomNumberGenerator
    ) -> Filter {
        let roll = rng.next() % 10
        if depth > 0 && roll < 4 {
            let children = (0..<Int(rng.next() % 4)).map { _ in filter(values, depth: depth - 1, &rng) }
            switch roll {
            case 0, 1: return .and(children)
            case 2: return .or(children)
            default: return .not(children.first ?? .all)
            }
        }
        let name = EdgeDomain.pick(EdgeDomain.attributeNames + ["id"], &rng)
        let stored = values[name] ?? []
        switch rng.next() % 8 {
        case 0:
            return .among(
                name, (0..<Int(rng.next() % 5)).map { _ in EdgeDomain.bound(name, near: stored, &rng) })
        case 1:
            return .isNull(name)
        case 2 where EdgeDomain.stringAttributes.contains(name):
            guard case .string(let prefix) = EdgeDomain.bound(name, near: stored, &rng) else {
                return .hasPrefix(name, "")
            }
            return .hasPrefix(name, prefix)
        case 3 where EdgeDomain.stringAttributes.contains(name):
            guard case .string(let needle) = EdgeDomain.bound(name, near: stored, &rng) else {
                return .contains(name, "\u{0}")
            }
            return .contains(name, needle)
        default:
            let op = EdgeDomain.pick(
                [
                    ComparisonOperator.equal, .notEqual, .less, .lessOrEqual, .greater,
                    .greaterOrEqual,
                ], &rng)
            return .compare(name, op, EdgeDomain.bound(name, near: stored, &rng))
        }
    }

    /// Smaller requests: simpler filters, fewer sort keys, no offset, no limit. Every candidate
    /// is strictly smaller by ``size(_:)``, so shrinking ends.
    static func shrink(_ request: FetchRequest) -> [FetchRequest] {
        var candidates: [FetchRequest] = []
        func with(_ change: (inout FetchRequest) -> Void) {
            var smaller = request
            change(&smaller)
            if size(smaller) < size(request) { candidates.append(smaller) }
        }
        with { $0.filter = .all }
        for simpler in shrink(request.filter) { with { $0.filter = simpler } }
        with { $0.sort = [] }
        for i in request.sort.indices { with { $0.sort.remove(at: i) } }
        with { $0.offset = 0 }
        with { $0.limit = nil }
        return candidates
    }

    static func shrink(_ filter: Filter) -> [Filter] {
        switch filter {
        case .and(let children), .or(let children):
            let rebuild: ([Filter]) -> Filter = {
                if case .and = filter { return .and($0) }
                return .or($0)
            }
            var result = children
            for i in children.indices {
                var fewer = children
                fewer.remove(at: i)
                result.append(rebuild(fewer))
                for simpler in shrink(children[i]) {
                    var replaced = children
                    replaced[i] = simpler
                    result.append(rebuild(replaced))
                }
            }
            return result
        case .not(let inner):
            return [inner] + shrink(inner).map { .not($0) }
        case let .among(name, values) where !values.isEmpty:
            return values.indices.map { i in
                var fewer = values
                fewer.remove(at: i)
                return .among(name, fewer)
            }
        default:
            return []
        }
    }

    static func size(_ request: FetchRequest) -> Int {
        size(request.filter) + request.sort.count + (request.offset == 0 ? 0 : 1)
            + (request.limit == nil ? 0 : 1)
    }

    static func size(_ filter: Filter) -> Int {
        switch filter {
        case .all: return 0
        case .and(let children), .or(let children): return 1 + children.map(size).reduce(0, +)
        case .not(let inner): return 1 + size(inner)
        case .among(_, let values): return 1 + values.count
        default: return 1
        }
    }
}
