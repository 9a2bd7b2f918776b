// The macro exists only with the package's trait Models (on by default, and turned on by
// ExampleServer, which the test command builds with): without it there is nothing to test here.
#if Models
@_spi(Backend) import DataStoreAPI
import DataStoreModels
import DataStoreTestSupport
import Foundation
import InMemoryStore
import LMDBStore
import PostgresStore
import SQLiteStore
import Synchronization
import Testing

/// A model declared with the macro: one property of each kind the store holds, optionals and an
/// enum included.
@StoredModel("Pancake")
struct MacroPancake: Equatable {
    enum Size: String, Codable, CaseIterable, RowValue { case small, large }

    @StoredKey var id: UUID
    @StoredIndex var flavor: String
    var rating: Int
    var weight: Double?
    var crispy: Bool
    var bakedAt: Date
    var photo: Data?
    var size: Size = .small
    var grams: Int64
    var small: Int8
    var ratio: Float
    var tag: UUID?
    var raw: [UInt8]
    @StoredUnique var code: String?

    static let defaultSort = [SortKey.ascending("rating"), .ascending("id")]

    static func sample(_ i: Int) -> MacroPancake {
        MacroPancake(id: UUID(), flavor: ["blueberry", "plain", "banana"][i % 3], rating: i % 5,
                     weight: i % 2 == 0 ? Double(i) / 4 : nil, crispy: i % 2 == 1,
                     bakedAt: Date(timeIntervalSince1970: 1_700_000_000 + Double(i) * 0.000_001),
                     photo: i % 3 == 0 ? Data([UInt8(i), 0]) : nil, size: i % 2 == 0 ? .small : .large,
                     grams: Int64(i) * 1_000, small: Int8(i % 100), ratio: Float(i) / 8, tag: i % 4 == 0 ? UUID() : nil,
                     raw: Array(repeating: UInt8(i % 256), count: i % 4), code: i % 3 == 1 ? "c\(i)" : nil)
    }

    /// Edge values: empty and non-ASCII strings, the integers' and doubles' ends, the earliest
    /// date a store holds, empty bytes.
    static func samples() -> [MacroPancake] {
        var pancakes = (0..<24).map(sample)
        pancakes[1].flavor = ""
        pancakes[2].flavor = "n\u{0}ul \u{1F95E} é"
        pancakes[3].rating = Int.max
        pancakes[4].rating = Int.min
        pancakes[5].weight = -0.0
        pancakes[6].weight = .infinity
        pancakes[7].bakedAt = Date(timeIntervalSince1970: -62_135_596_800)
        pancakes[8].photo = Data()
        pancakes[9].grams = .min
        pancakes[10].grams = .max
        pancakes[11].small = .min
        pancakes[12].ratio = .greatestFiniteMagnitude
        pancakes[13].weight = -.infinity
        pancakes[14].raw = [0, 255, 0]
        return pancakes
    }
}

/// The same model read and written by hand, for comparing.
struct HandMacroPancake: RowCodable, Equatable {
    static let entityName = "Pancake"
    static let primaryKey = "id"
    var pancake: MacroPancake

    init(_ pancake: MacroPancake) { self.pancake = pancake }

    init(row: borrowing Row) throws {
        guard let size = MacroPancake.Size(rawValue: try row.string("size")),
              let small = Int8(exactly: try row.int("small")), let rating = Int(exactly: try row.int("rating")) else {
            throw StoreError(.typeMismatch, "a value out of range")
        }
        pancake = MacroPancake(
            id: try row.uuid("id"), flavor: try row.string("flavor"), rating: rating,
            weight: try row.isNull("weight") ? nil : try row.double("weight"), crispy: try row.bool("crispy"),
            bakedAt: try row.date("bakedAt").date, photo: try row.isNull("photo") ? nil : Data(try row.bytes("photo")),
            size: size, grams: try row.int("grams"), small: small, ratio: Float(try row.double("ratio")),
            tag: try row.isNull("tag") ? nil : try row.uuid("tag"), raw: try row.bytes("raw"),
            code: try row.isNull("code") ? nil : try row.string("code"))
    }

