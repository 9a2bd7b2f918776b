import DataStoreAPI
import DataStoreTestSupport
import Foundation
import JSONLStore
import Testing

/// Sync's README examples on the in-memory, SQLite and LMDB backends (PostgreSQL runs them in
/// its own test target).
@Test(arguments: Kind.allCases, SyncJSONCases.all.map(\.name))
func syncsReadmeExamplesHoldOnEveryBackend(_ kind: Kind, _ name: String) throws {
    let dir = try TemporaryDirectory()
    let run = try #require(SyncJSONCases.all.first { $0.name == name }).run
    try run({ name, schema in try kind.open(dir, name, schema) }, dir)
}

/// Export and import against each other, and against a model of Sync's semantics.
@Test(arguments: Kind.allCases, SyncRoundTripCases.all.map(\.name))
func exportAndImportRoundTripOnEveryBackend(_ kind: Kind, _ name: String) throws {
    let dir = try TemporaryDirectory()
    let run = try #require(SyncRoundTripCases.all.first { $0.name == name }).run
    try run({ name, schema in try kind.open(dir, name, schema) }, dir)
}
