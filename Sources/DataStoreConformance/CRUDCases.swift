import DataStoreAPI
import Foundation

enum CRUDCases {
    static func insertThenGetReturnsTheItem(_ c: ConformanceContext) throws {
        let store = try c.open()
        let item = Fixtures.items(1)[0]
        try store.writeSync { try $0.insert(item, into: "Item") }
        let got = try store.read { try $0.get("Item", key: item["id"]) }
        c.expectEqual(got, item)
    }

    static func getOfMissingKeyReturnsNil(_ c: ConformanceContext) throws {
        let store = try c.open()
        c.expect(try store.read { try $0.get("Item", key: 42) } == nil)
        c.expect(try store.read { try $0.get("Keyed", key: "nope") } == nil)
    }

    static func insertOfExistingKeyThrowsKeyExists(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { try $0.insert(["key": "a"], into: "Keyed") }
        c.expectError(.keyExists, naming: "Keyed") {
            try store.writeSync { try $0.insert(["key": "a", "value": 2], into: "Keyed") }
        }
        c.expectEqual(try store.read { try $0.get("Keyed", key: "a")?["value"] }, .int(0))
    }

    static func saveInsertsThenReplaces(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { try $0.save(["key": "a", "value": 1], into: "Keyed") }
        try store.writeSync { try $0.save(["key": "a", "value": 2], into: "Keyed") }
        let all = try store.read { try $0.fetch(FetchRequest("Keyed")) }
        c.expectEqual(all, [["key": "a", "value": 2, "note": .null]])
    }

    static func updateChangesOnlyNamedAttributes(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { try $0.insert(["key": "a", "value": 1, "note": "n"], into: "Keyed") }
        let updated = try store.writeSync { try $0.update("Keyed", key: "a", set: ["value": 5]) }
        c.expectEqual(updated, ["key": "a", "value": 5, "note": "n"])
        c.expectEqual(try store.read { try $0.get("Keyed", key: "a") }, updated)
    }

    static func updateOfMissingKeyThrowsNotFound(_ c: ConformanceContext) throws {
        let store = try c.open()
        c.expectError(.notFound, naming: "Keyed") {
            try store.writeSync { w -> Record in try w.update("Keyed", key: "missing", set: ["value": 1]) }
        }
    }

    static func deleteThenGetReturnsNil(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { try $0.insert(["key": "a"], into: "Keyed") }
        c.expect(try store.writeSync { try $0.delete("Keyed", key: "a") }, "first delete finds the item")
        c.expect(try !store.writeSync { try $0.delete("Keyed", key: "a") }, "second delete finds nothing")
        c.expect(try store.read { try $0.get("Keyed", key: "a") } == nil)
    }

    static func deleteMatchingRequestDeletesOnlyMatches(_ c: ConformanceContext) throws {
        let store = try c.open()
        let items = Fixtures.items(60)
        try Fixtures.load(items, into: store)
        let filter = Field("score") > 0
        let deleted = try store.writeSync { try $0.delete(FetchRequest("Item", filter: filter)) }
        let expected = items.filter { !Oracle.matches(filter, $0) }
        c.expectEqual(deleted, items.count - expected.count)
        let left = try store.read { try $0.fetch(FetchRequest("Item")) }
        c.expectEqual(left, Oracle.answer(FetchRequest("Item"), over: expected, primaryKey: "id"))
    }

    static func deleteWithSortAndLimitDeletesThatPage(_ c: ConformanceContext) throws {
        let store = try c.open()
        let items = Fixtures.items(40)
        try Fixtures.load(items, into: store)
        let request = FetchRequest("Item", sort: [.descending("name")], offset: 3, limit: 5)
        let doomed = Oracle.answer(request, over: items, primaryKey: "id")
        c.expectEqual(try store.writeSync { try $0.delete(request) }, 5)
        for item in doomed { c.expect(try store.read { try $0.get("Item", key: item["id"]) } == nil) }
        c.expectEqual(try store.read { try $0.count(FetchRequest("Item")) }, 35)
    }