    func record() throws -> Record {
        let p = pancake
        return [
            "id": .uuid(p.id), "flavor": .string(p.flavor), "rating": .int(Int64(p.rating)),
            "weight": p.weight.map { .double($0) } ?? .null, "crispy": .bool(p.crispy),
            "bakedAt": .date(try Timestamp(p.bakedAt)), "photo": p.photo.map { .bytes(Array($0)) } ?? .null,
            "size": .string(p.size.rawValue), "grams": .int(p.grams), "small": .int(Int64(p.small)),
            "ratio": .double(Double(p.ratio)), "tag": p.tag.map { .uuid($0) } ?? .null, "raw": .bytes(p.raw),
            "code": p.code.map { .string($0) } ?? .null,
        ]
    }

    init(from decoder: any Decoder) throws { pancake = try MacroPancake(from: decoder) }
    func encode(to encoder: any Encoder) throws { try pancake.encode(to: encoder) }
}

enum ModelBackend: String, CaseIterable, Sendable {
    case memory, sqlite, lmdb, postgres

    func open(_ directory: TemporaryDirectory, _ schema: Schema,
              upgrades: SchemaUpgrades = SchemaUpgrades()) throws -> (any DataStore)? {
        switch self {
        case .memory: return try InMemoryStore(schema: schema)
        case .sqlite: return try SQLiteStore(path: directory.path("store.sqlite"), schema: schema, upgrades: upgrades)
        case .lmdb: return try LMDBStore(path: directory.path("store.lmdb"), schema: schema, upgrades: upgrades)
        case .postgres:
            #if Postgres
            // The directory's own name (a UUID): the same store when the test opens it again.
            let schemaName = "models_" + directory.url.lastPathComponent.filter(\.isHexDigit).suffix(12).lowercased()
            let location = try PostgresLocation(parsing: "postgres://postgres@/datastore?schema=\(schemaName)"
                + "&host=\(TestPostgresServer.host)")
            return try PostgresStore(location: location, schema: schema, upgrades: upgrades, durability: .normal)
            #else
            return nil
            #endif
        }
    }
}

@Test func theMacroWritesTheSchemaItsPropertiesDeclare() throws {
    let entity = try MacroPancake.entitySchema()
    #expect(MacroPancake.entityName == "Pancake")
    #expect(MacroPancake.primaryKey == "id")
    #expect(entity.attributes == [
        Attribute("id", .uuid), Attribute("flavor", .string), Attribute("rating", .int),
        Attribute("weight", .double, optional: true), Attribute("crispy", .bool), Attribute("bakedAt", .date),
        Attribute("photo", .bytes, optional: true), Attribute("size", .string, default: "small"), Attribute("grams", .int),
        Attribute("small", .int), Attribute("ratio", .double), Attribute("tag", .uuid, optional: true),
        Attribute("raw", .bytes), Attribute("code", .string, optional: true),
    ])
    #expect(entity.indexes == [Index("Pancake_flavor", on: ["flavor"]), Index("Pancake_code", on: ["code"], unique: true)])
    // The Codable conformance the compiler synthesizes derives the same attributes (without the
    // defaults, which only the declarations say).
    let probed = try HandMacroPancake.entitySchema()
    #expect(probed.attributes == entity.attributes.map { Attribute($0.name, $0.type, optional: $0.isOptional) })
}

