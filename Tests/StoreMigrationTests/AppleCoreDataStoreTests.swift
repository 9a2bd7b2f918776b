import DataStoreAPI
import DataStoreTestSupport
@testable import ForeignStores
import Foundation
import StoreMigration
import Testing

/// Core Data stores in the shapes Apple's framework writes (GarageFixture): inherited properties
/// as full copies, three levels of inheritance, numbered join columns, a one-to-one, a
/// uniqueness constraint, persistent history, and a SwiftData store whose rows are only in its WAL.
@Suite struct AppleCoreDataStoreTests {
    /// The pairs of a many-to-many in the copy, as "source:target".
    static func pairs(_ copy: [String: [Record]], _ entity: String) -> Set<String> {
        Set((copy[entity] ?? []).map { "\($0["source"]):\($0["target"])" })
    }

    static func expectGarage(_ copy: [String: [Record]], _ label: String) {
        #expect(Set(copy.keys) == ["Vehicle", "Owner", "Licence", "Tag", "Owner_tags", "Tag_vehicles"], "\(label)")
        let vehicles = Dictionary(uniqueKeysWithValues: (copy["Vehicle"] ?? []).map { ($0["pk"].testInt ?? -1, $0) })
        #expect(vehicles.count == 4, "\(label)")
        for (pk, expected) in GarageFixture.expectedVehicles() {
            for (name, value) in expected { #expect(vehicles[pk]?[name] == value, "\(label): Vehicle \(pk).\(name)") }
        }
        let owners = copy["Owner"] ?? []
        #expect(owners.map { $0["name"] } == [.string("Ada"), .string("Bo")], "\(label)")
        #expect(owners.map { $0["nameLower"] } == [.string("ada"), .string("bo")], "\(label): the derived attribute")
        #expect(owners.map { $0["favourite"] } == [.int(3), .null], "\(label): a to-one into the hierarchy")
        #expect(owners.first?.attributeNames.contains("licence") == false, "\(label): one side holds a one-to-one")
        #expect((copy["Licence"] ?? []).map { $0["owner"] } == [.int(1), .null], "\(label)")
        #expect(pairs(copy, "Owner_tags") == Set(GarageFixture.ownerTags.map { "\(Value.int(Int64($0.0))):"
            + "\(Value.int(Int64($0.1)))" }), "\(label)")
        // Tag_vehicles: Tag is the source.
        #expect(pairs(copy, "Tag_vehicles") == Set(GarageFixture.vehicleTags.map { "\(Value.int(Int64($0.1))):"
            + "\(Value.int(Int64($0.0)))" }), "\(label)")
    }

    @Test(arguments: [StoreKind.memory, .sqlite, .lmdb], CoreDataModelWriter.InheritedProperties.allCases)
    func appleShapedStoresCopyIntoEachBackendAndBack(_ kind: StoreKind,
                                                      _ form: CoreDataModelWriter.InheritedProperties) throws {
        for swiftData in [false, true] {
            let dir = try TemporaryDirectory()
            let path = dir.path(swiftData ? "default.store" : "Garage.sqlite")
            var options = GarageFixture.Options()
            options.inheritedProperties = form
            options.swiftData = swiftData
            try GarageFixture.write(at: path, options)
            if swiftData {
                let walSize = (try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
                #expect(walSize > 0, "the rows are in the WAL")
                #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
            }
            let before = fileHashes(coreDataFiles(path))
            let (middle, back) = try copyThereAndBack(StoreLocation(kind: .coreData, path: path), via: kind, in: dir)
            #expect(fileHashes(coreDataFiles(path)) == before, "the store and its -wal/-shm are never written")
            Self.expectGarage(middle, "\(kind) \(form) swiftData=\(swiftData)")
            #expect(middle == back)
        }
    }

    @Test(arguments: CoreDataModelWriter.InheritedProperties.allCases)
    func theModelIsReadAsDeclaredAndItsRulesHold(_ form: CoreDataModelWriter.InheritedProperties) throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("Garage.sqlite")
        var options = GarageFixture.Options()
        options.inheritedProperties = form
        try GarageFixture.write(at: path, options)
        let source = try CoreDataStore(ForeignSource(path: path))
        let vehicle = try #require(source.schema.entity(named: "Vehicle"))
        try source.close()
        #expect(vehicle.attributes.map(\.name).sorted() == ["color", "doors", "entity", "owner", "pk", "price",
                                                            "specs", "topSpeed", "vin", "wheels"])
        #expect(vehicle.indexes.contains(Index("unique_vin", on: ["vin"], unique: true)),
                "the uniqueness constraint is a unique index")
        #expect(vehicle.relationships.map(\.name).sorted() == ["fans", "owner", "tags"])
        let copy = dir.location(.sqlite, "copy")
        _ = try Migrator.copy(from: StoreLocation(kind: .coreData, path: path), to: copy)
        let store = try copy.open(schema: nil)
        defer { try? store.close() }
        let licence = try #require(store.schema.entity(named: "Licence")?.relationships.first { $0.name == "owner" })
        #expect(licence.cardinality == .toOne && licence.inverse == "licence")
        #expect(store.schema.entity(named: "Owner")?.relationships.first { $0.name == "licence" }?.cardinality == .toMany)
        let licences = try store.read { try $0.related("Owner", key: .int(1), "licence") }
        #expect(licences.map { $0["number"] } == [.string("L-1")])
        let fans = try store.read { try $0.related("Vehicle", key: .int(3), "fans") }
        #expect(fans.map { $0["name"] } == [.string("Ada")])
        #expect(try store.read { try $0.related("Tag", key: .int(1), "vehicles") }.count == 2)
        #expect(throws: StoreError.self, "a second item with one vin breaks the unique index") {
            try store.writeSync { try $0.insert(["pk": .int(9), "entity": .string("Car"), "vin": .string("V1")], into: "Vehicle") }
        }
        #expect(throws: StoreError.self, "a second licence of one owner breaks the one-to-one") {
            try store.writeSync { _ = try $0.update("Licence", key: .int(2), set: ["owner": .int(1)]) }
        }
        // Cascade from Owner.vehicles: deleting Ada deletes her two vehicles.
        try store.writeSync { try $0.delete("Owner", key: .int(1)) }
        #expect(try store.read { try $0.count(FetchRequest("Vehicle")) } == 2)
    }

    /// The join columns are found by entity number, relationship name and an optional number;
    /// a column that could hold either side is refused naming both.
    @Test func numberedJoinColumnsAreFoundAndAmbiguousOnesNamed() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("Garage.sqlite")
        try GarageFixture.write(at: path)
        let store = try CoreDataStore(ForeignSource(path: path))
        #expect(try store.read { try $0.count(FetchRequest("Tag_vehicles")) } == 3)
        try store.close()
        try sqliteShell(path, "ALTER TABLE Z_6TAGS ADD COLUMN Z_5TAGS2 INTEGER")
        #expect { try CoreDataStore(ForeignSource(path: path)) } throws: { error in
            "\(error)".contains("Z_5TAGS1 and Z_5TAGS2")
        }
    }
}

