@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
@_spi(Backend) @testable import SQLiteStore
import Testing

/// A relationship is a real SQLite foreign key: `sqlite3` shows it, and SQLite itself refuses a
/// commit that leaves one dangling, below the store's own check.
@Test func relationshipsAreForeignKeysThatSQLiteShowsAndEnforces() throws {
    let dir = try TemporaryDirectory()
    let path = dir.url.appendingPathComponent("graph.sqlite").path
    try SQLiteStore(path: path, schema: Fixtures.graphSchema).close()
    // id|seq|table|from|to|on_update|on_delete|match
    let notes = try runCommand("/usr/bin/sqlite3", [path, "PRAGMA foreign_key_list(\"Note\")"])
    #expect(notes.contains("|User|author|"), "\(notes)")
    let pairs = try runCommand("/usr/bin/sqlite3", [path, "PRAGMA foreign_key_list(\"Note_tags\")"])
    #expect(pairs.contains("|Note|source|") && pairs.contains("|Tag|target|"), "\(pairs)")
    let schema = try runCommand("/usr/bin/sqlite3", [path, ".schema Note"])
    #expect(schema.contains("DEFERRABLE INITIALLY DEFERRED"), "\(schema)")
    let indexes = try runCommand("/usr/bin/sqlite3", [path, "PRAGMA index_list(\"Note\")"])
    #expect(indexes.contains("Note.author"), "the referencing column is indexed: \(indexes)")

    let engine = try SQLiteEngine(path: path, schema: nil)
    defer { try? engine.close() }
    let note = try #require(engine.schema.entity(named: "Note"))
    do {
        try engine.withWriter { writer in
            let record = try note.normalize(["id": 1, "title": "x", "author": 9])
            try writer.insert(record, key: PrimaryKey(.int(1)), in: note)
        }
        Issue.record("SQLite committed a note whose author does not exist")
    } catch let error as StoreError {
        #expect(error.code == .referenceViolation, "\(error)")
    }
    #expect(try runCommand("/usr/bin/sqlite3", [path, "SELECT count(*) FROM Note"]).hasPrefix("0"))
}
