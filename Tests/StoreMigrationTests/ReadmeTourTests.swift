import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import InMemoryStore
import JSONLStore
import LMDBStore
import SQLiteStore
import StoreMigration
import Synchronization
import Testing

/// The README's tour, run on every backend, so that the documented code compiles and works.
@Test(arguments: ["sqlite", "lmdb", "memory"])
func theReadmeTourRunsOnEveryBackend(_ kind: String) async throws {
    let dir = try TemporaryDirectory()
    let schema = Schema(version: 1, entities: [
        EntitySchema("Pancake", primaryKey: "id", attributes: [
            Attribute("id", .uuid),
            Attribute("flavor", .string),
            Attribute("rating", .int, default: 0),
            Attribute("weight", .double, optional: true),
        ], indexes: [Index("byFlavor", on: ["flavor"])]),
    ])
    let store: any DataStore = switch kind {
    case "sqlite": try SQLiteStore(path: dir.url.appendingPathComponent("app.sqlite").path, schema: schema)
    case "lmdb": try LMDBStore(path: dir.url.appendingPathComponent("app.lmdb").path, schema: schema)
    default: try InMemoryStore(schema: schema)
    }
    try store.writeSync { writer in
        try writer.insert(["id": .uuid(UUID()), "flavor": "blueberry", "rating": 5], into: "Pancake")
    }
    let best = try store.read { reader in
        try reader.fetch(FetchRequest("Pancake", filter: Field("rating") >= 4 && Field("flavor").hasPrefix("blue"),
                                      sort: [.descending("rating")], limit: 10))
    }
    #expect(best.count == 1)
    var flavors: [Value] = []
    try store.read { reader in
        try reader.forEach(FetchRequest("Pancake", sort: [.ascending("flavor")])) { pancake in
            flavors.append(pancake["flavor"])
        }
    }
    #expect(flavors == ["blueberry"])
    var paged: [Value] = []
    try store.read { reader in
        var page: [Record] = []
        var after: Value? = nil
        repeat {
            try reader.scan("Pancake", after: after, limit: 1_000, into: &page)
            after = page.last?["id"]
            paged += page.map { $0["flavor"] }
        } while page.count == 1_000
    }
    #expect(paged == ["blueberry"])
    let count = try await store.writeAsync { writer in try writer.count(FetchRequest("Pancake")) }
    #expect(count == 1)
    try store.waitForPendingWrites()
    let draft = try store.makeChild()
    try draft.writeSync { try $0.deleteAll("Pancake") }
    let report = try store.merge(draft, policy: .fail)
    #expect(report.deleted == 1)
    try store.close()
}

struct TourPancake: DataObject, Equatable {
    static let entityName = "Pancake"
    static let primaryKey = "id"
    static let defaultSort = [SortKey.descending("rating")]
    var id: UUID
    var flavor: String
    var rating: Int
    var weight: Double?
}

@Test func theReadmeTypedModelExampleWorks() throws {
    let store = try InMemoryStore(schema: Schema(entities: [try TourPancake.entitySchema()]))
    let pancake = TourPancake(id: UUID(), flavor: "plain", rating: 3, weight: nil)
    try store.writeSync { try $0.insert(pancake) }
    let pancakes = try store.read { try $0.fetch(TourPancake.self, where: .matching(["flavor": ["plain", "banana"]])) }
    #expect(pancakes == [pancake])
    var visited: [String] = []
    try store.read { try $0.forEach(TourPancake.self, where: Field("rating") >= 3) { visited.append($0.flavor) } }
    #expect(visited == ["plain"])
}

/// Version 1 of the README's typed model.
struct PancakeV1: DataObject {
    static let entityName = "Pancake"
    static let primaryKey = "id"
    var id: UUID
    var flavor: String
    var rating: Int
}

/// Version 2: `rating` renamed to `stars`, a new optional `topping`.
struct PancakeV2: DataObject {
    static let entityName = "Pancake"
    static let primaryKey = "id"
    var id: UUID
    var flavor: String
    var stars: Int
    var topping: String?
}

/// The README's schema-upgrade example, on every backend.
@Test(arguments: ["sqlite", "lmdb", "memory"])
func theReadmeSchemaUpgradeRunsOnEveryBackend(_ kind: String) throws {
    let dir = try TemporaryDirectory()
    let database = InMemoryDatabase()
    func open(_ schema: Schema, _ upgrades: SchemaUpgrades = SchemaUpgrades()) throws -> any DataStore {
        switch kind {
        case "sqlite": try SQLiteStore(path: dir.path("app.sqlite"), schema: schema, upgrades: upgrades)
        case "lmdb": try LMDBStore(path: dir.path("app.lmdb"), schema: schema, upgrades: upgrades)
        default: try InMemoryStore(database: database, schema: schema, upgrades: upgrades)
        }
    }
    let v1 = try open(Schema(version: 1, entities: [try PancakeV1.entitySchema()]))
    let id = UUID()
    try v1.writeSync { try $0.insert(PancakeV1(id: id, flavor: "plain", rating: 4)) }
    // The typed layer names each difference and the step that accounts for it.
    let differences = try PancakeV2.schemaDifferences(in: v1)
    #expect(differences.map(\.description) == [
        "attribute 'Pancake.rating' was removed, with its values (step: remove attribute Pancake.rating)",
        "attribute 'Pancake.stars' is new (a new required attribute needs a default for the existing items)",
        "attribute 'Pancake.topping' is new (step: add attribute Pancake.topping (string, optional))",
    ])
    try v1.close()
    // Without steps, opening with version 2 fails and changes nothing.
    let v2Schema = Schema(version: 2, entities: [try PancakeV2.entitySchema()])
    #expect(throws: StoreError.self) { try open(v2Schema) }

    var upgrades = SchemaUpgrades()
    upgrades.version(2,
                       .renameAttribute(entity: "Pancake", from: "rating", to: "stars"),
                       .addAttribute(entity: "Pancake", attribute: Attribute("topping", .string, optional: true)))
    let store = try open(v2Schema, upgrades)
    let pancake = try store.read { try $0.get(PancakeV2.self, key: .uuid(id)) }
    #expect(pancake?.stars == 4 && pancake?.topping == nil)
    #expect(try (store as? Store)?.schemaHistory().map(\.toVersion) == [2])
    try store.close()
}