    static func deleteAllEmptiesOnlyThatEntity(_ c: ConformanceContext) throws {
        let store = try c.open()
        try Fixtures.load(Fixtures.items(20), into: store)
        try store.writeSync { try $0.insert(["key": "k"], into: "Keyed") }
        c.expectEqual(try store.writeSync { try $0.deleteAll("Item") }, 20)
        c.expectEqual(try store.read { try $0.count(FetchRequest("Item")) }, 0)
        c.expectEqual(try store.read { try $0.count(FetchRequest("Keyed")) }, 1)
    }

    static func missingAttributesTakeDefaultsOrNull(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { try $0.insert(["key": "a"], into: "Keyed") }
        c.expectEqual(
            try store.read { try $0.get("Keyed", key: "a") }, ["key": "a", "value": 0, "note": .null])
    }

    static func scanStreamsEveryItemInKeyOrderInPages(_ c: ConformanceContext) throws {
        let store = try c.open()
        let items = Fixtures.items(53)
        try Fixtures.load(items, into: store)
        var seen: [Record] = []
        var cursor: Value? = nil
        while true {
            let page = try store.read { try $0.scan("Item", after: cursor, limit: 10) }
            seen += page
            guard page.count == 10, let last = page.last else { break }
            cursor = last["id"]
        }
        c.expectEqual(seen, Oracle.answer(FetchRequest("Item"), over: items, primaryKey: "id"))
        c.expectEqual(try store.read { try $0.scan("Item", after: .int(1_000), limit: 10) }, [])
    }

    /// `scan(_:after:limit:into:)` reads each page into a buffer the caller keeps from page to
    /// page (a backend may refill its records in place): every page equals the page `scan`
    /// returns, whatever the buffer held before (a record of no entity, more or fewer records
    /// than the page), inside a write block with its own writes too; records kept from an
    /// earlier page, and changed copies of them, stay what they were.
    static func pagesScannedIntoAKeptBufferEqualFreshPages(_ c: ConformanceContext) throws {
        let store = try c.open()
        try Fixtures.load(Fixtures.items(211, seed: 13), into: store)
        func pages(_ reader: ReadAccessor, _ what: String) throws {
            for limit in [1, 7, 50, 1_000] {
                var page: [Record] = [["stray": 1], ["stray": 2]]
                var after: Value? = nil
                var kept: [(page: [Record], expected: [Record])] = []
                var changed: [Record] = []
                var count = 0
                while true {
                    let expected = try reader.scan("Item", after: after, limit: limit)
                    try reader.scan("Item", after: after, limit: limit, into: &page)
                    c.expectEqual(page, expected, "page after \(after.map { "\($0)" } ?? "the start"), limit \(limit), \(what)")
                    if page != expected { return }
                    if kept.count % 2 == 0 { kept.append((page, expected)) }
                    if var copy = page.first {
                        copy["name"] = "changed"
                        changed.append(copy)
                    }
                    count += page.count
                    guard let last = expected.last else { break }
                    after = last["id"]
                }
                c.expectEqual(count, try reader.count(FetchRequest("Item")), "items paged with limit \(limit), \(what)")
                c.expect(kept.allSatisfy { $0.page == $0.expected }, "pages kept while later ones were read, \(what)")
                c.expect(changed.allSatisfy { $0["name"] == "changed" }, "changed copies keep their change, \(what)")
                // A page of another entity's records, refilled with this one's.
                var keyed: [Record] = [["key": "a", "value": 1, "note": .null]]
                try reader.scan("Item", limit: 3, into: &keyed)
                c.expectEqual(keyed, try reader.scan("Item", limit: 3), "a buffer of another entity's records, \(what)")
            }
        }
        try store.read { try pages($0, "in a read") }
        try store.writeSync { writer in
            try writer.insert(["id": 5_000, "name": "late", "score": 1], into: "Item")
            _ = try writer.delete("Item", key: try writer.scan("Item", limit: 1)[0]["id"])
            try pages(writer, "in a write after its own writes")
        }
    }

    static func intKeysEnumerateInSignedOrder(_ c: ConformanceContext) throws {
        let store = try c.open()
        let ids: [Int64] = [5, -1, .max, 0, .min, -300, 256]
        try store.writeSync { w in
            for id in ids { try w.insert(["id": .int(id), "name": "n"], into: "Item") }
        }
        let got = try store.read { try $0.fetch(FetchRequest("Item")).map(\.["id"]) }
        c.expectEqual(got, ids.sorted().map(Value.int))
    }

