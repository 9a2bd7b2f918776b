import DataStoreAPI
import Foundation

enum QueryCases {
    static let uuid1 = Fixtures.refs[0]
    static let filters: [Filter] = [
        .all,
        Field("name") == "alpha", Field("name") != "alpha", Field("name") < "beta",
        Field("name") >= "e\u{301}",
        Field("name") > "\u{E9}", Field("name").among(["alpha", "\u{E9}", ""]), Field("name").hasPrefix("a"),
        Field("name").hasPrefix(""), Field("name").contains("p"), Field("name").contains("\u{0}"),
        Field("name").hasPrefix("A"), Field("name").contains("PP"),
        Field("score") == 3, Field("score") != 3, Field("score") < 0, Field("score") <= 0, Field("score") > 2,
        Field("score") >= -1, Field("score") == nil, Field("score") != nil,
        Field("score").among([1, 2, nil]),
        Field("score").isNull, Field("score") < nil,
        Field("ratio") == 0.0, Field("ratio") == -0.0, Field("ratio") < 0,
        Field("ratio") > .double(-.infinity),
        Field("ratio") >= 2.5, Field("ratio") <= 1e-300,
        Field("flag") == true, Field("flag") != false, Field("flag") < true,
        Field("when") < .date(Timestamp(microsecondsSinceEpoch: 0)), Field("ref") == uuid1,
        Field("ref") > uuid1,
        Field("blob") == .bytes([]), Field("blob") > .bytes([0]),
        Field("label").isNull, Field("label").hasPrefix("A"), Field("code") == "code-3", Field("code") != nil,
        !(Field("score") < 0), !(Field("name") == "alpha") && Field("score") > 0,
        Field("score") == 1 || Field("flag") == true, !(Field("ratio") > 0 || Field("label").isNull),
        .and([]), .or([]), !(Field("score").among([1, nil])),
        .matching(["score": [1, 2], "flag": true]), .matching(["label": nil, "score": .range(-2...2)]),
    ]
    static let sorts: [[SortKey]] = [
        [], [.ascending("name")], [.descending("name")], [.ascending("label", caseInsensitive: true)],
        [.descending("label", caseInsensitive: true)], [.ascending("score")], [.descending("score")],
        [.ascending("ratio")], [.descending("flag"), .ascending("name")], [.ascending("when")],
        [.ascending("ref")],
        [.ascending("score"), .descending("label", caseInsensitive: true)], [.descending("blob")],
        [.ascending("label")], [.descending("code")],
    ]
    static let offsets = [0, 1, 7, 1_000]
    static let limits: [Int?] = [nil, 0, 1, 5, 50]

    /// Loads fixture items and compares every request's answer with the oracle's.
    static func compare(_ c: ConformanceContext, count: Int = 120, _ requests: [FetchRequest]) throws {
        let store = try c.open()
        let items = Fixtures.items(count, seed: 3)
        try Fixtures.load(items, into: store)
        let stored = try store.read { try $0.fetch(FetchRequest("Item")) }
        try store.read { reader in
            for request in requests {
                let expected = Oracle.answer(request, over: stored, primaryKey: "id")
                let got = try reader.fetch(request)
                c.expect(
                    got == expected,
                    "ids \(got.map(\.["id"])) expected \(expected.map(\.["id"])): fetch \(request.filter) "
                        + "sort \(request.sort) offset \(request.offset) limit \(request.limit.map(String.init) ?? "none") on \(c.backend.name)")
                if got != expected { return }
                // The visitor answers the same, and the records it handed over and that were kept
                // stay as they were (its storage is reused only while no copy is alive).
                var visited: [Record] = []
                try reader.forEach(request) { visited.append($0) }
                c.expect(
                    visited == expected,
                    "forEach ids \(visited.map(\.["id"])) expected \(expected.map(\.["id"])): \(request.filter) "
                        + "sort \(request.sort) offset \(request.offset) limit \(request.limit.map(String.init) ?? "none") on \(c.backend.name)")
                if visited != expected { return }
                // A visit hands over the same items as rows read in place; copied out, they equal
                // the records.
                var rows: [Record] = []
                try reader.visit(request) { row in rows.append(row.record()) }
                c.expect(
                    rows == expected,
                    "visit ids \(rows.map(\.["id"])) expected \(expected.map(\.["id"])): \(request.filter) "
                        + "sort \(request.sort) offset \(request.offset) limit \(request.limit.map(String.init) ?? "none") on \(c.backend.name)")
                if rows != expected { return }
            }
        }
    }

