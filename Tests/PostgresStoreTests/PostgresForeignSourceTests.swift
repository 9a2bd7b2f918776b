#if Postgres
import DataStoreAPI
import DataStoreTestSupport
import Foundation
import StoreMigration
import Testing

/// Copies `source` into a PostgreSQL store of the test server and from there into SQLite, checking
/// each copy verified, the SQLite copy equal to the source, and the source's files unchanged;
/// returns the PostgreSQL store's location.
private func copyIntoPostgreSQLAndBack(_ source: StoreLocation, in dir: TemporaryDirectory) throws -> StoreLocation {
    let files = [source.path, source.path + "-wal", source.path + "-shm"]
    let before = files.map { FileManager.default.contents(atPath: $0) }
    let postgres = StoreLocation(kind: "postgres",
                                 path: String(PostgresTestServer.location(dir.url.path).description.dropFirst(9)))
    let there = try Migrator.copy(from: source, to: postgres, options: MigrationOptions(batchSize: 2))
    #expect(there.verified && there.differences == 0)
    let back = StoreLocation(kind: .sqlite, path: dir.path("back-\(source.kind.rawValue).sqlite"))
    let returned = try Migrator.copy(from: postgres, to: back)
    #expect(returned.verified && returned.differences == 0)
    #expect(try Migrator.verify(from: source, to: back).differences == 0)
    #expect(files.map { FileManager.default.contents(atPath: $0) } == before, "the source's files are never written")
    return postgres
}

/// A Core Data store and plain SQLite databases copied into PostgreSQL and back to SQLite, item
/// for item and reference for reference, the sources' bytes unchanged.
@Test func foreignSourcesCopyIntoPostgreSQLAndBack() throws {
    let dir = try TemporaryDirectory()
    let coreData = dir.path("Notes.sqlite")
    var options = CoreDataFixture.Options()
    options.walWithUnflushedPages = true
    try CoreDataFixture.write(at: coreData, options)
    let plain = dir.path("app.db")
    _ = try runCommand("/usr/bin/sqlite3", [plain, """
        CREATE TABLE author (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, createdAt DATETIME NOT NULL);
        CREATE TABLE book (id INTEGER PRIMARY KEY, authorId INTEGER REFERENCES author(id) ON DELETE SET NULL,
          title TEXT NOT NULL UNIQUE, price REAL);
        INSERT INTO author VALUES (1, 'Ann', '2020-01-02 03:04:05.678'), (2, 'Bob', '2021-01-01 00:00:00.000');
        INSERT INTO book VALUES (1, 1, 'A', 9.5), (2, NULL, 'B', NULL), (3, 2, 'C', 3);
        """])
    for source in [StoreLocation(kind: "coredata", path: coreData), StoreLocation(kind: "plain-sqlite", path: plain)] {
        let postgres = try copyIntoPostgreSQLAndBack(source, in: dir)
        if source.kind.rawValue == "coredata" {
            let pg = try postgres.open(schema: nil)
            defer { try? pg.close() }
            let tags = try pg.read { try $0.related("Post", key: .int(1), "tags") }
            #expect(tags.count == 2)
            #expect(try pg.read { try $0.get("Person", key: .int(1)) }?["photo"] == .bytes(CoreDataFixture.externalBytes))
        }
        try postgres.destroy()
    }
}

/// Core Data stores as Apple's framework writes them (inherited properties as full copies, three
/// levels of inheritance, numbered join columns, a one-to-one, a uniqueness constraint; and a
/// SwiftData store whose rows are only in its WAL) copied into PostgreSQL and back.
@Test func appleShapedStoresCopyIntoPostgreSQLAndBack() throws {
    for swiftData in [false, true] {
        let dir = try TemporaryDirectory()
        let path = dir.path(swiftData ? "default.store" : "Garage.sqlite")
        var options = GarageFixture.Options()
        options.swiftData = swiftData
        try GarageFixture.write(at: path, options)
        let postgres = try copyIntoPostgreSQLAndBack(StoreLocation(kind: "coredata", path: path), in: dir)
        let pg = try postgres.open(schema: nil)
        let vehicles = try pg.read { try $0.fetch(FetchRequest("Vehicle")) }
        let fans = try pg.read { try $0.related("Vehicle", key: .int(3), "fans") }
        try pg.close()
        for vehicle in vehicles {
            guard case .int(let pk) = vehicle["pk"] else { continue }
            for (name, value) in GarageFixture.expectedVehicles()[pk] ?? [:] {
                #expect(vehicle[name] == value, "Vehicle \(vehicle["pk"]).\(name)")
            }
        }
        #expect(vehicles.count == 4 && fans.map { $0["name"] } == [.string("Ada")])
        try postgres.destroy()
    }
}
#endif
