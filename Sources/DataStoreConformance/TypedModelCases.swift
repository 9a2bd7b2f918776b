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

    /// A model read and written by hand (``RowCodable``) and the same model through `Codable`
    /// give the same items and the same objects, value for value (edge values included), in
    /// either direction.
    static func handWrittenRowCodeAgreesWithCodable(_ c: ConformanceContext) throws {
        let store = try c.open(Pancake.schema, name: "pancakes")
        var pancakes = (0..<20).map(Pancake.sample)
        pancakes[1].flavor = ""
        pancakes[2].flavor = "n\u{0}ul \u{1F95E} é"
        pancakes[3].rating = Int.max
        pancakes[4].rating = Int.min
        pancakes[5].weight = -0.0
        pancakes[6].weight = .infinity
        pancakes[7].bakedAt = Date(timeIntervalSince1970: -62_135_596_800)
        pancakes[8].photo = Data()
        // Half written by hand, half through Codable.
        try store.writeSync { w in
            for (i, pancake) in pancakes.enumerated() {
                if i % 2 == 0 { try w.insert(HandPancake(pancake)) } else { try w.insert(pancake) }
            }
        }
        let throughCodable = try store.read { try $0.fetch(Pancake.self) }
        let byHand = try store.read { try $0.fetch(HandPancake.self) }.map(\.pancake)
        c.expectEqual(byHand, throughCodable, "the same objects in the same order")
        c.expectEqual(Set(byHand.map(\.id)), Set(pancakes.map(\.id)))
        for pancake in pancakes {
            c.expectEqual(try store.read { try $0.get(HandPancake.self, key: .uuid(pancake.id)) }?.pancake,
                          try store.read { try $0.get(Pancake.self, key: .uuid(pancake.id)) })
            // The same values (Codable leaves a nil out of the record; the hand-written one says null).
            let encoded = try RecordEncoder.encode(pancake)
            let written = try HandPancake(pancake).record()
            c.expect(Pancake.schema.entities[0].attributes.allSatisfy { encoded[$0.name] == written[$0.name] },
                     "the same record: \(written) and \(encoded)")
        }
        var seen: [Pancake] = []
        try store.read { try $0.forEach(HandPancake.self, where: Field("flavor") == "plain") { seen.append($0.pancake) } }
        c.expectEqual(seen, throughCodable.filter { $0.flavor == "plain" })
        var changed = HandPancake(pancakes[0])
        changed.pancake.rating = 77
        try store.writeSync { try $0.save(changed) }
        c.expectEqual(try store.read { try $0.get(Pancake.self, key: .uuid(changed.pancake.id)) }?.rating, 77)
        c.expect(try store.writeSync { try $0.delete(changed) })
        c.expectEqual(try store.read { try $0.count(Pancake.self) }, pancakes.count - 1)
    }

    /// A model whose own code writes to the store while its values are being handed over (an
    /// insert of another item of its entity, as a model and as a record, and a save and a delete)
    /// leaves the model's row as it was handed over: each item is stored with its own values,
    /// and the feed has each change once. A write of its code that fails is the insert's error.
    static func aModelsCodeMayWriteWhileItsValuesAreHandedOver(_ c: ConformanceContext) throws {
        let store = try c.open(Blini.schema, name: "reentrant")
        try store.writeSync { try $0.insert(Blini(id: 9, name: "to delete", weight: 9)) }
        let start = try store.currentChangeToken()
        try store.writeSync { w in
            try w.insert(Blini(id: 1, name: "first", weight: 1, note: "before"))
            let inner = Blini.WhileHandingOver {
                try w.insert(Blini(id: 3, name: "inner model", weight: 3, note: "inner"))
                try w.insert(["id": .int(4), "name": .string("inner record"), "weight": .double(4), "note": .null],
                             into: "Blini")
                try w.save(Blini(id: 1, name: "first", weight: 10, note: "saved"))
                c.expect(try w.delete("Blini", key: .int(9)))
            }
            try w.insert(Blini(id: 2, name: "outer", weight: 2, note: "outer", whileHandingOver: inner))
            try w.insert(Blini(id: 5, name: "after", weight: 5))
        }
        let stored = try store.read { try $0.fetch(Blini.self, sortedBy: [.ascending("id")]) }
        c.expectEqual(stored, [Blini(id: 1, name: "first", weight: 10, note: "saved"),
                               Blini(id: 2, name: "outer", weight: 2, note: "outer"),
                               Blini(id: 3, name: "inner model", weight: 3, note: "inner"),
                               Blini(id: 4, name: "inner record", weight: 4),
                               Blini(id: 5, name: "after", weight: 5)])
        // A write of the model's own code that fails (a name held already): the insert throws its
        // error, the model's code having run once (an insert of a new item before it would fail
        // with `keyExists` if it ran again), and the block's writes are rolled back.
        c.expectError(.uniqueViolation, naming: "Blini_name", "for a write of the model's code that fails") {
            try store.writeSync { w in
                let failing = Blini.WhileHandingOver {
                    try w.insert(Blini(id: 31, name: "new inner", weight: 31))
                    try w.insert(Blini(id: 32, name: "outer", weight: 32))
                }
                try w.insert(Blini(id: 30, name: "failing outer", weight: 30, whileHandingOver: failing))
            }
        }
        c.expectEqual(try store.read { try $0.count(FetchRequest("Blini")) }, 5)
        let feed = try store.changes(since: start, limit: 10)
        c.expectEqual(feed.count, 1)
        c.expectEqual(feed.first?.items, [
            ItemChange(entity: "Blini", key: .int(1), kind: .inserted), ItemChange(entity: "Blini", key: .int(2), kind: .inserted),
            ItemChange(entity: "Blini", key: .int(3), kind: .inserted), ItemChange(entity: "Blini", key: .int(4), kind: .inserted),
            ItemChange(entity: "Blini", key: .int(5), kind: .inserted), ItemChange(entity: "Blini", key: .int(9), kind: .deleted),
        ])
    }

    /// A model that hands its values over one at a time (what `@StoredModel` writes; SQLite takes
    /// them without a record) is stored as its record would be: the same errors for a taken key
    /// and a unique value held already, a value the record would convert converted, one it
    /// would refuse refused with nothing stored, one value too few stored from the record (the
    /// optional's null filled in), one too many refused as the record's unknown attribute, and
    /// each insert in the change feed.
    static func aModelsValuesGoInAsItsRecordWould(_ c: ConformanceContext) throws {
        let store = try c.open(Blini.schema, name: "blini")
        let start = try store.currentChangeToken()
        let plain = Blini(id: 1, name: "plain", weight: 1.5, note: "n\u{0}ul \u{1F95E}")
        try store.writeSync { w in
            try w.insert(plain)
            try w.insert(Blini(id: 2, name: "", weight: -0.0))
            // An int for a double attribute: the record's way converts it.
            try w.insert(Blini(id: 3, name: "int", weight: 0, handed: [.int(3), .string("int"), .int(7), .null]))
            // One value too few (the record fills the optional's null), or in another order.
            try w.insert(Blini(id: 4, name: "few", weight: 4, handed: [.int(4), .string("few"), .double(4)]))
        }
        c.expectError(.unknownAttribute, naming: "extra", "for a value too many") {
            try store.writeSync {
                try $0.insert(Blini(id: 5, name: "many", weight: 5, handed: [.int(5), .string("many"), .double(5), .null, .string("x")]))
            }
        }
        let stored = try store.read { try $0.fetch(Blini.self, sortedBy: [.ascending("id")]) }
        c.expectEqual(stored, [plain, Blini(id: 2, name: "", weight: -0.0), Blini(id: 3, name: "int", weight: 7),
                               Blini(id: 4, name: "few", weight: 4)])
        c.expectEqual(try store.read { try $0.get("Blini", key: .int(2)) }?["weight"], .double(-0.0))
        // The errors of the record's way, and nothing of the failed insert stored.
        c.expectError(.keyExists, naming: "Blini", "for a taken key") {
            try store.writeSync { try $0.insert(Blini(id: 1, name: "again", weight: 0)) }
        }
        c.expectError(.uniqueViolation, naming: "Blini_name", "for a name held already") {
            try store.writeSync { try $0.insert(Blini(id: 9, name: "plain", weight: 0)) }
        }
        c.expectError(.invalidValue, naming: "weight", "for a NaN") {
            try store.writeSync { try $0.insert(Blini(id: 10, name: "nan", weight: .nan)) }
        }
        c.expectError(.typeMismatch, naming: "weight", "for a string where a double goes") {
            try store.writeSync {
                try $0.insert(Blini(id: 11, name: "text", weight: 0, handed: [.int(11), .string("text"), .string("x"), .null]))
            }
        }
        c.expectError(.limitExceeded, "for a text past the limit") {
            try store.writeSync {
                try $0.insert(Blini(id: 12, name: String(repeating: "x", count: Limits.maxValueBytes + 1), weight: 0))
            }
        }
        // A failed insert inside a block that goes on leaves the next insert's values intact.
        try store.writeSync { w in
            c.expectError(.keyExists, "inside a block") { try w.insert(Blini(id: 2, name: "dup", weight: 0)) }
            try w.insert(Blini(id: 13, name: "after", weight: 13, note: "kept"))
            // A text whose length takes two bytes (a row's checksum covers its length).
            try w.insert(Blini(id: 14, name: "long", weight: 14, note: String(repeating: "é", count: 200)))
        }
        c.expectEqual(try store.read { try $0.get(Blini.self, key: .int(13)) }, Blini(id: 13, name: "after", weight: 13, note: "kept"))
        c.expectEqual(try store.read { try $0.count(FetchRequest("Blini")) }, 6)
        let feed = try store.changes(since: start, limit: 10)
        c.expectEqual(feed.count, 2, "one entry per committed transaction")
        c.expectEqual(feed.first?.items.map(\.key), (1...4).map { .int(Int64($0)) })
        c.expectEqual(feed.last?.items, [ItemChange(entity: "Blini", key: .int(13), kind: .inserted),
                                         ItemChange(entity: "Blini", key: .int(14), kind: .inserted)])
        // The stored rows read back whole: what a store checks when it reads (a row's checksum
        // on SQLite) holds for rows written either way.
        c.expectEqual(try store.read { try $0.fetch(FetchRequest("Blini")) }.count, 6)
        c.expectEqual(try store.read { try $0.get(Blini.self, key: .int(14)) }?.note?.utf8.count, 400)
        // A model inserted through an accessor whose block returned, after inserts of the same
        // model through it: refused, and nothing stored.
        var kept: WriteAccessor?
        try store.writeSync { w in
            try w.insert(Blini(id: 15, name: "in time", weight: 15))
            kept = w
        }
        c.expectError(.accessorExpired, "for an insert after the block") {
            try kept?.insert(Blini(id: 16, name: "late", weight: 16))
        }
        c.expectEqual(try store.read { try $0.count(FetchRequest("Blini")) }, 7)
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

    /// A model whose properties come in another order than its schema's attributes, with
    /// optionals absent and present and an attribute the model does not have: decoding finds
    /// each value by name whatever order the keys are asked for in.
    struct Waffle: DataObject, Equatable {
        static let entityName = "Waffle"
        static let primaryKey = "id"
        var topping: String?
        var id: Int64
        var photo: Data?
        var ref: UUID
        var grams: Double
        var bakedAt: Date?
        var raw: [UInt8]

        static let schema = Schema(version: 1, entities: [
            EntitySchema("Waffle", primaryKey: "id", attributes: [
                Attribute("id", .int), Attribute("raw", .bytes), Attribute("bakedAt", .date, optional: true),
                Attribute("extra", .string, optional: true), Attribute("grams", .double),
                Attribute("ref", .uuid), Attribute("photo", .bytes, optional: true),
                Attribute("topping", .string, optional: true),
            ]),
        ])
    }

    static func modelsWhosePropertyOrderDiffersFromTheSchemaDecodeByName(_ c: ConformanceContext) throws {
        let store = try c.open(Waffle.schema)
        let waffles = (0..<40).map { (i: Int) -> Waffle in
            let topping: String? = i % 3 == 0 ? nil : "t\(i)"
            let photo: Data? = i % 2 == 0 ? nil : Data([UInt8(i)])
            let bakedAt: Date? = i % 4 == 0 ? nil : Date(timeIntervalSince1970: Double(i))
            return Waffle(topping: topping, id: Int64(i), photo: photo, ref: UUID(), grams: Double(i) / 3,
                          bakedAt: bakedAt, raw: [UInt8(i), 1, 2])
        }
        try store.writeSync { writer in
            for (i, waffle) in waffles.enumerated() {
                try writer.insert(waffle)
                if i % 5 == 0 { _ = try writer.update("Waffle", key: .int(Int64(i)), set: ["extra": "x"]) }
            }
        }
        try store.read { reader in
            c.expectEqual(try reader.fetch(Waffle.self, sortedBy: [.ascending("id")]), waffles)
            var visited: [Waffle] = []
            try reader.forEach(Waffle.self, sortedBy: [.ascending("id")]) { visited.append($0) }
            c.expectEqual(visited, waffles)
            for waffle in waffles { c.expectEqual(try reader.get(Waffle.self, key: .int(waffle.id)), waffle) }
        }
    }

    /// A typed bulk insert stores every object of a clean batch, 200 of them (PostgreSQL's COPY
    /// path) and 10 (its one-statement path), and a batch with a taken key fails at that object
    /// with the objects before it stored and none after.
    static func aTypedBulkInsertStoresEachObjectInOrder(_ c: ConformanceContext) throws {
        let store = try c.open(Waffle.schema)
        let waffles = (0..<210).map { (i: Int) -> Waffle in
            Waffle(topping: i % 3 == 0 ? nil : "t\t\(i)\\", id: Int64(i), photo: i % 2 == 0 ? nil : Data([UInt8(i), 0]),
                   ref: UUID(), grams: i == 7 ? -0.0 : Double(i) / 3,
                   bakedAt: i % 4 == 0 ? nil : Date(timeIntervalSince1970: Double(i) + 0.25), raw: [UInt8(i), 1, 2])
        }
        try store.writeSync { try $0.insert(contentsOf: waffles.prefix(200)) }
        try store.writeSync { try $0.insert(contentsOf: waffles.dropFirst(200)) }
        let stored = try store.read { try $0.fetch(Waffle.self, sortedBy: [.ascending("id")]) }
        c.expectEqual(stored, waffles)
        c.expect(stored.count > 7 && stored[7].grams.sign == .minus, "-0.0 kept its sign")
        var clash = waffles[3]
        clash.topping = "again"
        let extra = { (id: Int64) in Waffle(topping: nil, id: id, photo: nil, ref: UUID(), grams: 1, bakedAt: nil, raw: []) }
        try store.writeSync { writer in
            c.expectError(.keyExists, "a taken key") { try writer.insert(contentsOf: [extra(500), clash, extra(501)]) }
        }
        try store.read { reader in
            c.expect(try reader.get(Waffle.self, key: .int(500)) != nil, "the object before the clash is stored")
            c.expect(try reader.get(Waffle.self, key: .int(501)) == nil, "the object after the clash is not")
            c.expectEqual(try reader.get(Waffle.self, key: .int(3))?.topping, waffles[3].topping)
        }
    }

    /// A model whose own `init(from:)` opens two keyed containers of different key types and
    /// reads them interleaved, with a nested `Codable` value and an optional. The decoding of a
    /// fetch is shared by its rows; each row must still read its own values through the right
    /// container, a fetch inside another's visit must not disturb it, and a row that fails
    /// must not leave anything behind for the next request.
    struct Crepe: DataObject, Equatable {
        static let entityName = "Crepe"
        static let primaryKey = "id"
        var id: Int64
        var filling: String
        var folds: Int
        var size: Pancake.Size?

        enum CodingKeys: String, CodingKey { case id, filling, folds, size }
        enum Front: String, CodingKey { case id, filling }
        enum Back: String, CodingKey { case folds, size }

        init(id: Int64, filling: String, folds: Int, size: Pancake.Size?) {
            (self.id, self.filling, self.folds, self.size) = (id, filling, folds, size)
        }

        init(from decoder: any Decoder) throws {
            let front = try decoder.container(keyedBy: Front.self)
            let back = try decoder.container(keyedBy: Back.self)
            folds = try back.decode(Int.self, forKey: .folds)
            id = try front.decode(Int64.self, forKey: .id)
            size = try back.decodeIfPresent(Pancake.Size.self, forKey: .size)
            filling = try front.decode(String.self, forKey: .filling)
        }

        static let schema = Schema(version: 1, entities: [
            EntitySchema("Crepe", primaryKey: "id", attributes: [
                Attribute("id", .int), Attribute("filling", .string), Attribute("folds", .int),
                Attribute("size", .string, optional: true),
            ]),
        ])
    }

    static func eachRowOfATypedFetchDecodesItsOwnValuesThroughEachContainer(_ c: ConformanceContext) throws {
        let store = try c.open(Crepe.schema)
        let crepes = (0..<30).map { (i: Int) -> Crepe in
            Crepe(id: Int64(i), filling: String(repeating: "f", count: i % 7) + "\(i)", folds: i * 3 - 40,
                  size: i % 3 == 0 ? nil : (i % 2 == 0 ? .small : .large))
        }
        try store.writeSync { writer in for crepe in crepes { try writer.insert(crepe) } }
        try store.read { reader in
            c.expectEqual(try reader.fetch(Crepe.self, sortedBy: [.ascending("id")]), crepes)
            var visited: [Crepe] = []
            try reader.forEach(Crepe.self, sortedBy: [.descending("id")]) { crepe in
                visited.append(crepe)
                let again = try reader.fetch(Crepe.self, where: Field("id") == .int(crepe.id))
                c.expectEqual(again, [crepe], "a fetch inside a typed visit, at \(crepe.id)")
            }
            c.expectEqual(visited, crepes.reversed(), "the typed visit")
        }
        var bad = try RecordEncoder.encode(crepes[15])
        bad["size"] = "enormous"
        try store.writeSync { try $0.save(bad, into: "Crepe") }
        try store.read { reader in
            var seen: [Int64] = []
            do {
                try reader.forEach(Crepe.self, sortedBy: [.ascending("id")]) { seen.append($0.id) }
                c.expect(false, "a row with an unknown enum case decoded")
            } catch {
                c.expect("\(error)".contains("enormous"), "the error names the stored value: \(error)")
            }
            c.expectEqual(seen, Array(0..<15), "the rows before the bad one were handed over")
            c.expectEqual(try reader.fetch(Crepe.self, where: Field("id") > 15, sortedBy: [.ascending("id")]),
                          Array(crepes[16...]), "a fetch after the failed one")
            c.expectEqual(try reader.get(Crepe.self, key: 14), crepes[14])
        }
    }

    static let all: [ConformanceCase] = [
        ConformanceCase(
            "Typed models", "aTypedBulkInsertStoresEachObjectInOrder", aTypedBulkInsertStoresEachObjectInOrder),
        ConformanceCase(
            "Typed models", "eachRowOfATypedFetchDecodesItsOwnValuesThroughEachContainer",
            eachRowOfATypedFetchDecodesItsOwnValuesThroughEachContainer),
        ConformanceCase(
            "Typed models", "modelsWhosePropertyOrderDiffersFromTheSchemaDecodeByName",
            modelsWhosePropertyOrderDiffersFromTheSchemaDecodeByName),
        ConformanceCase(
            "Typed models", "objectsRoundTripThroughTheAccessors", objectsRoundTripThroughTheAccessors),
        ConformanceCase(
            "Typed models", "derivedSchemaMatchesTheCodableType", derivedSchemaMatchesTheCodableType),
        ConformanceCase(
            "Typed models", "handWrittenRowCodeAgreesWithCodable", handWrittenRowCodeAgreesWithCodable),
        ConformanceCase(
            "Typed models", "aModelsValuesGoInAsItsRecordWould", aModelsValuesGoInAsItsRecordWould),
        ConformanceCase(
            "Typed models", "aModelsCodeMayWriteWhileItsValuesAreHandedOver",
            aModelsCodeMayWriteWhileItsValuesAreHandedOver),
        ConformanceCase(
            "Typed models", "aStoredValueOfTheWrongShapeIsATypeMismatch",
            aStoredValueOfTheWrongShapeIsATypeMismatch),
    ]
}
