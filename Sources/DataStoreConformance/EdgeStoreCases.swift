import DataStoreAPI
import Foundation
import Synchronization

/// Behaviour at the edges of the store's own rules: nested and many concurrent reads, key
/// clashes that are also unique clashes, names that differ only by case, requests with
/// thousands of terms, metadata keys, and child stores that swap unique values.
enum EdgeStoreCases {
    /// Runs `count` threads that each hold a read open until all of them are inside one (or a
    /// deadline passes); returns how many were inside at once.
    static func concurrentReaders(_ store: any DataStore, count: Int) -> Int {
        let inside = Mutex(0)
        let most = Mutex(0)
        let finished = DispatchSemaphore(value: 0)
        for _ in 0..<count {
            Thread {
                _ = try? store.read { _ in
                    let now = inside.withLock { value -> Int in
                        value += 1
                        return value
                    }
                    most.withLock { $0 = max($0, now) }
                    let deadline = Date().addingTimeInterval(10)
                    while most.withLock({ $0 }) < count && Date() < deadline { usleep(1_000) }
                    inside.withLock { $0 -= 1 }
                }
                finished.signal()
            }.start()
        }
        for _ in 0..<count { finished.wait() }
        return most.withLock { $0 }
    }

    /// What nested reads saw, checked by the caller.
    struct NestedReads: Sendable {
        var deepCount = 0
        var writeCommitted = false
        var outerCount = 0
        var innerCount = 0
        var ownWriteSeen = false
        var childCount = 0
    }

    static func nestedReads(_ store: any DataStore) throws -> NestedReads {
        var seen = NestedReads()
        func nest(_ depth: Int) throws -> Int {
            if depth == 0 { return try store.read { try $0.count(FetchRequest("Item")) } }
            return try store.read { _ in try nest(depth - 1) }
        }
        seen.deepCount = try nest(200)
        try store.read { outer in
            seen.outerCount = try outer.count(FetchRequest("Item"))
            let committed = DispatchSemaphore(value: 0)
            Thread {
                try? store.writeSync { try $0.insert(["id": 5_000, "name": "late"], into: "Item") }
                committed.signal()
            }.start()
            seen.writeCommitted = committed.wait(timeout: .now() + 10) == .success
            seen.innerCount = try store.read { try $0.count(FetchRequest("Item")) }
        }
        try store.writeSync { writer in
            try writer.insert(["id": 6_000, "name": "own"], into: "Item")
            seen.ownWriteSeen = try store.read { try $0.get("Item", key: 6_000) } != nil
        }
        let child = try store.makeChild()
        seen.childCount = try store.read { _ in try child.read { try $0.count(FetchRequest("Item")) } }
        return seen
    }

    static func largeRequests(_ c: ConformanceContext) throws {
        let store = try c.open()
        try Fixtures.load(Fixtures.items(200, seed: 8), into: store)
        let stored = try store.read { try $0.fetch(FetchRequest("Item")) }
        let manyOr = Filter.or((0..<5_000).map { Field("score") == .int(Int64($0 % 7) - 3) })
        let manyAnd = Filter.and((0..<5_000).map { Field("name") != .string("x\($0)") })
        let manyIn = Field("id").among((0..<9_000).map { .int(Int64($0) - 4_500) })
        var deep = Field("score") > 0
        for _ in 0..<Limits.maxFilterDepth { deep = .not(deep) }
        let sortKeys = (0..<Limits.maxSortKeys).map { i in
            SortKey(["score", "name", "ratio", "flag"][i % 4], ascending: i % 3 == 0)
        }
        let requests = [
            FetchRequest("Item", filter: manyOr), FetchRequest("Item", filter: manyAnd),
            FetchRequest("Item", filter: manyIn), FetchRequest("Item", filter: deep),
            FetchRequest("Item", filter: manyOr && Field("flag") == true),
            FetchRequest("Item", sort: sortKeys),
        ]
        try store.read { reader in
            for request in requests {
                let expected = Oracle.answer(request, over: stored, primaryKey: "id")
                c.expect(try reader.fetch(request) == expected, "large request on \(c.backend.name)")
                c.expectEqual(try reader.count(request), expected.count, "count of a large request")
            }
        }
        let tooDeep = Filter.not(deep)
        let tooMany = Filter.or((0...Limits.maxFilterTerms).map { Field("score") == .int(Int64($0)) })
        let tooManyValues = Field("id").among((0...Limits.maxFilterTerms).map { .int(Int64($0)) })
        let tooManySortKeys = sortKeys + [.ascending("name")]
        for request in [
            FetchRequest("Item", filter: tooDeep), FetchRequest("Item", filter: tooMany),
            FetchRequest("Item", filter: tooManyValues), FetchRequest("Item", sort: tooManySortKeys),
        ] {
            c.expectError(.limitExceeded, naming: "Item", "for a request past the limits") {
                _ = try store.read { try $0.fetch(request) }
            }
            c.expectError(.limitExceeded, naming: "Item", "for a delete past the limits") {
                try store.writeSync { _ = try $0.delete(request) }
            }
        }
    }