/// Objects decoded through the generated code, by hand and through `Codable` are equal, value
/// for value, edge values included; and each writes the same record.
@Test(arguments: ModelBackend.allCases)
func generatedHandWrittenAndCodableModelsAgree(_ backend: ModelBackend) throws {
    let directory = try TemporaryDirectory()
    let schema = try Schema(version: 1, models: [MacroPancake.self])
    guard let store = try backend.open(directory, schema) else { return }
    defer { try? store.close() }
    let pancakes = MacroPancake.samples()
    try store.writeSync { w in
        for (i, pancake) in pancakes.enumerated() {
            switch i % 3 {
            case 0: try w.insert(pancake)
            case 1: try w.insert(HandMacroPancake(pancake))
            default: try w.insert(RecordEncoder.encode(pancake), into: "Pancake")
            }
        }
    }
    let generated = try store.read { try $0.fetch(MacroPancake.self) }
    let byHand = try store.read { try $0.fetch(HandMacroPancake.self, sortedBy: MacroPancake.defaultSort) }.map(\.pancake)
    let throughCodable = try store.read { try $0.fetch(FetchRequest("Pancake", sort: MacroPancake.defaultSort)) }
        .map { try RecordDecoder.decode(MacroPancake.self, from: $0) }
    #expect(generated.count == pancakes.count)
    #expect(generated == byHand)
    #expect(generated == throughCodable)
    let written = pancakes.sorted { ($0.rating, $0.id.uuidString) < ($1.rating, $1.id.uuidString) }
    #expect(Set(generated.map(\.id)) == Set(written.map(\.id)))
    for pancake in pancakes {
        #expect(try store.read { try $0.get(MacroPancake.self, key: .uuid(pancake.id)) } == pancake)
        let encoded = try RecordEncoder.encode(pancake)
        let generatedRecord = try pancake.record()
        let handRecord = try HandMacroPancake(pancake).record()
        for attribute in schema.entities[0].attributes {
            #expect(generatedRecord[attribute.name] == handRecord[attribute.name], "\(attribute.name)")
            #expect(generatedRecord[attribute.name] == encoded[attribute.name], "\(attribute.name)")
        }
    }
    // An enum declared RowValue in filters, by key path and by name.
    let large = try store.read { try $0.fetch(MacroPancake.self, where: \.size == .large) }
    #expect(Set(large.map(\.id)) == Set(pancakes.filter { $0.size == .large }.map(\.id)))
    let notLarge = try store.read { try $0.count(FetchRequest("Pancake", filter: Field("size") != MacroPancake.Size.large)) }
    #expect(notLarge == pancakes.count - large.count)
    // The unique index refuses a second item with the same code.
    var twin = MacroPancake.sample(100)
    twin.code = pancakes[1].code
    #expect(throws: StoreError.self) { try store.writeSync { try $0.insert(twin) } }
    // A date a store cannot hold is refused by the generated encoder as by Codable.
    var far = MacroPancake.sample(101)
    far.bakedAt = .distantFuture.addingTimeInterval(1e13)
    #expect(throws: StoreError.self) { try far.record() }
    #expect(throws: StoreError.self) { try RecordEncoder.encode(far) }
}

/// A stored value the Swift type cannot hold is an error naming the attribute, not a crash.
@Test func aValueTheTypeCannotHoldIsATypeMismatch() throws {
    let schema = try Schema(version: 1, models: [MacroPancake.self])
    let store = try InMemoryStore(schema: schema)
    var record = try MacroPancake.sample(1).record()
    let first = record["id"]
    record["small"] = .int(1_000)
    try store.writeSync { try $0.insert(record, into: "Pancake") }
    let error = #expect(throws: StoreError.self) { try store.read { try $0.fetch(MacroPancake.self) } }
    #expect(error?.code == .typeMismatch)
    #expect(error?.message.contains("small") == true)
    record = try MacroPancake.sample(2).record()
    record["size"] = "medium"
    try store.writeSync { try $0.insert(record, into: "Pancake") }
    try store.writeSync { try $0.delete("Pancake", key: first) }
    let enumError = #expect(throws: StoreError.self) { try store.read { try $0.fetch(MacroPancake.self) } }
    #expect(enumError?.message.contains("medium") == true)
}

