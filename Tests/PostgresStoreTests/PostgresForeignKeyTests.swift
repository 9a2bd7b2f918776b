#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import PostgresStore
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
