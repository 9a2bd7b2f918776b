import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import InMemoryStore
import LMDBStore
import SQLiteStore
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
}