/// A typed fetch in key order, which LMDB reads from each record's fields in place (each
/// property read in turn, no attribute looked up by name): the same models the rows give, every
/// edge value, with offsets and limits, on every backend; and where a field is not one the model
/// holds (a value past `Int8`, a case no enum has) or a record is damaged, the same error as the
/// rows give, not a model.
@Test(arguments: ModelBackend.allCases)
func aTypedFetchInKeyOrderReadsWhatTheRowsHold(_ backend: ModelBackend) throws {
    let dir = try TemporaryDirectory()
    guard let store = try backend.open(dir, try Schema(version: 1, models: [MacroPancake.self])) else { return }
    defer { try? store.close() }
    try store.writeSync { w in for pancake in MacroPancake.samples() { try w.insert(pancake) } }
    try store.read { r in
        let byRow = try r.fetch(HandMacroPancake.self, sortedBy: []).map(\.pancake)
        #expect(byRow.count == 24)
        #expect(try r.fetch(MacroPancake.self, sortedBy: []) == byRow)
        for (offset, limit) in [(0, 1), (3, 5), (20, 10), (24, 1), (0, 0)] {
            #expect(try r.fetch(MacroPancake.self, sortedBy: [], offset: offset, limit: limit)
                        == Array(byRow.dropFirst(offset).prefix(limit)), "offset \(offset), limit \(limit)")
            var visited: [MacroPancake] = []
            try r.forEach(MacroPancake.self, sortedBy: [], offset: offset, limit: limit) { visited.append($0) }
            #expect(visited == Array(byRow.dropFirst(offset).prefix(limit)), "forEach: offset \(offset), limit \(limit)")
        }
        var all: [MacroPancake] = []
        try r.forEach(MacroPancake.self, sortedBy: []) { all.append($0) }
        #expect(all == byRow)
    }
    for (attribute, value, naming) in [("small", Value.int(1_000), "small"), ("size", "medium", "medium")] {
        var record = try MacroPancake.sample(30).record()
        record[attribute] = value
        try store.writeSync { try $0.insert(record, into: "Pancake") }
        let byRow = #expect(throws: StoreError.self) { try store.read { try $0.fetch(HandMacroPancake.self, sortedBy: []) } }
        let typed = #expect(throws: StoreError.self) { try store.read { try $0.fetch(MacroPancake.self, sortedBy: []) } }
        #expect(typed?.code == .typeMismatch && typed?.message.contains(naming) == true, "\(String(describing: typed))")
        #expect(byRow?.code == .typeMismatch)
        try store.writeSync { _ = try $0.delete("Pancake", key: record["id"]) }
    }
}

/// A model read by hand from stored fields, counting its reads: which backends hand it records.
private struct Tally: RowCodable, Equatable {
    static let entityName = "Tally"
    static let primaryKey = "id"
    static let reads = Mutex(0)
    static let layout = StoredModelLayout(["id", "small", "label"])
    static var storedModelLayout: StoredModelLayout? { layout }
    static var readsStoredFields: Bool { true }
    var id: Int
    var small: Int8
    var label: String?

    init(id: Int, small: Int8, label: String?) { (self.id, self.small, self.label) = (id, small, label) }

    init(row: borrowing Row) throws {
        id = try Int(row: row, attribute: "id")
        small = try Int8(row: row, attribute: "small")
        label = try String?(row: row, attribute: "label")
    }

    init?(storedFields reader: inout StoredFieldReader) {
        Self.reads.withLock { $0 += 1 }
        guard let id = Int.readStored(&reader), let small = Int8.readStored(&reader),
              let label = String?.readStored(&reader), reader.isAtEnd else { return nil }
        (self.id, self.small, self.label) = (id, small, label)
    }

    func record() throws -> Record { ["id": .int(Int64(id)), "small": .int(Int64(small)), "label": label.map { .string($0) } ?? .null] }
}