    /// A visit's row answers each typed accessor with the value a fetch returns, reads strings
    /// and bytes in place, and refuses a wrong name or type in a line naming it, on every
    /// backend; a visit inside a write block sees the block's writes.
    static func visitedRowsAnswerEveryAccessorAsAFetch(_ c: ConformanceContext) throws {
        let store = try c.open()
        try Fixtures.load(Fixtures.items(60, seed: 5), into: store)
        let stored = try store.read { try $0.fetch(FetchRequest("Item")) }
        try store.read { reader in
            var index = 0
            try reader.visit(FetchRequest("Item")) { row in
                let record = stored[index]
                index += 1
                for name in row.attributeNames {
                    let value = record[name]
                    let read = try row.value(name)
                    c.expect(read == value, "visit: \(name) is \(read), not \(value) on \(c.backend.name)")
                    c.expect(try row.isNull(name) == value.isNull, "visit: \(name) null on \(c.backend.name)")
                    switch value {
                    case .int(let i): c.expect(try row.int(name) == i, "visit: int \(name) on \(c.backend.name)")
                    case .double(let d):
                        c.expect(try row.double(name).bitPattern == d.bitPattern, "visit: double \(name) on \(c.backend.name)")
                    case .bool(let b): c.expect(try row.bool(name) == b, "visit: bool \(name) on \(c.backend.name)")
                    case .date(let t): c.expect(try row.date(name) == t, "visit: date \(name) on \(c.backend.name)")
                    case .uuid(let u): c.expect(try row.uuid(name) == u, "visit: uuid \(name) on \(c.backend.name)")
                    case .bytes(let b):
                        c.expect(try row.bytes(name) == b, "visit: bytes \(name) on \(c.backend.name)")
                        c.expect(try row.withBytes(name) { Array($0) } == b, "visit: withBytes \(name) on \(c.backend.name)")
                    case .string(let s):
                        // Byte for byte: "é" precomposed and decomposed stay two strings.
                        c.expect(Array(try row.string(name).utf8) == Array(s.utf8), "visit: string \(name) on \(c.backend.name)")
                        c.expect(try row.withUTF8(name) { Array($0) } == Array(s.utf8),
                                 "visit: withUTF8 \(name) on \(c.backend.name)")
                    case .null:
                        c.expectError(.typeMismatch, "visit: a typed read of null \(name) on \(c.backend.name)") {
                            _ = try row.int(name)
                        }
                    }
                }
                c.expectError(.unknownAttribute, naming: "nope", "visit: an unknown name on \(c.backend.name)") { _ = try row.value("nope") }
                c.expectError(.typeMismatch, naming: "name", "visit: a string read as an int on \(c.backend.name)") { _ = try row.int("name") }
                c.expectError(.typeMismatch, "visit: an int read as a string on \(c.backend.name)") { _ = try row.string("id") }
            }
            c.expect(index == stored.count, "visit handed over \(index) of \(stored.count) items on \(c.backend.name)")
        }
        // Inside a write block, the rows are the block's own view.
        try store.writeSync { writer in
            try writer.insert(["id": 10_000, "name": "written"], into: "Item")
            var names: [String] = []
            try writer.visit(FetchRequest("Item", filter: Field("id") == 10_000)) { names.append(try $0.string("name")) }
            c.expect(names == ["written"], "visit in a write block sees \(names) on \(c.backend.name)")
        }
    }

