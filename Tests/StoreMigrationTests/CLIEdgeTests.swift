import DataStoreAPI
import DataStoreTestSupport
import Foundation
@testable import StoreMigration
import Testing

/// A copy into a directory this user cannot write fails before it reads the source, in one
/// line that names the destination and says read-only, never a staging file or Foundation's
/// text, with exit 2, on every kind of file store.
@Test(arguments: [StoreKind.sqlite, .lmdb, .jsonl])
func aCopyIntoAReadOnlyDirectorySaysSoAndNamesTheDestination(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    try DemoData.seed(source, items: 100, seed: 1)
    let readOnly = dir.path("read-only")
    try FileManager.default.createDirectory(atPath: readOnly, withIntermediateDirectories: false)
    try FileManager.default.setAttributes([.posixPermissions: 0o555], ofItemAtPath: readOnly)
    try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: dir.url.path)
    for file in [source.path, source.path + "-wal", source.path + "-shm"] {
        try? FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file)
    }
    defer { try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: readOnly) }
    let destination = "\(kind.rawValue):\(readOnly)/app.\(kind.rawValue)"
    let result = try runCLI(["copy", "--from", source.description, "--to", destination, "--progress", "none"],
                            via: asNobody)
    #expect(result.status == 2, "\(result.errors)")
    let lines = result.errors.split(separator: "\n")
    #expect(lines.count == 1 && lines[0].contains("cannot create \(destination)") && lines[0].contains("read-only"),
            "\(result.errors)")
    for word in [".migrating", "sqlite error", "You don", "permission."] {
        #expect(!result.errors.contains(word), "\(word): \(result.errors)")
    }
}

/// The postgres: kind in a build without the trait Postgres names the trait (in a build with
/// it, the kind is registered and this message never shows).
@Test func thePostgresKindWithoutItsTraitNamesTheTrait() {
    let error = StoreBackends.unknownKind("postgres")
    #expect(error.code == .invalidArgument)
    #expect(error.message.contains("package trait Postgres") && error.message.contains("--traits Postgres"),
            "\(error.message)")
    #expect(StoreBackends.unknownKind("oracle").message.hasPrefix("unknown store kind 'oracle'"))
}

/// `inspect` of a JSON Lines destination whose copy was interrupted says where it stands and
/// how to finish it, with exit 0, as it does for SQLite and LMDB.
@Test func inspectOfAnUnfinishedJSONLinesCopySaysHowToFinishIt() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    try DemoData.seed(source, items: 3_000, seed: 2)
    let destination = try StoreLocation(parsing: "jsonl:\(dir.path("copy.jsonl.gz"))")
    var batches = 0
    #expect(throws: MigrationInterrupted.self) {
        try Migrator.copy(from: source, to: destination, options: MigrationOptions(batchSize: 500),
                          shouldStop: { batches += 1; return batches > 3 })
    }
    #expect(Migrator.copyState(of: destination) == .unfinished)
    let inspect = try runCLI(["inspect", destination.description])
    #expect(inspect.status == 0, "\(inspect.errors)")
    #expect(inspect.output.contains("state: UNFINISHED migration from \(source)")
        && inspect.output.contains("--resume") && inspect.output.contains("checkpoint: "), "\(inspect.output)")
    let resumed = try runCLI(["copy", "--from", source.description, "--to", destination.description, "--resume",
                              "--progress", "none"])
    #expect(resumed.status == 0, "\(resumed.errors)")
    #expect(Migrator.copyState(of: destination) == .complete)
}