/// The typed fetch reads stored fields on LMDB, one read a record (each `Int`, `Int8` and
/// optional read by its type's `readStored`), and nowhere else; a record whose field the model
/// cannot hold (a value past `Int8`) reads the fetch again by name, and fails as the rows do.
@Test(arguments: ModelBackend.allCases)
func theTypedFetchReadsStoredFieldsOnLMDBAlone(_ backend: ModelBackend) throws {
    let dir = try TemporaryDirectory()
    guard let store = try backend.open(dir, try Schema(version: 1, models: [Tally.self])) else { return }
    defer { try? store.close() }
    let tallies = (0..<10).map { Tally(id: $0, small: Int8($0 - 5), label: $0 % 3 == 0 ? nil : "t\($0)") }
    try store.writeSync { w in for tally in tallies { try w.insert(tally) } }
    Tally.reads.withLock { $0 = 0 }
    #expect(try store.read { try $0.fetch(Tally.self, sortedBy: []) } == tallies)
    #expect(Tally.reads.withLock { $0 } == (backend == .lmdb ? 10 : 0), "\(backend)")
    // forEach reads them as the fetch does.
    Tally.reads.withLock { $0 = 0 }
    var visited: [Tally] = []
    try store.read { try $0.forEach(Tally.self, sortedBy: []) { visited.append($0) } }
    #expect(visited == tallies)
    #expect(Tally.reads.withLock { $0 } == (backend == .lmdb ? 10 : 0), "\(backend)")
    // A record in the middle whose field the model cannot hold: the fetch fails; forEach hands
    // over the models before it once each (read from stored fields on LMDB), then fails as the
    // rows do, and hands over none after it.
    try store.writeSync { w in
        _ = try w.delete("Tally", key: 5)
        try w.insert(["id": 5, "small": 300], into: "Tally")
    }
    #expect(throws: StoreError.self) { try store.read { try $0.fetch(Tally.self, sortedBy: []) } }
    visited = []
    let failed = #expect(throws: StoreError.self) {
        try store.read { try $0.forEach(Tally.self, sortedBy: []) { visited.append($0) } }
    }
    #expect(failed?.code == .typeMismatch, "\(String(describing: failed))")
    #expect(visited == Array(tallies.prefix(5)), "\(visited.map(\.id))")
    // With an offset and a limit past the record, the same.
    visited = []
    #expect(throws: StoreError.self) {
        try store.read { try $0.forEach(Tally.self, sortedBy: [], offset: 2, limit: 6) { visited.append($0) } }
    }
    #expect(visited == Array(tallies[2..<5]))
}

/// A record of an LMDB store damaged inside a value: the typed fetch that reads fields in place
/// fails as the rows' read does, naming the damage, and returns no model.
@Test func aDamagedRecordFailsATypedFetchAsTheRowsDo() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("damaged.lmdb")
    let schema = try Schema(version: 1, models: [MacroPancake.self])
    var pancakes = MacroPancake.samples()
    pancakes[5].raw = Array("bytes no index holds, to damage".utf8)
    var store = try LMDBStore(path: path, schema: schema)
    try store.writeSync { w in for pancake in pancakes { try w.insert(pancake) } }
    try store.close()
    let file = URL(fileURLWithPath: path + "/data.mdb")
    var bytes = [UInt8](try Data(contentsOf: file))
    let marker = Array("bytes no index holds, to damage".utf8)
    let at = try #require((0...(bytes.count - marker.count)).first { bytes[$0..<($0 + marker.count)].elementsEqual(marker) })
    bytes[at + 2] ^= 0x01
    try Data(bytes).write(to: file)
    store = try LMDBStore(path: path, schema: schema)
    defer { try? store.close() }
    let byRow = #expect(throws: StoreError.self) { try store.read { try $0.fetch(HandMacroPancake.self, sortedBy: []) } }
    let typed = #expect(throws: StoreError.self) { try store.read { try $0.fetch(MacroPancake.self, sortedBy: []) } }
    #expect(byRow?.code == .corrupt)
    #expect(typed?.code == .corrupt && typed?.message == byRow?.message, "\(String(describing: typed))")
    // forEach fails the same way, and hands over no model twice.
    var visited: [MacroPancake] = []
    let failed = #expect(throws: StoreError.self) {
        try store.read { try $0.forEach(MacroPancake.self, sortedBy: []) { visited.append($0) } }
    }
    #expect(failed?.message == byRow?.message, "\(String(describing: failed))")
    #expect(Set(visited.map(\.id)).count == visited.count)
    #expect(visited.count < pancakes.count)
}

/// Two models related by the relationships their static properties declare.
@StoredModel
struct Writer: Equatable {
    static let notes = toMany("notes", Jotting.self, inverse: "writer", deleteRule: .cascade)
    var id: Int
    var name: String
}

@StoredModel
struct Jotting: Equatable {
    static let writer = toOne("writer", Writer.self, inverse: "notes")
    static let defaultSort = [SortKey.ascending("title")]
    var id: UUID
    @StoredIndex var title: String
    var writer: Int?
}