    /// `forEach` hands over every item in order while the visitor makes requests of its own (the
    /// same request included, which on SQLite would share the visitor's prepared statement),
    /// visits in a write block exactly the items there were before the block's own writes, and
    /// stops at what the visitor throws.
    /// A backend may refill one record per row of a visit; a record the visitor keeps must stay
    /// the row it was, whether it keeps every record, some, or a copy it changes.
    static func recordsKeptFromAVisitStayTheRowsVisited(_ c: ConformanceContext) throws {
        let store = try c.open()
        try Fixtures.load(Fixtures.items(200, seed: 12), into: store)
        let requests = [
            FetchRequest("Item"),
            FetchRequest("Item", filter: Field("id") > 0),
            FetchRequest("Item", filter: Field("name") != "", sort: [SortKey("score", ascending: false)]),
        ]
        try store.read { reader in
            for request in requests {
                let expected = try reader.fetch(request)
                var every: [Record] = []
                var everyThird: [Record] = []
                var changed: [Record] = []
                var position = 0
                try reader.forEach(request) { record in
                    every.append(record)
                    if position % 3 == 0 { everyThird.append(record) }
                    if position % 5 == 0 {
                        var copy = record
                        copy["name"] = "changed"
                        changed.append(copy)
                    }
                    position += 1
                }
                c.expectEqual(every, expected, "every record kept from a visit of \(request)")
                c.expectEqual(everyThird, expected.enumerated().filter { $0.offset % 3 == 0 }.map(\.element),
                              "every third record kept from a visit of \(request)")
                c.expectEqual(changed.count, (expected.count + 4) / 5, "changed copies of \(request)")
                c.expect(changed.allSatisfy { $0["name"] == "changed" }, "changed copies keep their change")
            }
        }
    }

    static func forEachStreamsAndToleratesRequestsAndWritesInsideItsVisitor(_ c: ConformanceContext) throws {
        let store = try c.open()
        let items = Fixtures.items(300, seed: 11)
        try Fixtures.load(items, into: store)
        let all = FetchRequest("Item")
        let positive = FetchRequest("Item", filter: Field("id") > 0)
        let expected = try store.read { try $0.fetch(all) }
        try store.read { reader in
            var visited: [Value] = []
            var inner = 0
            struct Runaway: Error {}
            try reader.forEach(all) { record in
                visited.append(record["id"])
                // A visit that restarts (its cursor reset by a nested request) fails, not hangs.
                if visited.count > expected.count { throw Runaway() }
                // The same requests again, nested: each answers in full.
                inner += try reader.fetch(all).count + (try reader.fetch(positive).count)
                var nested = 0
                try reader.forEach(positive) { _ in nested += 1 }
                inner += nested
                if try reader.get("Item", key: record["id"]) != record { inner = -1_000_000 }
            }
            c.expectEqual(visited, expected.map(\.["id"]), "outer visit order with nested requests")
            let positives = expected.filter { if case .int(let id) = $0["id"] { id > 0 } else { false } }.count
            c.expectEqual(inner, expected.count * (expected.count + 2 * positives), "nested requests answered in full")
        }
        // In a write block: deleting each visited item and inserting new ones does not change
        // what is visited.
        try store.writeSync { writer in
            var visited: [Value] = []
            try writer.forEach(all) { record in
                visited.append(record["id"])
                _ = try writer.delete("Item", key: record["id"])
                if case .int(let id) = record["id"] {
                    try writer.insert(["id": .int(id + 10_000), "name": "new"], into: "Item")
                }
            }
            c.expectEqual(visited, expected.map(\.["id"]), "a write block visits the items from before its writes")
        }
        c.expectEqual(try store.read { try $0.count(all) }, expected.count)
        c.expectEqual(try store.read { try $0.fetch(FetchRequest("Item", filter: Field("name") == "new")).count },
                      expected.count)
        // A throwing visitor stops the visit, and its error comes out unchanged.
        struct Stop: Error {}
        var handed = 0
        do {
            try store.read { reader in
                try reader.forEach(all) { _ in
                    handed += 1
                    if handed == 3 { throw Stop() }
                }
            }
            c.expect(false, "the visitor's error was not thrown")
        } catch is Stop {
            c.expectEqual(handed, 3, "the visit stopped at the error")
        }
        // A bad request is refused before any item is handed over.
        handed = 0
        do {
            try store.read { try $0.forEach(FetchRequest("Item", filter: Field("nope") == 1)) { _ in handed += 1 } }
            c.expect(false, "an unknown attribute was accepted")
        } catch let error as StoreError {
            c.expectEqual(error.code, .unknownAttribute)
            c.expectEqual(handed, 0)
        }
    }