/// The README's change-feed and live-query examples, on every backend.
@Test(arguments: ["sqlite", "lmdb", "memory"])
func theReadmeFeedExamplesRunOnEveryBackend(_ kind: String) async throws {
    let dir = try TemporaryDirectory()
    let schema = Schema(entities: [try TourPancake.entitySchema()])
    let store: any DataStore = switch kind {
    case "sqlite": try SQLiteStore(path: dir.path("app.sqlite"), schema: schema)
    case "lmdb": try LMDBStore(path: dir.path("app.lmdb"), schema: schema)
    default: try InMemoryStore(schema: schema)
    }
    defer { try? store.close() }
    // Remember where you are...
    let token = try store.currentChangeToken()
    let pancake = TourPancake(id: UUID(), flavor: "plain", rating: 5, weight: nil)
    try store.writeSync { try $0.insert(pancake) }
    // ...and later read what happened since, a page at a time.
    let page = try store.changes(since: token, limit: 500)
    #expect(page.map(\.items) == [[ItemChange(entity: "Pancake", key: .uuid(pancake.id), kind: .inserted)]])
    // Or follow it live.
    var applied: [ChangeSet] = []
    for try await change in store.changes(since: token) {
        applied.append(change)
        break
    }
    #expect(applied == page)
    // The feed and the data in one snapshot.
    let current = try store.read { r in
        let changes = try r.changes(since: token, limit: 500)
        return try changes.flatMap(\.items).map { try r.get($0.entity, key: $0.key) }
    }
    #expect(current.count == 1 && current[0]?["flavor"] == "plain")
    // Live queries: typed, with diffs, and a callback.
    var typed = store.observe(TourPancake.self, where: .compare("rating", .greater, 3)).makeAsyncIterator()
    #expect(try await typed.next() == [pancake])
    var updates = store.observeUpdates(FetchRequest("Pancake", sort: [.ascending("flavor")])).makeAsyncIterator()
    #expect(try await updates.next()?.diff.inserted == [0])
    let seen = Mutex<[Int]>([])
    let handle = store.observe(FetchRequest("Pancake")) { pancakes in seen.withLock { $0.append(pancakes.count) } }
    let second = TourPancake(id: UUID(), flavor: "banana", rating: 4, weight: 1.5)
    try store.writeSync { try $0.insert(second) }
    #expect(try await typed.next()?.count == 2)
    let update = try await updates.next()
    #expect(update?.diff.inserted == [0] && update?.results.count == 2)
    while seen.withLock({ $0.last }) != 2 { try await Task.sleep(for: .milliseconds(5)) }
    handle.cancel()
}

/// The README's JSON Lines library example, as written there.
@Test func theReadmeJSONLinesExampleWorks() throws {
    let tmp = try TemporaryDirectory()
    let dir = tmp.url.path
    try DemoData.seed(StoreLocation(parsing: "sqlite:\(dir)/app.sqlite"), items: 2_000, seed: 3)
    let live = try StoreLocation(parsing: "sqlite:\(dir)/app.sqlite")
    let replica = try StoreLocation(parsing: "lmdb:\(dir)/replica.lmdb")
    _ = try Migrator.copy(from: live, to: replica)

    let backup = try StoreLocation(parsing: "jsonl:\(dir)/app.jsonl.gz")
    var reported = 0
    try Migrator.copy(from: StoreLocation(parsing: "sqlite:\(dir)/app.sqlite"), to: backup,
                      progress: { progress in reported = max(reported, progress.done) })
    let file = try JSONLinesStore(path: "\(dir)/app.jsonl.gz")          // a read-only DataStore
    let vips = try file.read { try $0.fetch(FetchRequest("Customer", filter: Field("vip") == true)) }
    #expect(!vips.isEmpty && reported > 0)
    try file.close()

    let store = try live.open(schema: nil)
    try store.writeSync { w in _ = try w.delete("Customer", key: vips[0]["id"]) }
    try store.close()
    let changes = try Migrator.diff(from: live, to: backup, output: "\(dir)/changes.jsonl")
    #expect(changes.changes == 1)
    try Migrator.apply(diff: "\(dir)/changes.jsonl", to: replica)     // conflict: nothing applied
    #expect(try Migrator.verify(from: live, to: replica).differences == 0)
    #expect(throws: StoreError.self) { try Migrator.apply(diff: "\(dir)/changes.jsonl", to: replica) }

    let opened = try live.open(schema: nil)
    defer { try? opened.close() }
    try JSONLines.export(opened, to: "\(dir)/fixture.jsonl")   // any open store, one snapshot
    let empty = try InMemoryStore(schema: opened.schema)
    try JSONLines.load("\(dir)/fixture.jsonl", into: empty)   // one transaction: a damaged file writes nothing
    #expect(try empty.read { try $0.count(FetchRequest("Order")) } == opened.read { try $0.count(FetchRequest("Order")) })
}