    static func nestedReadsJoinTheEnclosingTransaction(_ c: ConformanceContext) throws {
        let store = try c.open()
        try Fixtures.load(Fixtures.items(10), into: store)
        guard let seen = c.withinDeadline(30, "nested reads", { try nestedReads(store) }) else { return }
        c.expectEqual(seen.deepCount, 10, "a read nested 200 deep on \(c.backend.name)")
        c.expect(seen.writeCommitted, "a write commits while a read is open on \(c.backend.name)")
        c.expectEqual(seen.innerCount, seen.outerCount, "a nested read sees the enclosing snapshot")
        c.expect(seen.ownWriteSeen, "a read inside a write block sees the block's uncommitted write")
        c.expectEqual(seen.childCount, 12, "a child read inside a parent read")
    }

    static func sixteenThreadsHoldReadsAtOnce(_ c: ConformanceContext) throws {
        let store = try c.open()
        try Fixtures.load(Fixtures.items(10), into: store)
        c.expectEqual(concurrentReaders(store, count: 16), 16, "reads open at once on \(c.backend.name)")
    }

    static func namesThatDifferOnlyByCaseOrAreReservedAreRefused(_ c: ConformanceContext) throws {
        let id = Attribute("id", .int)
        let refused: [(String, Schema)] = [
            (
                "entities Item and item",
                Schema(
                    version: 1,
                    entities: [
                        EntitySchema("Item", primaryKey: "id", attributes: [id]),
                        EntitySchema("item", primaryKey: "id", attributes: [id]),
                    ])
            ),
            (
                "attributes a and A",
                Schema(
                    version: 1,
                    entities: [
                        EntitySchema(
                            "E", primaryKey: "id",
                            attributes: [id, Attribute("a", .int), Attribute("A", .int)])
                    ])
            ),
            (
                "indexes ix and IX",
                Schema(
                    version: 1,
                    entities: [
                        EntitySchema(
                            "E", primaryKey: "id", attributes: [id, Attribute("a", .int)],
                            indexes: [Index("ix", on: ["a"]), Index("IX", on: ["id"])])
                    ])
            ),
            (
                "entity sqlite_stat",
                Schema(
                    version: 1,
                    entities: [
                        EntitySchema("sqlite_stat", primaryKey: "id", attributes: [id])
                    ])
            ),
            (
                "entity SQLITE_x",
                Schema(
                    version: 1,
                    entities: [
                        EntitySchema("SQLITE_x", primaryKey: "id", attributes: [id])
                    ])
            ),
            (
                "entity _DS_meta",
                Schema(
                    version: 1,
                    entities: [
                        EntitySchema("_DS_meta", primaryKey: "id", attributes: [id])
                    ])
            ),
            (
                "attribute _Ds",
                Schema(
                    version: 1,
                    entities: [
                        EntitySchema("E", primaryKey: "id", attributes: [id, Attribute("_Ds", .int)])
                    ])
            ),
        ]
        for (i, (what, schema)) in refused.enumerated() {
            c.expectError(.invalidArgument, "for \(what) on \(c.backend.name)") {
                _ = try c.open(schema, name: "refused\(i)")
            }
        }
        let accepted = Schema(
            version: 1,
            entities: [
                EntitySchema(
                    "Item", primaryKey: "item",
                    attributes: [Attribute("item", .int), Attribute("Items", .int)],
                    indexes: [Index("item", on: ["Items"])]),
                EntitySchema(
                    "Other", primaryKey: "id", attributes: [id], indexes: [Index("item", on: ["id"])]),
            ])
        let store = try c.open(accepted, name: "accepted")
        try store.writeSync { try $0.insert(["item": 1, "Items": 2], into: "Item") }
        c.expectEqual(
            try store.read { try $0.count(FetchRequest("Item", filter: Field("Items") == 2)) }, 1)
    }

    static func requestsWithThousandsOfTermsAnswerAndPastTheLimitsFailAlike(_ c: ConformanceContext) throws {
        try largeRequests(c)
    }

