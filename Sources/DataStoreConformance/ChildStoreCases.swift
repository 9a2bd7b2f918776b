import DataStoreAPI
import Foundation

enum ChildStoreCases {
    static func keyed(_ store: any DataStore) throws -> [Record] {
        try store.read { try $0.fetch(FetchRequest("Keyed")) }
    }

    static func childWritesAreInvisibleToTheParentUntilMerged(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { try $0.insert(["key": "p", "value": 1], into: "Keyed") }
        let child = try store.makeChild()
        try child.writeSync { w in
            try w.insert(["key": "c", "value": 2], into: "Keyed")
            try w.update("Keyed", key: "p", set: ["value": 3])
        }
        c.expectEqual(try keyed(store).map(\.["value"]), [1])
        c.expectEqual(try keyed(child).map(\.["value"]), [2, 3])
        let report = try store.merge(child)
        c.expectEqual([report.inserted, report.updated, report.deleted], [1, 1, 0])
        c.expectEqual(try keyed(store).map(\.["value"]), [2, 3])
        c.expectEqual(try keyed(child), try keyed(store))
    }

    static func childQueriesApplyTheOverlayToFiltersSortsAndPages(_ c: ConformanceContext) throws {
        let store = try c.open()
        let items = Fixtures.items(80, seed: 5)
        try Fixtures.load(items, into: store)
        let child = try store.makeChild()
        var rng = SplitMix64(seed: 9)
        var expected = try store.read { try $0.fetch(FetchRequest("Item")) }
        try child.writeSync { w in
            for i in 0..<30 {
                let id = Int64(rng.next() % 120) - 40
                if i % 3 == 0 {
                    _ = try w.delete("Item", key: .int(id))
                    expected.removeAll { $0["id"] == .int(id) }
                } else {
                    var item = Fixtures.item(id, using: &rng)
                    item["code"] = .null
                    try w.save(item, into: "Item")
                    expected.removeAll { $0["id"] == .int(id) }
                    expected.append(item)
                }
            }
        }
        for filter in QueryCases.filters.prefix(30) {
            for sort in QueryCases.sorts.prefix(6) {
                let request = FetchRequest("Item", filter: filter, sort: sort, offset: 2, limit: 9)
                let got = try child.read { try $0.fetch(request) }
                c.expectEqual(
                    got, Oracle.answer(request, over: expected, primaryKey: "id"), "\(filter) \(sort)")
                c.expectEqual(
                    try child.read { try $0.count(FetchRequest("Item", filter: filter)) },
                    expected.filter { Oracle.matches(filter, $0) }.count, "count \(filter)")
            }
        }
        var scanned: [Record] = []
        var cursor: Value? = nil
        repeat {
            let page = try child.read { try $0.scan("Item", after: cursor, limit: 7) }
            scanned += page
            cursor = page.count == 7 ? page.last?["id"] : nil
        } while cursor != nil
        c.expectEqual(scanned, Oracle.answer(FetchRequest("Item"), over: expected, primaryKey: "id"), "scan")
    }

    static func aDiscardedChildAppliesNothing(_ c: ConformanceContext) throws {
        let store = try c.open()
        do {
            let child = try store.makeChild()
            try child.writeSync { try $0.insert(["key": "c"], into: "Keyed") }
            try child.close()
        }
        c.expectEqual(try keyed(store), [])
    }

    static func nestedChildrenMergeUpwardOneLevelAtATime(_ c: ConformanceContext) throws {
        let store = try c.open()
        let child = try store.makeChild()
        let grandchild = try child.makeChild()
        try grandchild.writeSync { try $0.insert(["key": "g", "value": 1], into: "Keyed") }
        c.expectEqual(try keyed(child), [])
        try child.merge(grandchild)
        c.expectEqual(try keyed(child).count, 1)
        c.expectEqual(try keyed(store), [])
        try store.merge(child)
        c.expectEqual(try keyed(store), [["key": "g", "value": 1, "note": .null]])
    }

    static func conflictUnderChildWinsAppliesTheChild(_ c: ConformanceContext) throws {
        let (store, child) = try conflicted(c)
        let report = try store.merge(child, policy: .childWins)
        c.expectEqual(report.conflicts.map(\.key), ["a"])
        c.expectEqual(try store.read { try $0.get("Keyed", key: "a")?["value"] }, 20)
    }

    static func conflictUnderParentWinsKeepsTheParent(_ c: ConformanceContext) throws {
        let (store, child) = try conflicted(c)
        let report = try store.merge(child, policy: .parentWins)
        c.expectEqual(report.skipped, 1)
        c.expectEqual(try store.read { try $0.get("Keyed", key: "a")?["value"] }, 10)
        c.expectEqual(try store.read { try $0.get("Keyed", key: "b")?["value"] }, 30, "other changes apply")
    }

    static func conflictUnderFailListsTheItemsAndAppliesNothing(_ c: ConformanceContext) throws {
        let (store, child) = try conflicted(c)
        do {
            try store.merge(child, policy: .fail)
            c.expect(false, "merge should fail")
        } catch let error as StoreError {
            c.expectEqual(error.code, .conflict)
            c.expectEqual(error.items, [StoreError.ItemReference(entity: "Keyed", key: "a")])
        }
        c.expectEqual(try store.read { try $0.get("Keyed", key: "b") }?["value"], 0)
        c.expectEqual(
            try child.read { try $0.get("Keyed", key: "b") }?["value"], 30, "the child keeps its changes")
    }

