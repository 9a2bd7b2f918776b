import DataStoreAPI
import Foundation

/// Typed models that hold what apps hold: enums backed by strings and ints, arrays and
/// dictionaries of scalars, nested `Codable` structs; and filters written with Swift values.
enum AppModelCases {
    struct Recipe: DataObject, Equatable {
        static let entityName = "Recipe"
        static let primaryKey = "id"
        static let defaultSort = [SortKey.ascending("id")]

        enum Course: String, Codable, CaseIterable { case starter, main, dessert }
        enum Spice: Int, Codable, CaseIterable { case none = 0, mild = 1, hot = 3 }
        struct Nutrition: Codable, Equatable {
            var calories: Int
            var fats: [String: Double]
            var checkedAt: Date?
            var note: String?
        }

        var id: Int
        var title: String
        var course: Course
        var spice: Spice?
        var tags: [String]
        var ratings: [Int]
        var portions: [String: Int]
        var nutrition: Nutrition
        var history: [Nutrition]?
        var addedAt: Date
        var source: UUID?

        /// Not stored: a key path to it names no attribute.
        var doubled: Int { id * 2 }

        static func sample(_ i: Int) -> Recipe {
            Recipe(id: i, title: "recipe \"\(i)\" é\u{0}", course: Course.allCases[i % 3],
                   spice: i % 4 == 0 ? nil : Spice.allCases[i % 3], tags: (0..<(i % 4)).map { "tag \($0)\n" },
                   ratings: [i, -i, Int.max - i], portions: ["adult": i, "child": i / 2],
                   nutrition: Nutrition(calories: 100 * i, fats: ["saturated": Double(i) / 4, "trans": -0.0],
                                        checkedAt: i % 2 == 0 ? Date(timeIntervalSince1970: Double(i) * 1_000.5) : nil,
                                        note: i % 3 == 0 ? nil : "n\(i)"),
                   history: i % 5 == 0 ? nil : [Nutrition(calories: i, fats: [:], checkedAt: nil, note: nil)],
                   addedAt: Date(timeIntervalSince1970: 1_700_000_000 + Double(i) * 60.25),
                   source: i % 2 == 0 ? UUID(uuidString: "00000000-0000-0000-0000-0000000000\(10 + i)") : nil)
        }
    }

    /// A model with an enum the probe cannot make a value of.

    struct Unprobeable: DataObject {
        static let entityName = "Unprobeable"
        static let primaryKey = "id"
        enum Mood: String, Codable { case calm, busy }
        var id: Int
        var mood: Mood
    }