    static func stringAndUUIDKeysEnumerateInByteOrder(_ c: ConformanceContext) throws {
        let store = try c.open()
        let keys = ["b", "a", "B", "\u{E9}", "e\u{301}", "", "a\u{0}", "\u{1F600}", "z"]
        try store.writeSync { w in for k in keys { try w.insert(["key": .string(k)], into: "Keyed") } }
        let got = try store.read { try $0.fetch(FetchRequest("Keyed")).map(\.["key"]) }
        let expected = keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        c.expectEqual(got, expected.map(Value.string))
        let uuids = (0..<20).map { _ in UUID() }
        try store.writeSync { w in for u in uuids { try w.insert(["id": .uuid(u)], into: "Ident") } }
        let gotUUIDs = try store.read { try $0.fetch(FetchRequest("Ident")).map(\.["id"]) }
        c.expectEqual(gotUUIDs, uuids.sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) }.map(Value.uuid))
    }

    static func firstAndCountFollowTheRequest(_ c: ConformanceContext) throws {
        let store = try c.open()
        let items = Fixtures.items(50)
        try Fixtures.load(items, into: store)
        let request = FetchRequest(
            "Item", filter: Field("score") >= 0, sort: [.descending("score")], offset: 2)
        let expected = Oracle.answer(request, over: items, primaryKey: "id")
        c.expectEqual(try store.read { try $0.first(request) }, expected.first)
        c.expectEqual(try store.read { try $0.count(request) }, expected.count)
        var limited = request
        limited.limit = 3
        c.expectEqual(try store.read { try $0.count(limited) }, min(3, expected.count))
    }

    static func uniqueIndexRejectsDuplicateAndAllowsNulls(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { w in
            try w.insert(["id": 1, "name": "a", "code": "X"], into: "Item")
            try w.insert(["id": 2, "name": "b"], into: "Item")
            try w.insert(["id": 3, "name": "c"], into: "Item")
        }
        c.expectError(.uniqueViolation, naming: "byCode") {
            try store.writeSync { try $0.insert(["id": 4, "name": "d", "code": "X"], into: "Item") }
        }
        c.expectError(.uniqueViolation, naming: "byCode") {
            _ = try store.writeSync { try $0.update("Item", key: 2, set: ["code": "X"]) }
        }
        c.expectEqual(try store.read { try $0.count(FetchRequest("Item")) }, 3)
        c.expect(try store.read { try $0.get("Item", key: 4) } == nil)
    }

    static func uniqueIndexAllowsRewritingTheSameItemAndReusingFreedValues(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { try $0.insert(["id": 1, "name": "a", "code": "X"], into: "Item") }
        try store.writeSync { try $0.save(["id": 1, "name": "b", "code": "X"], into: "Item") }
        try store.writeSync { w in
            try w.update("Item", key: 1, set: ["code": "Y"])
            try w.insert(["id": 2, "name": "c", "code": "X"], into: "Item")
        }
        c.expectEqual(try store.read { try $0.fetch(FetchRequest("Item")).map(\.["code"]) }, ["Y", "X"])
    }

    static func metadataIsTransactional(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { try $0.setMetadata([1, 2, 3], forKey: "app.cursor") }
        c.expectEqual(try store.read { try $0.metadata(forKey: "app.cursor") }, [1, 2, 3])
        struct Abort: Error {}
        _ = try? store.writeSync { w -> Void in
            try w.setMetadata([9], forKey: "app.cursor")
            throw Abort()
        }
        c.expectEqual(try store.read { try $0.metadata(forKey: "app.cursor") }, [1, 2, 3])
        try store.writeSync { try $0.setMetadata(nil, forKey: "app.cursor") }
        c.expect(try store.read { try $0.metadata(forKey: "app.cursor") } == nil)
    }

    /// Metadata keys are compared by their bytes, whatever they hold: NUL, the bytes a backend
    /// may use to escape (0x01), unnormalized Unicode, and keys that are prefixes of others.
    static func metadataKeysHoldAnyString(_ c: ConformanceContext) throws {
        let store = try c.open()
        let keys = ["a\u{0}b", "a\u{0}", "a", "a\u{1}", "\u{1}\u{2}", "\u{1}\u{1}", "\u{0}", "\u{E9}", "e\u{301}",
                    "app.cursor\u{0}"]
        try store.writeSync { w in
            for (n, key) in keys.enumerated() { try w.setMetadata([UInt8(n), 0, 0xFF], forKey: key) }
        }
        try store.read { r in
            for (n, key) in keys.enumerated() {
                c.expectEqual(try r.metadata(forKey: key), [UInt8(n), 0, 0xFF], "\(key.unicodeScalars.map(\.value))")
            }
            c.expect(try r.metadata(forKey: "a\u{0}c") == nil)
        }
        try store.writeSync { try $0.setMetadata(nil, forKey: "a\u{0}") }
        c.expect(try store.read { try $0.metadata(forKey: "a\u{0}") } == nil)
        c.expectEqual(try store.read { try $0.metadata(forKey: "a\u{0}b") }, [0, 0, 0xFF])
    }

    /// `insert(contentsOf:)` is inserting each item in order: a clean batch stores every item; a
    /// batch with a taken key, a key given twice, a unique value held or repeated or a value of
    /// the wrong type fails at the first item that cannot be stored, with those before it stored
    /// (caught inside the block) and none after it.
    static func insertContentsOfIsInsertingEachInOrder(_ c: ConformanceContext) throws {
        let store = try c.open()
        let items = (1...300).map { i -> Record in
            let code: Value = i % 2 == 0 ? .string("c\(i)") : .null
            let ratio: Value = i == 7 ? .double(-0.0) : .double(Double(i))
            var record = Record()
            record["id"] = .int(Int64(i))
            record["name"] = .string("n\(i)")
            record["code"] = code
            record["ratio"] = ratio
            return record
        }
        try store.writeSync { try $0.insert(contentsOf: items, into: "Item") }
        let given = { (records: [Record]) in records.map { [$0["id"], $0["name"], $0["code"], $0["ratio"]] } }
        c.expectEqual(given(try store.read { try $0.fetch(FetchRequest("Item")) }), given(items))
        struct Case {
            var what: String
            var batch: [Record]
            var code: StoreError.Code
            var stored: Int
        }
        let cases = [
            Case(what: "a taken key", batch: [["id": 1_001, "name": "a"], ["id": 5, "name": "taken"],
                                              ["id": 1_002, "name": "b"]], code: .keyExists, stored: 1),
            Case(what: "a key given twice", batch: [["id": 2_001, "name": "a"], ["id": 2_002, "name": "b"],
                                                    ["id": 2_001, "name": "again"], ["id": 2_003, "name": "c"]],
                 code: .keyExists, stored: 2),
            Case(what: "a unique value held", batch: [["id": 3_001, "name": "a", "code": "c4"], ["id": 3_002, "name": "b"]],
                 code: .uniqueViolation, stored: 0),
            Case(what: "a unique value repeated", batch: [["id": 4_001, "name": "a", "code": "new"],
                                                          ["id": 4_002, "name": "b", "code": "new"],
                                                          ["id": 4_003, "name": "c"]],
                 code: .uniqueViolation, stored: 1),
            Case(what: "a value of the wrong type", batch: [["id": 5_001, "name": "a"], ["id": 5_002, "name": "b"],
                                                            ["id": 5_003, "name": .int(3)], ["id": 5_004, "name": "d"]],
                 code: .typeMismatch, stored: 2),
            // Past the first of the batches that the items go to the backend in.
            Case(what: "a taken key after 10,200 items", batch: (0..<10_500).map { i -> Record in
                ["id": .int(i == 10_200 ? 5 : Int64(100_000 + i)), "name": .string("bulk \(i)")]
            }, code: .keyExists, stored: 10_200),
            // A value refused while the batch before it is being stored (batches after the first
            // are checked ahead), in the third batch and at the first item of the second.
            Case(what: "a value of the wrong type after 20,100 items", batch: (0..<20_500).map { i -> Record in
                ["id": .int(Int64(200_000 + i)), "name": i == 20_100 ? .int(1) : .string("bulk \(i)")]
            }, code: .typeMismatch, stored: 20_100),
            Case(what: "a value of the wrong type after 10,000 items", batch: (0..<10_500).map { i -> Record in
                ["id": .int(Int64(300_000 + i)), "name": i == 10_000 ? .int(1) : .string("bulk \(i)")]
            }, code: .typeMismatch, stored: 10_000),
            // Refused by the backend while the next batch is being checked.
            Case(what: "a taken key after 5,000 items of 20,500", batch: (0..<20_500).map { i -> Record in
                ["id": .int(i == 5_000 ? 5 : Int64(400_000 + i)), "name": .string("bulk \(i)")]
            }, code: .keyExists, stored: 5_000),
        ]
        for testCase in cases {
            let before = try store.read { try $0.count(FetchRequest("Item")) }
            try store.writeSync { w in
                c.expectError(testCase.code, testCase.what) { try w.insert(contentsOf: testCase.batch, into: "Item") }
            }
            c.expectEqual(try store.read { try $0.count(FetchRequest("Item")) }, before + testCase.stored, testCase.what)
            let stored = testCase.batch.prefix(testCase.stored)
            for record in stored.prefix(3) + stored.suffix(3) {
                c.expectEqual(try store.read { try $0.get("Item", key: record["id"])?["name"] }, record["name"],
                              testCase.what)
            }
        }
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("CRUD", "insertContentsOfIsInsertingEachInOrder", insertContentsOfIsInsertingEachInOrder),
        ConformanceCase("CRUD", "insertThenGetReturnsTheItem", insertThenGetReturnsTheItem),
        ConformanceCase("CRUD", "getOfMissingKeyReturnsNil", getOfMissingKeyReturnsNil),
        ConformanceCase("CRUD", "insertOfExistingKeyThrowsKeyExists", insertOfExistingKeyThrowsKeyExists),
        ConformanceCase("CRUD", "saveInsertsThenReplaces", saveInsertsThenReplaces),
        ConformanceCase("CRUD", "updateChangesOnlyNamedAttributes", updateChangesOnlyNamedAttributes),
        ConformanceCase("CRUD", "updateOfMissingKeyThrowsNotFound", updateOfMissingKeyThrowsNotFound),
        ConformanceCase("CRUD", "deleteThenGetReturnsNil", deleteThenGetReturnsNil),
        ConformanceCase(
            "CRUD", "deleteMatchingRequestDeletesOnlyMatches", deleteMatchingRequestDeletesOnlyMatches),
        ConformanceCase(
            "CRUD", "deleteWithSortAndLimitDeletesThatPage", deleteWithSortAndLimitDeletesThatPage),
        ConformanceCase("CRUD", "deleteAllEmptiesOnlyThatEntity", deleteAllEmptiesOnlyThatEntity),
        ConformanceCase("CRUD", "missingAttributesTakeDefaultsOrNull", missingAttributesTakeDefaultsOrNull),
        ConformanceCase(
            "CRUD", "scanStreamsEveryItemInKeyOrderInPages", scanStreamsEveryItemInKeyOrderInPages),
        ConformanceCase(
            "CRUD", "pagesScannedIntoAKeptBufferEqualFreshPages", pagesScannedIntoAKeptBufferEqualFreshPages),
        ConformanceCase("CRUD", "intKeysEnumerateInSignedOrder", intKeysEnumerateInSignedOrder),
        ConformanceCase(
            "CRUD", "stringAndUUIDKeysEnumerateInByteOrder", stringAndUUIDKeysEnumerateInByteOrder),
        ConformanceCase("CRUD", "firstAndCountFollowTheRequest", firstAndCountFollowTheRequest),
        ConformanceCase(
            "CRUD", "uniqueIndexRejectsDuplicateAndAllowsNulls", uniqueIndexRejectsDuplicateAndAllowsNulls),
        ConformanceCase(
            "CRUD", "uniqueIndexAllowsRewritingTheSameItemAndReusingFreedValues",
            uniqueIndexAllowsRewritingTheSameItemAndReusingFreedValues),
        ConformanceCase("CRUD", "metadataIsTransactional", metadataIsTransactional),
        ConformanceCase("CRUD", "metadataKeysHoldAnyString", metadataKeysHoldAnyString),
    ]
}
