@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
@_spi(Backend) import LMDBStore
@_spi(Backend) import SQLiteStore
import StoreMigration
import Testing

/// Replaces a store's stored schema with one that lists no entity, as damage (or a program
/// outside the package) could, leaving its tables or databases and their items in place.
/// The schema is written with its checksum, as such a program computing it would.
func emptyTheStoredSchema(_ location: StoreLocation) throws {
    let engine: any StorageEngine
    switch location.kind {
    case .sqlite: engine = try SQLiteEngine(path: location.path, schema: nil)
    case .lmdb: engine = try LMDBEngine(path: location.path, schema: nil)
    default:
        Issue.record("no way to damage \(location.kind)")
        return
    }
    defer { try? engine.close() }
    try engine.withWriter { writer in
        let format = try #require(Int(String(decoding: try writer.metadata(forKey: StoreHeader.formatKey) ?? [],
                                             as: UTF8.self)))
        try StoreHeader.write(Schema(entities: []), format: format) { try writer.setMetadata($1, forKey: $0) }
    }
}

/// A stored schema that no longer names the tables (or databases) the store holds is damage:
/// `check` exits 2 naming what it does not explain, and `copy` refuses with the same message
/// instead of copying an empty store.
@Test(arguments: [StoreKind.sqlite, .lmdb])
func aStoredSchemaThatHidesTablesIsDamage(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let store = dir.location(kind, "damaged")
    try DemoData.seed(store, items: 100, seed: 4)
    try emptyTheStoredSchema(store)
    let check = try runCLI(["check", store.description])
    #expect(check.status == 2, "\(check.output)\(check.errors)")
    #expect(check.errors.contains("Customer") && check.errors.contains("the stored schema does not name"),
            "\(check.errors)")
    let copy = try runCLI(["copy", "--from", store.description, "--to", dir.location(.jsonl, "out").description,
                           "--progress", "none"])
    #expect(copy.status == 2, "\(copy.output)\(copy.errors)")
    #expect(copy.errors.contains("the stored schema does not name"), "\(copy.errors)")
}

/// A stored schema whose primary key names no attribute, and a row written with the `sqlite3`
/// shell whose key is past the limit, are damage that `check` and `copy` name (file, entity,
/// key) with exit 2, not a SQL error with exit 3.
@Test func aDamagedKeyOrKeyNameIsNamedAsDamage() throws {
    let dir = try TemporaryDirectory()
    let renamed = dir.location(.sqlite, "renamed")
    try DemoData.seed(renamed, items: 100, seed: 4)
    _ = try runCommand("/usr/bin/sqlite3", [renamed.path, """
        UPDATE _ds_meta SET value = CAST(replace(CAST(value AS TEXT), '"name":"Product","primaryKey":"sku"',
            '"name":"Product","primaryKey":"nope"') AS BLOB) WHERE key = 'datastore.schema'
        """])
    let long = dir.location(.sqlite, "long")
    try DemoData.seed(long, items: 100, seed: 4)
    let key = String(repeating: "k", count: Limits.maxStringKeyBytes + 1)
    _ = try runCommand("/usr/bin/sqlite3", [long.path, "INSERT INTO Product VALUES ('\(key)', 't', 1.0, 1, NULL, NULL)"])
    for (store, naming) in [(renamed, "primary key 'nope'"), (long, "at most 255")] {
        for command in [["check", store.description],
                        ["copy", "--from", store.description, "--to", dir.location(.lmdb, "out").description,
                         "--progress", "none"]] {
            let result = try runCLI(command)
            #expect(result.status == 2, "\(command): \(result.errors)")
            #expect(result.errors.contains(naming) && result.errors.contains("Product")
                    && result.errors.contains(store.path), "\(command): \(result.errors)")
        }
    }
}