/// Stores Apple's framework wrote (CoreDataPlus's fixtures, Tests/Fixtures/CoreDataPlus): three
/// levels of inheritance with inherited properties as full copies, a compound uniqueness
/// constraint, and an entity renamed by a lightweight migration, copied into every backend and
/// back, every value compared, the committed files unchanged.
@Suite struct AppleWrittenStoreTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/CoreDataPlus")

    @Test(arguments: [StoreKind.memory, .sqlite, .lmdb], ["SampleModel_V1", "SampleModel_V2"])
    func aStoreCoreDataWroteCopiesIntoEachBackendAndBack(_ kind: StoreKind, _ name: String) throws {
        let dir = try TemporaryDirectory()
        let committed = Self.fixtures.appendingPathComponent(name + ".sqlite").path
        let path = dir.path(name + ".sqlite")
        try FileManager.default.copyItem(atPath: committed, toPath: path)
        let before = fileHashes(coreDataFiles(path))
        let (middle, back) = try copyThereAndBack(StoreLocation(kind: .coreData, path: path), via: kind, in: dir)
        #expect(fileHashes(coreDataFiles(path)) == before)
        #expect(middle == back)
        let cars = middle["Car"] ?? []
        #expect(cars.count == 125 && (middle["Person"] ?? []).count == 20)
        let subentity = name == "SampleModel_V1" ? "ExpensiveSportCar" : "LuxuryCar"
        let kinds = Dictionary(grouping: cars, by: { "\($0["entity"])" }).mapValues(\.count)
        #expect(kinds == ["\(Value.string("Car"))": 115, "\(Value.string("SportCar"))": 5,
                          "\(Value.string(subentity))": 5], "\(kinds)")
        let store = try CoreDataStore(ForeignSource(path: path))
        defer { try? store.close() }
        let person = try #require(store.schema.entity(named: "Person"))
        #expect(person.indexes.contains { $0.isUnique && $0.attributes == ["firstName", "lastName"] })
        let car = try #require(store.schema.entity(named: "Car"))
        #expect(car.indexes.contains { $0.isUnique && $0.attributes == ["numberPlate"] })
    }
}