/// The relationships the macro lists reach the schema, and behave there as declared: eager
/// loading, filters across the to-one, the cascade, the reference check.
@Test(arguments: ModelBackend.allCases)
func relationshipsDeclaredOnMacroModelsHoldOnEveryBackend(_ backend: ModelBackend) throws {
    #expect(Writer.relationships == [.toMany("notes", to: "Jotting", inverse: "writer", deleteRule: .cascade)])
    #expect(Jotting.relationships == [.toOne("writer", to: "Writer", inverse: "notes")])
    let directory = try TemporaryDirectory()
    let schema = try Schema(version: 1, models: [Writer.self, Jotting.self])
    guard let store = try backend.open(directory, schema) else { return }
    defer { try? store.close() }
    try store.writeSync { w in
        try w.insert(Writer(id: 1, name: "Ann"))
        try w.insert(Writer(id: 2, name: "Bo"))
        try w.insert(Jotting(id: UUID(), title: "b", writer: 1))
        try w.insert(Jotting(id: UUID(), title: "a", writer: 1))
        try w.insert(Jotting(id: UUID(), title: "c", writer: 2))
    }
    let anns = try store.read { try $0.fetch(Jotting.self, where: Jotting.writer[\.name] == "Ann") }
    #expect(anns.map(\.title) == ["a", "b"])
    let writers = try store.read { try $0.fetch(Writer.self, including: Writer.notes) }
    #expect(try writers.map { try $0.related(Writer.notes).count } == [2, 1])
    #expect(throws: StoreError.self) {
        try store.writeSync { try $0.insert(Jotting(id: UUID(), title: "orphan", writer: 9)) }
    }
    try store.writeSync { try $0.delete(Writer(id: 1, name: "Ann")) }
    #expect(try store.read { try $0.fetch(Jotting.self) }.map(\.title) == ["c"])
}

/// Two versions of a model, each declared with the macro next to its version, and the plan that
/// joins them.
enum JournalV1: ModelVersion {
    static let version = 1
    static let models: [any DataObject.Type] = [Entry.self]

    @StoredModel
    struct Entry: Equatable {
        var id: Int
        var text: String
        var mood: String?
    }
}

enum JournalV2: ModelVersion {
    static let version = 2
    static let models: [any DataObject.Type] = [Entry.self]
    /// A type next to the model, which the code the macro writes (in an extension of
    /// `JournalV2.Entry`, where the enclosing enum's members are not in scope) must not name.
    enum Mood: String, Codable, RowValue { case calm, glad }
    static let upgradeSteps: [UpgradeStep] = [
        .step(.renameAttribute(entity: "Entry", from: "text", to: "body")),
        .step(.addAttribute(entity: "Entry", attribute: Attribute("stars", .int, default: 3))),
        .step(.addIndex(entity: "Entry", index: Index("Entry_stars", on: ["stars"]))),
    ]

    @StoredModel
    struct Entry: Equatable {
        var id: Int
        var body: String
        var mood: Mood?
        @StoredIndex var stars: Int = 3
    }
}

enum Journal: ModelVersionPlan {
    static let versions: [any ModelVersion.Type] = [JournalV1.self, JournalV2.self]
}

enum BrokenJournal: ModelVersionPlan {
    static let versions: [any ModelVersion.Type] = [JournalV2.self, JournalV1.self]
}

/// A store written by the first version opens with the plan's schema and upgrades, on every
/// backend that keeps its items between opens.
@Test(arguments: ModelBackend.allCases)
func aModelVersionPlanUpgradesAStoreOfTheVersionBefore(_ backend: ModelBackend) throws {
    #expect(try Journal.schema() == JournalV2.schema())
    #expect(try Journal.schema().version == 2)
    #expect(try Journal.upgrades().steps.keys.sorted() == [2])
    guard backend != .memory else { return }
    let directory = try TemporaryDirectory()
    guard let old = try backend.open(directory, JournalV1.schema()) else { return }
    try old.writeSync { w in
        try w.insert(JournalV1.Entry(id: 1, text: "first", mood: nil))
        try w.insert(JournalV1.Entry(id: 2, text: "second", mood: "calm"))
    }
    try old.close()
    guard let store = try backend.open(directory, Journal.schema(), upgrades: Journal.upgrades()) else { return }
    defer { try? store.close() }
    #expect(try store.read { try $0.fetch(JournalV2.Entry.self, sortedBy: [.ascending("id")]) } == [
        JournalV2.Entry(id: 1, body: "first", mood: nil, stars: 3),
        JournalV2.Entry(id: 2, body: "second", mood: .calm, stars: 3),
    ])
    #expect(try store.schemaHistory().map(\.toVersion) == [2])
}