    static func everyPredicateMatchesTheOracle(_ c: ConformanceContext) throws {
        try compare(c, filters.map { FetchRequest("Item", filter: $0) })
    }

    static func everySortMatchesTheOracle(_ c: ConformanceContext) throws {
        try compare(c, sorts.map { FetchRequest("Item", sort: $0) })
    }

    static func offsetsAndLimitsMatchTheOracle(_ c: ConformanceContext) throws {
        var requests: [FetchRequest] = []
        for sort in sorts {
            for offset in offsets {
                for limit in limits {
                    requests.append(FetchRequest("Item", sort: sort, offset: offset, limit: limit))
                }
            }
        }
        try compare(c, requests)
    }

    static func predicatesSortsOffsetsAndLimitsCombinedMatchTheOracle(_ c: ConformanceContext) throws {
        var requests: [FetchRequest] = []
        var rng = SplitMix64(seed: 11)
        for filter in filters {
            for sort in sorts {
                let offset = offsets[Int(rng.next() % UInt64(offsets.count))]
                let limit = limits[Int(rng.next() % UInt64(limits.count))]
                requests.append(
                    FetchRequest("Item", filter: filter, sort: sort, offset: offset, limit: limit))
            }
        }
        try compare(c, requests)
    }

    static func countsMatchTheOracle(_ c: ConformanceContext) throws {
        let store = try c.open()
        let items = Fixtures.items(120, seed: 3)
        try Fixtures.load(items, into: store)
        let stored = try store.read { try $0.fetch(FetchRequest("Item")) }
        for filter in filters {
            let expected = stored.filter { Oracle.matches(filter, $0) }.count
            let got = try store.read { try $0.count(FetchRequest("Item", filter: filter)) }
            c.expect(got == expected, "count \(got) expected \(expected) for \(filter)")
        }
    }

    static func pagesOverManyEqualSortKeysAreStableAndComplete(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { w in
            for i in 0..<97 {
                try w.insert(
                    ["id": .int(Int64(96 - i)), "name": "same", "score": .int(Int64(i % 2))],
                    into: "Item")
            }
        }
        for sort in [[SortKey.ascending("name")], [.descending("score")]] {
            var paged: [Record] = []
            for page in 0..<10 {
                paged += try store.read {
                    try $0.fetch(FetchRequest("Item", sort: sort, offset: page * 10, limit: 10))
                }
            }
            let whole = try store.read { try $0.fetch(FetchRequest("Item", sort: sort)) }
            c.expectEqual(paged, whole, "pages of \(sort)")
            c.expectEqual(Set(paged.map(\.["id"])).count, 97)
        }
    }

    static func nullComparesAsAValueInTwoValuedLogic(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { w in
            try w.insert(["id": 1, "name": "a", "score": 5], into: "Item")
            try w.insert(["id": 2, "name": "b", "score": 1], into: "Item")
            try w.insert(["id": 3, "name": "c"], into: "Item")
        }
        func ids(_ f: Filter) throws -> [Value] {
            try store.read { try $0.fetch(FetchRequest("Item", filter: f)).map(\.["id"]) }
        }
        c.expectEqual(try ids(Field("score") != 5), [2, 3], "!= matches null")
        c.expectEqual(try ids(!(Field("score") < 5)), [1, 3], "not simply inverts")
        c.expectEqual(try ids(Field("score") < 5), [2], "ordering with null is false")
        c.expectEqual(try ids(Field("score") == nil), [3])
        c.expectEqual(try ids(!(Field("score").among([5]))), [2, 3])
    }