    static func metadataKeysCompareByBytes(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { writer in
            try writer.setMetadata([1], forKey: "\u{E9}")
            try writer.setMetadata([2], forKey: "e\u{301}")
        }
        c.expectEqual(try store.read { try $0.metadata(forKey: "\u{E9}") }, [1])
        c.expectEqual(try store.read { try $0.metadata(forKey: "e\u{301}") }, [2])
        let child = try store.makeChild()
        try child.writeSync { try $0.setMetadata([3], forKey: "e\u{301}") }
        c.expectEqual(
            try child.read { try $0.metadata(forKey: "\u{E9}") }, [1], "child keeps the other key")
        try store.merge(child)
        c.expectEqual(try store.read { try $0.metadata(forKey: "\u{E9}") }, [1])
        c.expectEqual(try store.read { try $0.metadata(forKey: "e\u{301}") }, [3])
    }

    static func reservedMetadataKeysCannotBeWritten(_ c: ConformanceContext) throws {
        var store = try c.open(name: "reserved")
        for key in [
            "datastore.schema", "datastore.format", "datastore.migration.incomplete", "datastore.x",
        ] {
            c.expectError(.invalidArgument, naming: key, "writing \(key)") {
                try store.writeSync { try $0.setMetadata([0], forKey: key) }
            }
            c.expectError(.invalidArgument, naming: key, "deleting \(key)") {
                try store.writeSync { try $0.setMetadata(nil, forKey: key) }
            }
            let child = try store.makeChild()
            c.expectError(.invalidArgument, naming: key, "writing \(key) in a child") {
                try child.writeSync { try $0.setMetadata([0], forKey: key) }
            }
        }
        try store.close()
        store = try c.open(nil, name: "reserved")
        c.expectEqual(try store.read { try $0.count(FetchRequest("Item")) }, 0, "the store still opens")
    }

    static func aChildThatSwappedUniqueValuesMerges(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { writer in
            try writer.insert(["id": 1, "name": "a", "code": "x"], into: "Item")
            try writer.insert(["id": 2, "name": "b", "code": "y"], into: "Item")
            try writer.insert(["id": 3, "name": "c", "code": "z"], into: "Item")
        }
        let child = try store.makeChild()
        try child.writeSync { writer in
            try writer.update("Item", key: 1, set: ["code": .null])
            try writer.update("Item", key: 3, set: ["code": "x"])
            try writer.update("Item", key: 2, set: ["code": "z"])
            try writer.update("Item", key: 1, set: ["code": "y"])
        }
        let report = try store.merge(child)
        c.expectEqual(report.updated, 3)
        let codes = try store.read { try $0.fetch(FetchRequest("Item")) }.map(\.["code"])
        c.expectEqual(codes, ["y", "z", "x"])
    }

    static let all: [ConformanceCase] = [
        ConformanceCase(
            "Edge store rules", "nestedReadsJoinTheEnclosingTransaction",
            nestedReadsJoinTheEnclosingTransaction),
        ConformanceCase("Edge store rules", "sixteenThreadsHoldReadsAtOnce", sixteenThreadsHoldReadsAtOnce),
        ConformanceCase(
            "Edge store rules", "insertingAnExistingKeyIsKeyExistsEvenWhenAUniqueValueAlsoClashes"
        ) { c in
            let store = try c.open(EdgeDomain.schema, name: "edge")
            var rng = SplitMix64(seed: 4)
            for entity in EdgeDomain.entityNames {
                let key = EdgeDomain.key(for: entity, &rng)
                var item = EdgeDomain.item(entity, key: key, &rng)
                item["u"] = "taken"
                try store.writeSync { try $0.insert(item, into: entity) }
                c.expectError(.keyExists, naming: entity, "re-inserting \(entity) \(key)") {
                    try store.writeSync { try $0.insert(item, into: entity) }
                }
                var other = EdgeDomain.item(entity, key: EdgeDomain.key(for: entity, &rng), &rng)
                other["u"] = "taken"
                c.expectError(.uniqueViolation, naming: entity, "a second \(entity) with u = taken") {
                    try store.writeSync { try $0.insert(other, into: entity) }
                }
            }
        },
        ConformanceCase(
            "Edge store rules", "namesThatDifferOnlyByCaseOrAreReservedAreRefused",
            namesThatDifferOnlyByCaseOrAreReservedAreRefused),
        ConformanceCase(
            "Edge store rules", "requestsWithThousandsOfTermsAnswerAndPastTheLimitsFailAlike",
            requestsWithThousandsOfTermsAnswerAndPastTheLimitsFailAlike),
        ConformanceCase("Edge store rules", "metadataKeysCompareByBytes", metadataKeysCompareByBytes),
        ConformanceCase(
            "Edge store rules", "reservedMetadataKeysCannotBeWritten", reservedMetadataKeysCannotBeWritten),
        ConformanceCase(
            "Edge store rules", "aChildThatSwappedUniqueValuesMerges", aChildThatSwappedUniqueValuesMerges),
    ]
}