    static func mergingIntoAStoreThatIsNotTheParentFails(_ c: ConformanceContext) throws {
        let store = try c.open()
        let other = try c.open(name: "other")
        let child = try store.makeChild()
        try child.writeSync { try $0.insert(["key": "c"], into: "Keyed") }
        c.expectError(.invalidArgument, naming: "parent") { try other.merge(child) }
        c.expectEqual(try keyed(other), [])
    }

    static func aChildRespectsUniqueIndexesAndValidation(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { try $0.insert(["id": 1, "name": "a", "code": "X"], into: "Item") }
        let child = try store.makeChild()
        c.expectError(.uniqueViolation, naming: "byCode") {
            try child.writeSync { try $0.insert(["id": 2, "name": "b", "code": "X"], into: "Item") }
        }
        c.expectError(.keyExists) {
            try child.writeSync { try $0.insert(["id": 1, "name": "b"], into: "Item") }
        }
        c.expectError(.typeMismatch) {
            try child.writeSync { try $0.insert(["id": "x", "name": "b"], into: "Item") }
        }
        c.expectEqual(try child.read { try $0.count(FetchRequest("Item")) }, 1)

        // Values the child itself holds, frees and takes again, across its transactions.
        try child.writeSync { try $0.insert(["id": 3, "name": "c", "code": "Y"], into: "Item") }
        c.expectError(.uniqueViolation, naming: "byCode", "a value another of the child's items holds") {
            try child.writeSync { try $0.insert(["id": 4, "name": "d", "code": "Y"], into: "Item") }
        }
        try child.writeSync { _ = try $0.update("Item", key: 1, set: ["code": "Z"]) }
        try child.writeSync { try $0.insert(["id": 5, "name": "e", "code": "X"], into: "Item") }
        c.expectError(.uniqueViolation, naming: "byCode", "the parent's item moved to Z in the child") {
            try child.writeSync { _ = try $0.update("Item", key: 3, set: ["code": "Z"]) }
        }
        try child.writeSync { _ = try $0.delete("Item", key: 3) }
        try child.writeSync { try $0.insert(["id": 6, "name": "f", "code": "Y"], into: "Item") }
        try child.writeSync { _ = try $0.update("Item", key: 6, set: ["code": "W"]) }
        try child.writeSync { try $0.insert(["id": 7, "name": "g", "code": "Y"], into: "Item") }
        c.expectEqual(try child.read { try $0.fetch(FetchRequest("Item", sort: [.ascending("id")])).map { $0["code"] } },
                      ["Z", "X", "W", "Y"])
        try store.merge(child)
        c.expectEqual(try store.read { try $0.fetch(FetchRequest("Item", sort: [.ascending("id")])).map { $0["id"] } },
                      [1, 5, 6, 7])
    }

    static let all: [ConformanceCase] = [
        ConformanceCase(
            "Child stores", "childWritesAreInvisibleToTheParentUntilMerged",
            childWritesAreInvisibleToTheParentUntilMerged),
        ConformanceCase(
            "Child stores", "childQueriesApplyTheOverlayToFiltersSortsAndPages",
            childQueriesApplyTheOverlayToFiltersSortsAndPages),
        ConformanceCase("Child stores", "aDiscardedChildAppliesNothing", aDiscardedChildAppliesNothing),
        ConformanceCase(
            "Child stores", "nestedChildrenMergeUpwardOneLevelAtATime",
            nestedChildrenMergeUpwardOneLevelAtATime),
        ConformanceCase(
            "Child stores", "conflictUnderChildWinsAppliesTheChild", conflictUnderChildWinsAppliesTheChild),
        ConformanceCase(
            "Child stores", "conflictUnderParentWinsKeepsTheParent", conflictUnderParentWinsKeepsTheParent),
        ConformanceCase(
            "Child stores", "conflictUnderFailListsTheItemsAndAppliesNothing",
            conflictUnderFailListsTheItemsAndAppliesNothing),
        ConformanceCase(
            "Child stores", "mergingIntoAStoreThatIsNotTheParentFails",
            mergingIntoAStoreThatIsNotTheParentFails),
        ConformanceCase(
            "Child stores", "aChildRespectsUniqueIndexesAndValidation",
            aChildRespectsUniqueIndexesAndValidation),
    ]

    /// A parent and child that both changed "a"; the child also changed "b".
    static func conflicted(_ c: ConformanceContext) throws -> (any DataStore, ChildStore) {
        let store = try c.open()
        try store.writeSync { w in
            try w.insert(["key": "a", "value": 0], into: "Keyed")
            try w.insert(["key": "b", "value": 0], into: "Keyed")
        }
        let child = try store.makeChild()
        try child.writeSync { w in
            try w.update("Keyed", key: "a", set: ["value": 20])
            try w.update("Keyed", key: "b", set: ["value": 30])
        }
        _ = try store.writeSync { try $0.update("Keyed", key: "a", set: ["value": 10]) }
        return (store, child)
    }
}
