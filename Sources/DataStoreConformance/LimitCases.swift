import DataStoreAPI
import Foundation

enum LimitCases {
    static func stringKeyAtLimitWorksAndOnePastFails(_ c: ConformanceContext) throws {
        let store = try c.open()
        let atLimit = String(repeating: "k", count: Limits.maxStringKeyBytes - 2) + "\u{E9}"
        try store.writeSync { try $0.insert(["key": .string(atLimit)], into: "Keyed") }
        c.expect(try store.read { try $0.get("Keyed", key: .string(atLimit)) } != nil)
        let past = String(repeating: "k", count: Limits.maxStringKeyBytes + 1)
        c.expectError(.limitExceeded, naming: "Keyed") {
            try store.writeSync { try $0.insert(["key": .string(past)], into: "Keyed") }
        }
        c.expectError(.limitExceeded, naming: "Keyed") {
            _ = try store.read { try $0.get("Keyed", key: .string(past)) }
        }
    }

    static func valueAtSizeLimitWorksAndOnePastFails(_ c: ConformanceContext) throws {
        let store = try c.open()
        let atLimit = [UInt8](repeating: 7, count: Limits.maxValueBytes)
        try store.writeSync {
            try $0.insert(["id": 1, "name": "big", "blob": .bytes(atLimit)], into: "Item")
        }
        c.expectEqual(try store.read { try $0.get("Item", key: 1) }?["blob"], .bytes(atLimit))
        c.expectError(.limitExceeded, naming: "blob") {
            try store.writeSync {
                try $0.insert(["id": 2, "name": "big", "blob": .bytes(atLimit + [1])], into: "Item")
            }
        }
        let longString = String(repeating: "s", count: Limits.maxValueBytes + 1)
        c.expectError(.limitExceeded, naming: "label") {
            try store.writeSync {
                try $0.insert(["id": 3, "name": "s", "label": .string(longString)], into: "Item")
            }
        }
    }

    static func longIndexedStringsAreFoundByEveryPredicate(_ c: ConformanceContext) throws {
        let store = try c.open()
        let stem = String(repeating: "x", count: 600)
        let names = [
            stem + "a", stem + "b", stem + "a" + stem, stem, String(repeating: "x", count: 599) + "y",
            stem + "\u{0}", "short",
        ]
        var items: [Record] = []
        try store.writeSync { w in
            for (i, n) in names.enumerated() {
                let item: Record = ["id": .int(Int64(i)), "name": .string(n), "code": .string(n)]
                try w.insert(item, into: "Item")
                items.append(try w.get("Item", key: .int(Int64(i))) ?? item)
            }
        }
        c.expectError(.uniqueViolation, naming: "byCode") {
            try store.writeSync {
                try $0.insert(["id": 99, "name": "n", "code": .string(stem + "a")], into: "Item")
            }
        }
        let filters: [Filter] = [
            Field("name") == .string(stem + "a"), Field("name") == .string(stem),
            Field("name") < .string(stem + "b"), Field("name") >= .string(stem + "a"),
            Field("name").hasPrefix(stem + "a"), Field("name").among([.string(stem), "short"]),
            Field("code") == .string(stem + "b"), Field("name") > .string(stem),
        ]
        for filter in filters {
            let request = FetchRequest("Item", filter: filter, sort: [.descending("name")])
            let got = try store.read { try $0.fetch(request) }
            c.expectEqual(got, Oracle.answer(request, over: items, primaryKey: "id"), "\(filter)")
        }
    }

    static func namesAtLimitWorkAndOnePastFail(_ c: ConformanceContext) throws {
        let longest = String(repeating: "n", count: Limits.maxNameLength)
        let ok = Schema(entities: [
            EntitySchema(longest, primaryKey: longest, attributes: [Attribute(longest, .int)])
        ])
        let store = try c.open(ok, name: "ok")
        try store.writeSync { try $0.insert([longest: 1], into: longest) }
        c.expectEqual(try store.read { try $0.count(FetchRequest(longest)) }, 1)
        let past = longest + "n"
        let bad = Schema(entities: [EntitySchema(past, primaryKey: "id", attributes: [Attribute("id", .int)])]
        )
        c.expectError(.limitExceeded, naming: past) { _ = try c.open(bad, name: "bad") }
    }

    static let all: [ConformanceCase] = [
        ConformanceCase(
            "Limits", "stringKeyAtLimitWorksAndOnePastFails", stringKeyAtLimitWorksAndOnePastFails),
        ConformanceCase(
            "Limits", "valueAtSizeLimitWorksAndOnePastFails", valueAtSizeLimitWorksAndOnePastFails),
        ConformanceCase(
            "Limits", "longIndexedStringsAreFoundByEveryPredicate", longIndexedStringsAreFoundByEveryPredicate
        ),
        ConformanceCase("Limits", "namesAtLimitWorkAndOnePastFail", namesAtLimitWorkAndOnePastFail),
    ]
}