    static func stringsSortByUTF8BytesAndFoldASCIIOnly(_ c: ConformanceContext) throws {
        let store = try c.open()
        let names = ["b", "B", "a", "\u{C9}", "\u{E9}", "Z", "e\u{301}", "\u{1F600}", "aB", "Ab"]
        try store.writeSync { w in
            for (i, n) in names.enumerated() {
                try w.insert(["id": .int(Int64(i)), "name": .string(n), "label": .string(n)], into: "Item")
            }
        }
        let byBytes = try store.read { try $0.fetch(FetchRequest("Item", sort: [.ascending("name")])) }
        let expected = names.map(Value.string).sorted { Oracle.order($0, $1, fold: false) < 0 }
        c.expectEqual(byBytes.map(\.["name"]), expected)
        c.expectEqual(byBytes.map(\.["id"]), [9, 1, 5, 2, 8, 0, 6, 3, 4, 7], "byte order, not Swift's <")
        let folded = try store.read {
            try $0.fetch(FetchRequest("Item", sort: [.ascending("label", caseInsensitive: true)]))
        }
        c.expectEqual(folded.map(\.["id"]), [2, 8, 9, 0, 1, 6, 5, 3, 4, 7], "NOCASE order, ties by id")
    }

    static func prefixAndContainsAreCaseSensitiveAndByteWise(_ c: ConformanceContext) throws {
        let store = try c.open()
        let names = ["Apple", "apple", "%_x", "a%b", "\u{E9}t\u{E9}", "e\u{301}t\u{E9}"]
        try store.writeSync { w in
            for (i, n) in names.enumerated() {
                try w.insert(["id": .int(Int64(i)), "name": .string(n)], into: "Item")
            }
        }
        func ids(_ f: Filter) throws -> [Value] {
            try store.read { try $0.fetch(FetchRequest("Item", filter: f)).map(\.["id"]) }
        }
        c.expectEqual(try ids(Field("name").hasPrefix("a")), [1, 3])
        c.expectEqual(try ids(Field("name").hasPrefix("%")), [2], "% is not a wildcard")
        c.expectEqual(try ids(Field("name").contains("_")), [2], "_ is not a wildcard")
        c.expectEqual(try ids(Field("name").contains("PP")), [])
        c.expectEqual(try ids(Field("name").hasPrefix("\u{E9}")), [4], "decomposed é is not a match")
        c.expectEqual(try ids(Field("name").contains("t\u{E9}")), [4, 5])
    }

    /// Equality, `in` and is-null on indexed attributes (`name`, `score`) after updates that move
    /// items between values (to null and back), deletes and reinserts, inside the write that made
    /// them and after it: an index that a backend keeps must follow every change.
    static func indexedEqualityFollowsUpdatesAndDeletes(_ c: ConformanceContext) throws {
        let store = try c.open()
        try Fixtures.load(Fixtures.items(60, seed: 5), into: store)
        let stored = try store.read { try $0.fetch(FetchRequest("Item")) }
        let keys = stored.map(\.["id"])
        let filters: [Filter] = [
            Field("score") == 1, Field("score") == 2, Field("score") == nil, Field("score").among([1, 2, 2, nil]),
            Field("score").isNull, Field("score").among([]), Field("name") == "alpha", Field("name") == "moved",
            Field("name").among(["moved", "alpha", "moved"]), Field("name").isNull,
            Field("score") == 2 && Field("name") == "moved", Field("score") == 1 && Field("flag") == true,
        ]
        func compare(_ reader: ReadAccessor, _ when: String) throws {
            let all = try reader.fetch(FetchRequest("Item"))
            for filter in filters {
                let request = FetchRequest("Item", filter: filter)
                let expected = Oracle.answer(request, over: all, primaryKey: "id").map(\.["id"])
                c.expectEqual(try reader.fetch(request).map(\.["id"]), expected, "\(filter) \(when)")
                c.expectEqual(try reader.count(request), expected.count, "count of \(filter) \(when)")
            }
        }
        try store.writeSync { w in
            for (i, key) in keys.enumerated() {
                switch i % 5 {
                case 0: _ = try w.update("Item", key: key, set: ["score": 2, "name": "moved"])
                case 1: _ = try w.update("Item", key: key, set: ["score": nil])
                case 2: _ = try w.delete("Item", key: key)
                default: continue
                }
            }
            try compare(w, "inside the write")
            // Back again: null to a value, a deleted key reinserted under another value.
            for (i, key) in keys.enumerated() where i % 10 == 1 { _ = try w.update("Item", key: key, set: ["score": 1]) }
            for (i, key) in keys.enumerated() where i % 10 == 2 {
                try w.insert(["id": key, "name": "alpha", "score": 2, "code": .string("again-\(i)")], into: "Item")
            }
        }
        try store.read { try compare($0, "after the write") }
        try store.writeSync { w in _ = try w.deleteAll("Item") }
        try store.read { try compare($0, "after deleting every item") }
    }

