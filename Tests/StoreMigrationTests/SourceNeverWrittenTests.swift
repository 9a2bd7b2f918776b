import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import StoreMigration
import Testing

/// Root ignores permissions, so as root commands that test them run as nobody (setpriv).
let asNobody = getuid() == 0 ? ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] : []

@Test func aRollbackJournalSQLiteSourceIsNeitherSwitchedToWALNorChangedByAnyCommand() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "journal")
    try DemoData.seed(source, items: 600, seed: 4)
    _ = try runCommand("/usr/bin/sqlite3", [source.path, "PRAGMA journal_mode=DELETE"])
    let before = fileDigest(source.path)
    let copied = dir.location(.lmdb, "copied")
    for arguments in [
        ["inspect", source.description], ["check", source.description],
        ["inspect", "--check", source.description],
        ["copy", "--from", source.description, "--to", copied.description, "--progress", "none"],
        [
            "verify", "--check", "--from", source.description, "--to", copied.description, "--progress",
            "none",
        ],
        ["sync", "--from", source.description, "--to", copied.description, "--progress", "none"],
    ] {
        let run = try runCLI(arguments)
        #expect(run.status == 0, "\(arguments[0]): \(run.errors)")
        #expect(fileDigest(source.path) == before, "\(arguments[0]) changed the source")
        #expect(
            try runCommand("/usr/bin/sqlite3", [source.path, "PRAGMA journal_mode"]) == "delete\n",
            "\(arguments[0]) switched the journal mode")
        #expect(!FileManager.default.fileExists(atPath: source.path + "-wal"), "\(arguments[0]) made a WAL")
    }
}

/// A backup on read-only media: files and directory without write permission, no lock or
/// shared-memory file beside them, read by a user who cannot create one.
@Test(arguments: [StoreKind.sqlite, .lmdb])
func aSourceOnReadOnlyMediaCopiesAndVerifies(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: dir.url.path)
    let media = dir.path("media")
    try FileManager.default.createDirectory(atPath: media, withIntermediateDirectories: false)
    let source = StoreLocation(kind: kind, path: media + "/backup.\(kind.rawValue)")
    try DemoData.seed(source, items: 400, seed: 6)
    if kind == .lmdb { try FileManager.default.removeItem(atPath: source.path + "/lock.mdb") }
    let output = dir.path("output")
    try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: false)
    try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: output)
    let files = kind == .lmdb ? [source.path + "/data.mdb", source.path] : [source.path]
    for file in files + [media] {
        try FileManager.default.setAttributes(
            [
                .posixPermissions: file == source.path + "/data.mdb"
                    || (kind == .sqlite && file == source.path) ? 0o444 : 0o555
            ], ofItemAtPath: file)
    }
    defer {
        for file in [media] + files {
            try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: file)
        }
    }
    let before = fileDigest(source.path)
    let destination = "lmdb:\(output)/restored.lmdb"
    let copy = try runCLI(
        ["copy", "--from", source.description, "--to", destination, "--progress", "none"], via: asNobody)
    #expect(copy.status == 0, "\(copy.errors)")
    #expect(copy.output.contains("verified: every item equals the source snapshot"), "\(copy.output)")
    let inspect = try runCLI(["inspect", source.description], via: asNobody)
    #expect(
        inspect.status == 0 && inspect.output.contains("Order: 120 items"),
        "\(inspect.errors)\(inspect.output)")
    #expect(fileDigest(source.path) == before)
    #expect(!FileManager.default.fileExists(atPath: source.path + (kind == .lmdb ? "/lock.mdb" : "-shm")))
}

@Test(arguments: [StoreKind.sqlite, .lmdb])
func anUnreadableSourceSaysPermissionDenied(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: dir.url.path)
    let source = dir.location(kind, "secret")
    try DemoData.seed(source, items: 50, seed: 2)
    try FileManager.default.setAttributes([.posixPermissions: 0o000], ofItemAtPath: source.path)
    defer { try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: source.path) }
    for command in ["inspect", "check"] {
        let run = try runCLI([command, source.description], via: asNobody)
        #expect(run.status == 2, "\(command): \(run.errors)")
        #expect(
            run.errors.split(separator: "\n").count == 1 && run.errors.contains("permission denied")
                && run.errors.contains(source.path), "\(command): \(run.errors)")
    }
}
