import DataStoreAPI
import Foundation

enum TypedModelCases {
    static func objectsRoundTripThroughTheAccessors(_ c: ConformanceContext) throws {
        let store = try c.open(Pancake.schema, name: "pancakes")
        let pancakes = (0..<12).map(Pancake.sample)
        try store.writeSync { w in for p in pancakes { try w.insert(p) } }
        let fetched = try store.read { try $0.fetch(Pancake.self) }
        let expected = pancakes.sorted { a, b in
            if a.rating != b.rating { return a.rating > b.rating }
            if a.flavor != b.flavor { return a.flavor < b.flavor }
            return a.id.bytes.lexicographicallyPrecedes(b.id.bytes)
        }
        c.expectEqual(fetched, expected, "fetch uses the default sort")
        c.expectEqual(try store.read { try $0.get(Pancake.self, key: .uuid(pancakes[3].id)) }, pancakes[3])
        var changed = pancakes[3]
        changed.rating = 99
        try store.writeSync { try $0.save(changed) }
        c.expectEqual(try store.read { try $0.first(Pancake.self) }, changed)
        let blueberries = try store.read { try $0.fetch(Pancake.self, where: Field("flavor") == "blueberry") }
        c.expectEqual(blueberries.count, 4)
        c.expect(try store.writeSync { try $0.delete(changed) })
        c.expectEqual(try store.read { try $0.count(Pancake.self) }, 11)
    }

    static func derivedSchemaMatchesTheCodableType(_ c: ConformanceContext) throws {
        let derived = try Topping.entitySchema()
        c.expectEqual(
            derived,
            EntitySchema(
                "Topping", primaryKey: "name",
                attributes: [
                    Attribute("name", .string), Attribute("grams", .int),
                    Attribute("vegan", .bool, optional: true),
                    Attribute("addedAt", .date, optional: true), Attribute("tag", .uuid),
                    Attribute("bytes", .bytes),
                ]))
        let store = try c.open(Schema(entities: [derived]), name: "toppings")
        let topping = Topping(
            name: "syrup", grams: -4, vegan: nil, addedAt: Date(timeIntervalSince1970: 5),
            tag: UUID(), bytes: [0, 9])
        try store.writeSync { try $0.insert(topping) }
        c.expectEqual(try store.read { try $0.get(Topping.self, key: "syrup") }, topping)
    }

    static func aStoredValueOfTheWrongShapeIsATypeMismatch(_ c: ConformanceContext) throws {
        let store = try c.open(Pancake.schema, name: "pancakes")
        var record = try RecordEncoder.encode(Pancake.sample(1))
        record["size"] = "enormous"
        try store.writeSync { try $0.insert(record, into: "Pancake") }
        do {
            _ = try store.read { try $0.fetch(Pancake.self) }
            c.expect(false, "decoding an unknown enum case should fail")
        } catch {
            c.expect("\(error)".contains("enormous") || "\(error)".contains("size"), "\(error)")
        }
    }

    static let all: [ConformanceCase] = [
        ConformanceCase(
            "Typed models", "objectsRoundTripThroughTheAccessors", objectsRoundTripThroughTheAccessors),
        ConformanceCase(
            "Typed models", "derivedSchemaMatchesTheCodableType", derivedSchemaMatchesTheCodableType),
        ConformanceCase(
            "Typed models", "aStoredValueOfTheWrongShapeIsATypeMismatch",
            aStoredValueOfTheWrongShapeIsATypeMismatch),
    ]
}
