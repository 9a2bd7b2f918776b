import DataStoreAPI
import Foundation
import PropertyBased

/// Random requests from the edges of the value domain, answered by the store, by a child store
/// with pending changes, and by a delete that is rolled back, each compared with the oracle.
enum EdgeQueryCases {
    /// Requests per run: `DATASTORE_EDGE_REQUESTS` in the environment, 10,000 by default.
    static var requestCount: Int {
        ProcessInfo.processInfo.environment["DATASTORE_EDGE_REQUESTS"].flatMap(Int.init) ?? 10_000
    }

    struct Rollback: Error {}

    /// The store loaded with edge data, its items as stored, a child with pending changes and
    /// the items the child must show.
    struct Setup {
        let store: any DataStore
        let stored: [String: [Record]]
        let child: any DataStore
        let childItems: [String: [Record]]
    }

    static func setUp(_ c: ConformanceContext, seed: UInt64) throws -> Setup {
        let store = try c.open(EdgeDomain.schema, name: "edge")
        let items = EdgeDomain.items(150, seed: seed)
        try store.writeSync { writer in
            for (entity, records) in items {
                for record in records { try writer.insert(record, into: entity) }
            }
        }
        let stored = try store.read { reader in
            Dictionary(
                uniqueKeysWithValues: try items.map { entity, records in
                    (entity, try records.map { try reader.get(entity, key: $0["id"]) ?? [:] })
                })
        }
        var rng = SplitMix64(seed: seed &+ 1)
        var model = stored.mapValues { Dictionary(uniqueKeysWithValues: $0.map { ($0["id"], $0) }) }
        let child = try store.makeChild()
        try child.writeSync { writer in
            for entity in EdgeDomain.entityNames {
                for record in (stored[entity] ?? []).prefix(30) {
                    let key = record["id"]
                    switch rng.next() % 3 {
                    case 0:
                        _ = try writer.delete(entity, key: key)
                        model[entity]?[key] = nil
                    default:
                        var changed = EdgeDomain.item(entity, key: key, &rng)
                        changed["u"] = record["u"]
                        try writer.save(changed, into: entity)
                        model[entity]?[key] = changed
                    }
                }
                for _ in 0..<10 {
                    let key = EdgeDomain.key(for: entity, &rng)
                    guard model[entity]?[key] == nil else { continue }
                    let added = EdgeDomain.item(entity, key: key, &rng)
                    try writer.insert(added, into: entity)
                    model[entity]?[key] = added
                }
            }
        }
        return Setup(
            store: store, stored: stored, child: child, childItems: model.mapValues { Array($0.values) })
    }

    static func describe(_ request: FetchRequest) -> String {
        "\(request.entity) filter \(request.filter) sort \(request.sort) offset \(request.offset) "
            + "limit \(request.limit.map(String.init) ?? "none")"
    }

    static func check(_ c: ConformanceContext, _ setup: Setup, _ request: FetchRequest, deleting: Bool) throws
    {
        let expected = Oracle.answer(request, over: setup.stored[request.entity] ?? [], primaryKey: "id")
        let (got, count) = try setup.store.read { reader in
            (try reader.fetch(request), try reader.count(request))
        }
        c.expect(
            got == expected,
            "fetch \(describe(request)) on \(c.backend.name): got \(got.map(\.["id"])), "
                + "expected \(expected.map(\.["id"]))")
        c.expectEqual(count, expected.count, "count \(describe(request)) on \(c.backend.name)")

        let childExpected = Oracle.answer(
            request, over: setup.childItems[request.entity] ?? [], primaryKey: "id")
        let childGot = try setup.child.read { try $0.fetch(request) }
        c.expect(
            childGot == childExpected,
            "child fetch \(describe(request)) on \(c.backend.name): got "
                + "\(childGot.map(\.["id"])), expected \(childExpected.map(\.["id"]))")

        guard deleting else { return }
        var deleted = -1
        var remaining = -1
        do {
            try setup.store.writeSync { writer in
                deleted = try writer.delete(request)
                remaining = try writer.count(FetchRequest(request.entity))
                throw Rollback()
            }
        } catch is Rollback {}
        c.expectEqual(deleted, expected.count, "delete \(describe(request)) on \(c.backend.name)")
        c.expectEqual(
            remaining, (setup.stored[request.entity]?.count ?? 0) - expected.count,
            "items left after delete \(describe(request)) on \(c.backend.name)")
    }

    static func randomEdgeRequestsMatchTheOracleOnStoreChildAndDelete(_ c: ConformanceContext) async throws {
        let setup = try setUp(c, seed: 9)
        let generator = EdgeRequests.generator(EdgeRequests.storedValues(setup.stored))
        var checked = 0
        await propertyCheck(
            count: requestCount, input: generator,
            perform: { request in
                checked += 1
                try check(c, setup, request, deleting: checked % 16 == 0)
            }, sourceLocation: c.sourceLocation)
    }