    static func negativeZeroEqualsZeroInFiltersAndSorts(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { w in
            try w.insert(["id": 1, "name": "a", "ratio": -0.0], into: "Item")
            try w.insert(["id": 2, "name": "b", "ratio": 0.0], into: "Item")
            try w.insert(["id": 3, "name": "c", "ratio": -1e-300], into: "Item")
        }
        let zeros = try store.read { try $0.fetch(FetchRequest("Item", filter: Field("ratio") == 0.0)) }
        c.expectEqual(zeros.map(\.["id"]), [1, 2])
        let sorted = try store.read { try $0.fetch(FetchRequest("Item", sort: [.descending("ratio")])) }
        c.expectEqual(sorted.map(\.["id"]), [1, 2, 3], "-0.0 and 0.0 tie, broken by key")
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("Queries", "everyPredicateMatchesTheOracle", everyPredicateMatchesTheOracle),
        ConformanceCase("Queries", "everySortMatchesTheOracle", everySortMatchesTheOracle),
        ConformanceCase("Queries", "offsetsAndLimitsMatchTheOracle", offsetsAndLimitsMatchTheOracle),
        ConformanceCase(
            "Queries", "predicatesSortsOffsetsAndLimitsCombinedMatchTheOracle",
            predicatesSortsOffsetsAndLimitsCombinedMatchTheOracle),
        ConformanceCase("Queries", "countsMatchTheOracle", countsMatchTheOracle),
        ConformanceCase("Queries", "indexedEqualityFollowsUpdatesAndDeletes", indexedEqualityFollowsUpdatesAndDeletes),
        ConformanceCase("Queries", "visitedRowsAnswerEveryAccessorAsAFetch", visitedRowsAnswerEveryAccessorAsAFetch),
        ConformanceCase(
            "Queries", "pagesOverManyEqualSortKeysAreStableAndComplete",
            pagesOverManyEqualSortKeysAreStableAndComplete),
        ConformanceCase(
            "Queries", "nullComparesAsAValueInTwoValuedLogic", nullComparesAsAValueInTwoValuedLogic),
        ConformanceCase(
            "Queries", "stringsSortByUTF8BytesAndFoldASCIIOnly", stringsSortByUTF8BytesAndFoldASCIIOnly),
        ConformanceCase(
            "Queries", "prefixAndContainsAreCaseSensitiveAndByteWise",
            prefixAndContainsAreCaseSensitiveAndByteWise),
        ConformanceCase(
            "Queries", "negativeZeroEqualsZeroInFiltersAndSorts", negativeZeroEqualsZeroInFiltersAndSorts),
        ConformanceCase(
            "Queries", "forEachStreamsAndToleratesRequestsAndWritesInsideItsVisitor",
            forEachStreamsAndToleratesRequestsAndWritesInsideItsVisitor),
        ConformanceCase(
            "Queries", "recordsKeptFromAVisitStayTheRowsVisited", recordsKeptFromAVisitStayTheRowsVisited),
    ]
}
