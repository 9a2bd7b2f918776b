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

    /// The largest schema the limits allow, with names of the longest length that share all
    /// but their last byte (`Limits.maxNameLength`), takes one large transaction touching every
    /// entity and index, and reads it back through every index.
    static func theLargestSchemaTakesOneLargeTransaction(_ c: ConformanceContext) throws {
        let schema = largestSchema()
        let store = try c.open(schema, name: "largest")
        let text = { (n: Int) in String(repeating: "t", count: 36) + String(format: "%04d", n) }
        // One item of each entity by itself, the others in a bulk insert (of 64: PostgreSQL's COPY).
        try store.writeSync { w in
            for entity in schema.entities {
                let records = (1...65).map { id -> Record in
                    var record: Record = ["id": .int(Int64(id))]
                    for (n, attribute) in entity.attributes.dropFirst().enumerated() {
                        record[attribute.name] = .string(text(id * 100 + n))
                    }
                    return record
                }
                try w.insert(records[0], into: entity.name)
                try w.insert(contentsOf: Array(records.dropFirst()), into: entity.name)
            }
        }
        try store.read { r in
            for entity in schema.entities {
                c.expectEqual(try r.count(FetchRequest(entity.name)), 65, entity.name)
                for (n, attribute) in entity.attributes.dropFirst().enumerated() {
                    let found = try r.fetch(FetchRequest(entity.name, filter: Field(attribute.name) == .string(text(200 + n))))
                    c.expectEqual(found.map { $0["id"] }, [.int(2)], "\(entity.name).\(attribute.name)")
                }
            }
        }
    }

    /// `Limits.maxEntities` entities of `Limits.maxIndexesPerEntity` indexes, one attribute
    /// each; entity, attribute and index names of `Limits.maxNameLength` bytes, in groups that
    /// share their first 63 bytes (names may not differ by letter case only, so 36 letters and
    /// digits tell them apart).
    static func largestSchema() -> Schema {
        let distinct = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ").map(String.init)
        let prefix = { (letter: String, length: Int) in String(repeating: letter, count: length) }
        let entities = (0..<Limits.maxEntities).map { e -> EntitySchema in
            let name = prefix("E", Limits.maxNameLength - 2) + distinct[e / distinct.count] + distinct[e % distinct.count]
            let attributes = (0..<Limits.maxIndexesPerEntity).map {
                Attribute(prefix("a", Limits.maxNameLength - 1) + distinct[$0], .string)
            }
            let indexes = attributes.indices.map {
                Index(prefix("i", Limits.maxNameLength - 1) + distinct[$0], on: [attributes[$0].name])
            }
            return EntitySchema(name, primaryKey: "id", attributes: [Attribute("id", .int)] + attributes, indexes: indexes)
        }
        return Schema(entities: entities)
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("Limits", "theLargestSchemaTakesOneLargeTransaction", theLargestSchemaTakesOneLargeTransaction),
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
