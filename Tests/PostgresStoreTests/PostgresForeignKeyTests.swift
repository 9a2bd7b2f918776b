#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import PostgresStore
import StoreMigration
import Testing

/// A relationship is a real PostgreSQL foreign key, deferred to the commit: `psql \d` shows it.
@Test func relationshipsAreForeignKeysThatPsqlShows() throws {
    let dir = try TemporaryDirectory()
    let location = PostgresTestServer.location(dir.url.path + "/graph")
    let store = try PostgresStore(location: location, schema: Fixtures.graphSchema)
    try store.writeSync { w in
        try w.insert(["id": 1, "name": "Ann"], into: "User")
        try w.insert(["id": 7, "title": "x", "author": 1], into: "Note")
    }
    try store.close()
    defer { try? PostgresStore.destroy(location) }
    let described = try runCommand("/usr/bin/psql", ["-h", PostgresTestServer.host, "-U", "postgres", "-d", "datastore",
                                                     "-c", "\\d \"\(location.schema)\".\"Note\""])
    #expect(described.contains("FOREIGN KEY (author) REFERENCES \(location.schema).\"User\"(id) DEFERRABLE INITIALLY DEFERRED"),
            "\(described)")
    #expect(described.contains("\"Note.author\""), "the referencing column is indexed: \(described)")
    let deleted = try runCommand("/usr/bin/psql", ["-h", PostgresTestServer.host, "-U", "postgres", "-d", "datastore",
                                                   "-c", "DELETE FROM \"\(location.schema)\".\"User\""],
                                 allowingFailure: true)
    #expect(deleted.contains("violates foreign key constraint"), "PostgreSQL itself refuses: \(deleted)")
}
#endif

#if Postgres
/// A copy into PostgreSQL stopped part way holds references to items it has yet to copy (the
/// demo's customers refer to customers later in key order): the destination still opens for
/// `inspect` and `check`, without its foreign keys, which the copy's end brings back.
@Test func anUnfinishedDestinationOpensWithoutItsForeignKeysUntilTheCopyEnds() throws {
    let dir = try TemporaryDirectory()
    let source = StoreLocation(kind: .sqlite, path: dir.url.appendingPathComponent("source.sqlite").path)
    try DemoData.seed(source, items: 3_000, seed: 4)
    let location = PostgresTestServer.location(dir.url.path + "/unfinished")
    let destination = StoreLocation(kind: "postgres", path: String(location.description.dropFirst(9)))
    defer { try? PostgresStore.destroy(location) }
    var batches = 0
    #expect(throws: MigrationInterrupted.self) {
        try Migrator.copy(from: source, to: destination, options: MigrationOptions(batchSize: 100),
                          shouldStop: { batches += 1; return batches == 3 })
    }
    let unfinished = try Migrator.acceptingUnfinished { try destination.openSource() }
    let report = try unfinished.read { try $0.checkReferences() }
    try unfinished.close()
    #expect(report.danglingCount > 0, "the part copied refers to customers not copied yet")
    let resumed = try Migrator.copy(from: source, to: destination, options: MigrationOptions(batchSize: 100, resume: true))
    #expect(resumed.differences == 0)
    let finished = try PostgresStore(location: location, schema: nil)
    try finished.close()
    let described = try runCommand("/usr/bin/psql", ["-h", PostgresTestServer.host, "-U", "postgres", "-d", "datastore",
                                                     "-c", "\\d \"\(location.schema)\".\"Customer\""])
    #expect(described.contains("FOREIGN KEY (\"referredBy\")"), "the ordinary open added them back: \(described)")
}
#endif

#if Postgres
/// A store that a `SwitchingStore` moved an app to from SQLite has every foreign key once it
/// serves, and at every later launch (it had none: the copy's open drops them, and each launch
/// opened the new store as a destination being filled).
@Test func aStoreSwitchedToPostgreSQLHasItsForeignKeys() throws {
    let dir = try TemporaryDirectory()
    let old = StoreLocation(kind: .sqlite, path: dir.path("app.sqlite"))
    try DemoData.seed(old, items: 2_000, seed: 5)
    let location = PostgresTestServer.location(dir.url.path + "/switched")
    let new = StoreLocation(kind: "postgres", path: String(location.description.dropFirst(9)))
    defer { try? PostgresStore.destroy(location) }
    let opened = try old.openSource()
    let schema = opened.schema
    try opened.close()
    let toOne = schema.entities.reduce(0) { $0 + $1.relationships.filter { $0.cardinality == .toOne }.count }
    func foreignKeys() throws -> Int {
        let count = try runCommand("/usr/bin/psql", ["-h", PostgresTestServer.host, "-U", "postgres", "-d", "datastore",
                                                     "-At", "-c", "SELECT count(*) FROM pg_constraint c JOIN pg_namespace n "
                                                        + "ON n.oid = c.connamespace WHERE n.nspname = '\(location.schema)' "
                                                        + "AND c.contype = 'f'"])
        return Int(count.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }
    let store = try SwitchingStore(from: old, to: new, schema: schema)
    #expect(try store.waitUntilSwitched())
    #expect(try foreignKeys() == toOne, "after the switch")
    try store.close()
    for launch in 1...2 {
        let again = try SwitchingStore(from: old, to: new, schema: schema)
        #expect(again.phase == .switched)
        #expect(try foreignKeys() == toOne, "launch \(launch)")
        try again.close()
    }
}
#endif