    static func enumsCollectionsAndNestedStructsDeriveASchemaAndRoundTrip(_ c: ConformanceContext) throws {
        let entity = try Recipe.entitySchema()
        c.expectEqual(entity.attributes, [
            Attribute("id", .int), Attribute("title", .string), Attribute("course", .string),
            Attribute("spice", .int, optional: true), Attribute("tags", .string), Attribute("ratings", .string),
            Attribute("portions", .string), Attribute("nutrition", .string),
            Attribute("history", .string, optional: true), Attribute("addedAt", .date),
            Attribute("source", .uuid, optional: true),
        ], "derived from the Codable type")
        let store = try c.open(Schema(entities: [entity]), name: "recipes")
        let recipes = (1...12).map(Recipe.sample)
        try store.writeSync { w in for recipe in recipes { try w.insert(recipe) } }
        c.expectEqual(try store.read { try $0.fetch(Recipe.self) }, recipes, "every property comes back")
        let raw = try store.read { try $0.get("Recipe", key: 3) }
        c.expectEqual(raw?["course"], "starter", "an enum is stored as its raw value")
        c.expectEqual(try store.read { try $0.get("Recipe", key: 5) }?["spice"], .int(3),
                      "an Int-backed enum is stored as its raw value (hot is 3)")
        c.expectEqual(raw?["tags"], #"["tag 0\n","tag 1\n","tag 2\n"]"#, "an array is stored as JSON text")
        c.expectEqual(raw?["portions"], #"{"adult":3,"child":1}"#, "a dictionary's keys are sorted")

        // Filters by raw value, with enum cases and Swift variables.
        let dessert = Recipe.Course.dessert
        let desserts = try store.read { try $0.fetch(Recipe.self, where: Field("course") == dessert) }
        c.expectEqual(desserts.map(\.id), [2, 5, 8, 11])
        let minimum = Recipe.Spice.mild.rawValue
        let spicy = try store.read { try $0.fetch(Recipe.self, where: Field("spice") >= minimum) }
        c.expectEqual(spicy.map(\.id), recipes.filter { ($0.spice?.rawValue ?? -1) >= minimum }.map(\.id))
        // Saving an equal object leaves the stored item as it was.
        var changed = recipes[4]
        changed.tags.append("new")
        changed.nutrition.fats["mono"] = 1.5
        try store.writeSync { try $0.save(changed) }
        c.expectEqual(try store.read { try $0.get(Recipe.self, key: 5) }, changed)

        do {
            _ = try Unprobeable.entitySchema()
            c.expect(false, "an enum the probe cannot make should fail the derivation")
        } catch let error as StoreError {
            c.expect(error.message.contains("'mood'") && error.message.contains("CaseIterable"), error.message)
        }
    }

    static func filtersTakeSwiftValuesOfEveryType(_ c: ConformanceContext) throws {
        let store = try c.open(Schema(entities: [try Recipe.entitySchema()]), name: "recipes")
        let recipes = (1...12).map(Recipe.sample)
        try store.writeSync { w in for recipe in recipes { try w.insert(recipe) } }
        func ids(_ filter: Filter) throws -> [Int] { try store.read { try $0.fetch(Recipe.self, where: filter) }.map(\.id) }
        let minID = 10
        c.expectEqual(try ids(Field("id") >= minID), [10, 11, 12], "an Int")
        let id64: Int64 = 11
        c.expectEqual(try ids(Field("id") == id64), [11], "an Int64")
        let title = "recipe \"7\" é\u{0}"
        c.expectEqual(try ids(Field("title") == title), [7], "a String")
        let cutoff = Date(timeIntervalSince1970: 1_700_000_000 + 3 * 60.25)
        c.expectEqual(try ids(Field("addedAt") <= cutoff), [1, 2, 3], "a Date")
        let source = UUID(uuidString: "00000000-0000-0000-0000-000000000014")
        c.expectEqual(try ids(Field("source") == source), [4], "an optional UUID")
        let noSource: UUID? = nil
        c.expectEqual(try ids(Field("source") == noSource), [1, 3, 5, 7, 9, 11], "an optional that is nil")
        let spices: [Int] = [0, 3]
        c.expectEqual(try ids(Field("spice").among(spices)), recipes.filter { [0, 3].contains($0.spice?.rawValue ?? -1) }
            .map(\.id), "an array of Int")
        let interpolated: Value = "recipe \"\(7)\" é\u{0}"
        c.expectEqual(try ids(Field("title") == interpolated), [7], "an interpolated Value")
    }

    static func keyPathsNameAttributesInFetchesSortsAndLiveQueries(_ c: ConformanceContext) async throws {
        let store = try c.open(Schema(entities: [try Recipe.entitySchema()]), name: "recipes")
        let recipes = (1...12).map(Recipe.sample)
        try store.writeSync { w in for recipe in recipes { try w.insert(recipe) } }
        let minimum = 10
        c.expectEqual(try store.read { try $0.fetch(Recipe.self, where: \.id >= minimum) }.map(\.id), [10, 11, 12])
        c.expectEqual(try store.read { try $0.fetch(Recipe.self, where: \.course == .dessert) }.map(\.id),
                      [2, 5, 8, 11], "an enum case")
        c.expectEqual(try store.read { try $0.fetch(Recipe.self, where: \.spice == Recipe.Spice.hot) }.map(\.id),
                      recipes.filter { $0.spice == .hot }.map(\.id), "an optional enum")
        let cutoff = Date(timeIntervalSince1970: 1_700_000_000 + 2 * 60.25)
        c.expectEqual(try store.read { try $0.fetch(Recipe.self, where: \.addedAt <= cutoff && !(\.id == 1)) }
            .map(\.id), [2], "a Date, and, not")
        let noSource: UUID? = nil
        c.expectEqual(try store.read { try $0.count(Recipe.self, where: \.source == noSource || \.id == 2) }, 7,
                      "an optional that is nil, or")
        c.expectEqual(try store.read { try $0.fetch(Recipe.self, sortedBy: \.course) }.map(\.course.rawValue),
                      recipes.map(\.course.rawValue).sorted(), "sorted by a key path")
        c.expectEqual(try store.read {
            try $0.fetch(Recipe.self, where: \.course == .main, sortedBy: [.descending(\.title)], limit: 2)
        }.map(\.id), [7, 4], "sorted descending by a key path, with a limit (titles compare by bytes)")
        c.expectEqual(try store.read { try $0.first(Recipe.self, where: .hasPrefix(\.title, "recipe \"1")) }?.id, 1)
        do {
            _ = try store.read { try $0.fetch(Recipe.self, where: \.doubled >= 4) }
            c.expect(false, "a computed property names no attribute")
        } catch let error as StoreError {
            c.expectEqual(error.code, .invalidArgument)
        }
        var live = try store.observe(Recipe.self, where: \.course == .starter, sortedBy: [.descending(\.id)])
            .makeAsyncIterator()
        c.expectEqual(try await live.next()?.map(\.id), [12, 9, 6, 3], "a live query by key paths")
        try store.writeSync { try $0.delete(Recipe.self, where: \.id == 9) }
        c.expectEqual(try await live.next()?.map(\.id), [12, 6, 3])
    }

    /// A model with arrays and a set of scalars, stored as JSON text.
    struct Parcel: DataObject, Equatable {
        static let entityName = "Parcel"
        static let primaryKey = "id"
        static let defaultSort = [SortKey.ascending("id")]
        var id: Int
        var tags: [String]
        var sizes: [Int]
        var doubles: Set<Double>
        var stops: [UUID]?
    }

    /// `contains` on an array property is element membership, as `Array.contains` is: never a
    /// substring of the JSON text (`["giftwrap"]` once matched "gift"), on every backend, for
    /// strings with quotes and commas, numbers that are prefixes of others, sets and optionals.
    static func containsOnAnArrayPropertyMatchesWholeElements(_ c: ConformanceContext) throws {
        let stop = UUID(uuid: (0x6F, 0x1A, 0x9D, 0x2E, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 1))
        let parcels = [
            Parcel(id: 1, tags: ["giftwrap"], sizes: [11, 2], doubles: [1.5], stops: nil),
            Parcel(id: 2, tags: ["gift", "red"], sizes: [1], doubles: [-0.5, 10], stops: [stop]),
            Parcel(id: 3, tags: ["a", "gift"], sizes: [], doubles: [], stops: []),
            Parcel(id: 4, tags: [#"x","gift"#, "b"], sizes: [-1, 21], doubles: [0.25], stops: nil),
            Parcel(id: 5, tags: [], sizes: [111], doubles: [15], stops: [UUID(), stop]),
            Parcel(id: 6, tags: ["gift,", "[gift]"], sizes: [12], doubles: [], stops: nil),
        ]
        let store = try c.open(Schema(version: 1, entities: [try Parcel.entitySchema()]), name: "parcels")
        try store.writeSync { w in for parcel in parcels { try w.insert(parcel) } }
        func ids(_ filter: ObjectFilter<Parcel>) throws -> [Int] {
            try store.read { try $0.fetch(Parcel.self, where: filter) }.map(\.id)
        }
        c.expectEqual(try ids(.contains(\.tags, "gift")), [2, 3], "tags has \"gift\"")
        c.expectEqual(try ids(.contains(\.tags, #"x","gift"#)), [4], "an element with quotes and a comma")
        c.expectEqual(try ids(.contains(\.tags, "gift,")), [6])
        c.expectEqual(try ids(.contains(\.tags, "[gift]")), [6])
        c.expectEqual(try ids(.contains(\.sizes, 1)), [2], "1 is not a prefix match of 11, 12 or 111")
        c.expectEqual(try ids(.contains(\.sizes, -1)), [4])
        c.expectEqual(try ids(.contains(\.doubles, 10)), [2], "a set")
        c.expectEqual(try ids(.contains(\.stops, stop)), [2, 5], "an optional array of UUIDs")
        c.expectEqual(try ids(!.contains(\.tags, "gift")), [1, 4, 5, 6])
        let untyped = try store.read { try $0.fetch(FetchRequest("Parcel", filter: Field("tags").hasElement("gift"))) }
        c.expectEqual(untyped.map(\.["id"]), [2, 3], "Field.hasElement")
        let substring = try store.read { try $0.fetch(FetchRequest("Parcel", filter: Field("tags").contains("gift"))) }
        c.expectEqual(substring.map(\.["id"]), [1, 2, 3, 4, 6], "Field.contains stays a text search")
        try store.close()
    }

    struct Sample: DataObject, Equatable {
        static let entityName = "Sample"
        static let primaryKey = "id"
        static let defaultSort = [SortKey.ascending("id")]
        var id: Int
        var readings: [Double]
        var floats: [Float]
        var labels: [String?]
        var flags: [Bool]
        var counts: [Int]
    }

    /// `contains` compares decoded elements, as `Array.contains` does: `-0.0` and `0.0` find each
    /// other, a `Float` element such as 0.1 is found, and a string element that holds `,null,`,
    /// `,1,` or `,true,` is not a null, a 1 or a true; text that is not a JSON array of scalars
    /// holds no element. The same on every backend.
    static func containsComparesDecodedElements(_ c: ConformanceContext) throws {
        let samples = [
            Sample(id: 1, readings: [-0.0, 2.5], floats: [0.1, 1.5], labels: ["a,null,b"], flags: [false],
                   counts: [7]),
            Sample(id: 2, readings: [0.0], floats: [0.2], labels: ["x,1,y", "z,true,w"], flags: [],
                   counts: []),
            Sample(id: 3, readings: [1e300, -1], floats: [], labels: [nil, "b"], flags: [true], counts: [1, -3]),
            Sample(id: 4, readings: [], floats: [-0.0], labels: ["[null]", #"q"u\o"#], flags: [], counts: [0]),
            // The six characters backslash, u, 0, 0, 0, 0 as one element, beside quotes.
            Sample(id: 5, readings: [], floats: [], labels: [#"\u0000"#, #""a""#, #"""#], flags: [], counts: []),
            // A real U+0000 element: every other element is still found, and so is it.
            Sample(id: 6, readings: [], floats: [], labels: ["\u{0}", "b", "nul\u{0}end"], flags: [], counts: []),
        ]
        let store = try c.open(Schema(version: 1, entities: [try Sample.entitySchema()]), name: "samples")
        try store.writeSync { w in for sample in samples { try w.insert(sample) } }
        func ids(_ filter: ObjectFilter<Sample>) throws -> [Int] {
            try store.read { try $0.fetch(Sample.self, where: filter) }.map(\.id)
        }
        func untyped(_ filter: Filter) throws -> [Value] {
            try store.read { try $0.fetch(FetchRequest("Sample", filter: filter)) }.map(\.["id"])
        }
        c.expectEqual(try ids(.contains(\.readings, 0.0)), [1, 2], "0.0 finds -0.0")
        c.expectEqual(try ids(.contains(\.readings, -0.0)), [1, 2], "-0.0 finds 0.0")
        c.expectEqual(try ids(.contains(\.floats, 0.0)), [4], "a Float -0.0")
        c.expectEqual(try ids(.contains(\.floats, Float(0.1))), [1], "a Float 0.1")
        c.expectEqual(try ids(.contains(\.floats, Float(0.2))), [2])
        c.expectEqual(try ids(.contains(\.readings, 1e300)), [3])
        c.expectEqual(try untyped(Field("floats").hasElement(0.1)), [1], "a double 0.1 finds a Float 0.1")
        c.expectEqual(try untyped(Field("labels").hasElement(.null)), [3], "only a null element is null")
        c.expectEqual(try untyped(Field("labels").hasElement(1)), [], "no string element is the number 1")
        c.expectEqual(try untyped(Field("labels").hasElement(true)), [], "no string element is true")
        c.expectEqual(try untyped(Field("labels").hasElement("a,null,b")), [1])
        c.expectEqual(try untyped(Field("labels").hasElement(#"q"u\o"#)), [4], "escapes decoded")
        c.expectEqual(try untyped(Field("labels").hasElement("[null]")), [4])
        c.expectEqual(try ids(.contains(\.flags, true)), [3])
        c.expectEqual(try ids(.contains(\.flags, false)), [1])
        c.expectEqual(try ids(.contains(\.counts, 1)), [3])
        c.expectEqual(try ids(.contains(\.counts, 0)), [4])
        c.expectEqual(try untyped(Field("counts").hasElement(1.0)), [3], "numbers by value")
        c.expectEqual(try untyped(!Field("counts").hasElement(7)), [2, 3, 4, 5, 6])
        c.expectEqual(try ids(.contains(\.labels, #"""#)), [5], "a quote beside a backslash-u0000 element")
        c.expectEqual(try ids(.contains(\.labels, #"\u0000"#)), [5], "backslash-u0000 is text, not a NUL")
        c.expectEqual(try ids(.contains(\.labels, #""a""#)), [5])
        c.expectEqual(try ids(.contains(\.labels, "b")), [3, 6], "an array with a NUL element still holds b")
        c.expectEqual(try ids(.contains(\.labels, "\u{0}")), [6], "the NUL element itself")
        c.expectEqual(try ids(.contains(\.labels, "nul\u{0}end")), [6])
        c.expectEqual(try ids(.contains(\.labels, "nul")), [], "whole elements, not a prefix before the NUL")
        c.expectError(.typeMismatch, naming: "id", "an element in an int attribute") {
            _ = try untyped(Field("id").hasElement(1))
        }
        try store.close()
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("Typed models", "containsOnAnArrayPropertyMatchesWholeElements",
                        containsOnAnArrayPropertyMatchesWholeElements),
        ConformanceCase("Typed models", "containsComparesDecodedElements", containsComparesDecodedElements),
        ConformanceCase("Typed models", "keyPathsNameAttributesInFetchesSortsAndLiveQueries",
                        keyPathsNameAttributesInFetchesSortsAndLiveQueries),
        ConformanceCase("Typed models", "enumsCollectionsAndNestedStructsDeriveASchemaAndRoundTrip",
                        enumsCollectionsAndNestedStructsDeriveASchemaAndRoundTrip),
        ConformanceCase("Typed models", "filtersTakeSwiftValuesOfEveryType", filtersTakeSwiftValuesOfEveryType),
    ]
}