/// A plan whose versions go backwards, or skip the steps, is refused naming the version.
@Test func aModelVersionPlanOutOfOrderIsRefused() {
    let error = #expect(throws: StoreError.self) { try BrokenJournal.schema() }
    #expect(error?.code == .invalidArgument)
    #expect(error?.message.contains("from version 2") == true)
    enum NoSteps: ModelVersion {
        static let version = 2
        static let models: [any DataObject.Type] = [JournalV2.Entry.self]
    }
    enum Stepless: ModelVersionPlan {
        static let versions: [any ModelVersion.Type] = [JournalV1.self, NoSteps.self]
    }
    let stepless = #expect(throws: StoreError.self) { try Stepless.upgrades() }
    #expect(stepless?.message.contains("declares no upgradeSteps") == true)
}

/// A record builder given fewer or more values than its layout has names refuses to build the
/// record, naming both counts; given as many, it builds what a literal in that order builds.
@Test func aRecordBuilderCountsItsValues() throws {
    let layout = StoredModelLayout(["id", "title"])
    var short = StoredRecordBuilder(layout)
    try short.append(Int64(1))
    let tooFew = #expect(throws: StoreError.self) { try short.record() }
    #expect(tooFew?.code == .invalidArgument)
    #expect(tooFew?.message.contains("2 attributes (id, title) was given 1 values") == true)
    var long = short
    try long.append("first")
    try long.append("extra")
    #expect(throws: StoreError.self) { try long.record() }
    var exact = StoredRecordBuilder(layout)
    try exact.append(Int64(1))
    try exact.append("first")
    let record = try exact.record()
    #expect(record == ["id": 1, "title": "first"])
    #expect(record.attributeNames == ["id", "title"])
    // Large values are kept as they are.
    let longText = String(repeating: "é", count: 40_000)
    var large = StoredRecordBuilder(StoredModelLayout(["id", "title", "raw", "note"]))
    try large.append(Int64(2))
    try large.append(longText)
    try large.append([UInt8](repeating: 7, count: 100_000))
    try large.append(String?.none)
    #expect(try large.record() == ["id": 2, "title": .string(longText), "raw": .bytes(Array(repeating: 7, count: 100_000)),
                                   "note": .null])
}

/// A generated record goes into a store whose entity has more attributes than the model, or
/// the same ones in another order: its values land under their names, the others take their
/// defaults, on every backend.
@Test(arguments: ModelBackend.allCases)
func aGeneratedRecordFitsAnEntityOfAnotherLayout(_ backend: ModelBackend) throws {
    let directory = try TemporaryDirectory()
    let model = try MacroPancake.entitySchema()
    var attributes = Array(model.attributes.reversed())
    attributes.insert(Attribute("extra", .string, default: "none"), at: 3)
    let entity = EntitySchema("Pancake", primaryKey: "id", attributes: attributes, indexes: model.indexes)
    guard let store = try backend.open(directory, Schema(version: 1, entities: [entity])) else { return }
    defer { try? store.close() }
    let pancakes = MacroPancake.samples()
    try store.writeSync { w in for pancake in pancakes { try w.insert(pancake) } }
    let read = try store.read { try $0.fetch(MacroPancake.self, sortedBy: MacroPancake.defaultSort) }
    #expect(read == pancakes.sorted { ($0.rating, $0.id.uuidString) < ($1.rating, $1.id.uuidString) })
    let extras = try store.read { try $0.fetch(FetchRequest("Pancake")).map { $0["extra"] } }
    #expect(extras == Array(repeating: "none", count: pancakes.count))
}
#endif