    static func indexedRangesFindValuesThatArePrefixesOfTheirBounds(_ c: ConformanceContext) throws {
        let store = try c.open(EdgeDomain.schema, name: "edge")
        let keys: [Value] = [.int(.max), .int(.max - 1), .int(.min), .int(0)]
        try store.writeSync { writer in
            for (i, key) in keys.enumerated() {
                try writer.insert(
                    ["id": key, "s": "ab", "b": .bytes([1]), "n": .int(Int64(i))],
                    into: "EdgeInt")
            }
        }
        let requests: [(Filter, Int)] = [
            (Field("s") <= "ab\u{0}", 4), (Field("s") < "ab\u{0}", 4), (Field("s") < "ab\u{0}\u{0}", 4),
            (Field("s") <= "ab", 4), (Field("s") < "ab", 0), (Field("s") > "a", 4),
            (Field("b") < .bytes([1, 0]), 4), (Field("b") <= .bytes([1]), 4),
            (Field("b") < .bytes([1]), 0),
            (Field("s") >= "ab" && Field("s") <= "ab\u{0}", 4),
        ]
        try store.read { reader in
            for (filter, expected) in requests {
                let request = FetchRequest("EdgeInt", filter: filter)
                c.expectEqual(
                    try reader.fetch(request).count, expected, "fetch \(filter) on \(c.backend.name)")
                c.expectEqual(try reader.count(request), expected, "count \(filter) on \(c.backend.name)")
            }
        }
    }

    static func intMaxOffsetsAndLimitsNeverOverflow(_ c: ConformanceContext) throws {
        let store = try c.open()
        let items = Fixtures.items(40, seed: 5)
        try Fixtures.load(items, into: store)
        let stored = try store.read { try $0.fetch(FetchRequest("Item")) }
        let requests = [
            FetchRequest("Item", sort: [.ascending("name")], offset: 3, limit: Int.max),
            FetchRequest("Item", sort: [.descending("score")], offset: Int.max, limit: Int.max),
            FetchRequest("Item", filter: Field("score") > 0, offset: 1, limit: Int.max),
            FetchRequest("Item", offset: Int.max - 1, limit: 5),
        ]
        try store.read { reader in
            for request in requests {
                let expected = Oracle.answer(request, over: stored, primaryKey: "id")
                c.expectEqual(try reader.fetch(request), expected, "\(describe(request))")
                c.expectEqual(try reader.count(request), expected.count, "count \(describe(request))")
            }
            c.expectEqual(try reader.scan("Item", limit: Int.max).count, stored.count)
            c.expectEqual(
                try reader.scan("Item", after: stored[0]["id"], limit: Int.max).count,
                stored.count - 1)
        }
        let child = try store.makeChild()
        try child.writeSync { try $0.delete("Item", key: stored[0]["id"]) }
        try child.read { reader in
            c.expectEqual(
                try reader.fetch(FetchRequest("Item", offset: 1, limit: Int.max)).count,
                stored.count - 2)
            c.expectEqual(
                try reader.fetch(
                    FetchRequest(
                        "Item", sort: [.ascending("name")], offset: Int.max,
                        limit: Int.max)
                ).count, 0)
            c.expectEqual(try reader.scan("Item", limit: Int.max).count, stored.count - 1)
        }
    }

    static func caseInsensitiveSortComparesPastNULBytes(_ c: ConformanceContext) throws {
        let store = try c.open(EdgeDomain.schema, name: "edge")
        let values = ["a\u{0}b", "A\u{0}a", "a\u{0}C", "a\u{0}", "a", "A\u{0}\u{0}", "\u{0}", ""]
        try store.writeSync { writer in
            for (i, value) in values.enumerated() {
                try writer.insert(["id": .int(Int64(i)), "t": .string(value)], into: "EdgeInt")
            }
        }
        let stored = try store.read { try $0.fetch(FetchRequest("EdgeInt")) }
        for ascending in [true, false] {
            let request = FetchRequest(
                "EdgeInt", sort: [SortKey("t", ascending: ascending, caseInsensitive: true)])
            let expected = Oracle.answer(request, over: stored, primaryKey: "id")
            c.expectEqual(
                try store.read { try $0.fetch(request) }.map(\.["t"]), expected.map(\.["t"]),
                "ascending \(ascending) on \(c.backend.name)")
            let child = try store.makeChild()
            try child.writeSync { try $0.save(["id": 100, "t": "a\u{0}B"], into: "EdgeInt") }
            let childExpected = Oracle.answer(
                request,
                over: stored + [
                    try child.read {
                        try $0.get("EdgeInt", key: 100) ?? [:]
                    }
                ], primaryKey: "id")
            c.expectEqual(
                try child.read { try $0.fetch(request) }.map(\.["t"]), childExpected.map(\.["t"]),
                "child, ascending \(ascending) on \(c.backend.name)")
        }
    }

    static let all: [ConformanceCase] = [
        ConformanceCase(
            "Edge queries", "randomEdgeRequestsMatchTheOracleOnStoreChildAndDelete",
            randomEdgeRequestsMatchTheOracleOnStoreChildAndDelete),
        ConformanceCase(
            "Edge queries", "indexedRangesFindValuesThatArePrefixesOfTheirBounds",
            indexedRangesFindValuesThatArePrefixesOfTheirBounds),
        ConformanceCase(
            "Edge queries", "intMaxOffsetsAndLimitsNeverOverflow", intMaxOffsetsAndLimitsNeverOverflow),
        ConformanceCase(
            "Edge queries", "caseInsensitiveSortComparesPastNULBytes", caseInsensitiveSortComparesPastNULBytes
        ),
    ]
}
