@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
import StoreMigration
import Testing

/// The destination of a stopped copy, in a directory whose name holds a space and a quote:
/// `check`, `inspect` and `verify` name it unfinished with a command that, pasted into a shell,
/// finishes it.
@Suite struct UnfinishedCopyCLITests {
    @Test(arguments: [StoreKind.sqlite, .lmdb])
    func checkNamesAStoppedCopyUnfinishedWithACommandThatPastes(_ kind: StoreKind) throws {
        let dir = try TemporaryDirectory()
        let folder = dir.path("my data's copy")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let source = StoreLocation(kind: .sqlite, path: folder + "/source.sqlite")
        try DemoData.seed(source, items: 3_000, seed: 3)
        let destination = StoreLocation(kind: kind, path: folder + "/copy." + (kind == .lmdb ? "lmdb" : "sqlite"))
        var batches = 0
        #expect(throws: MigrationInterrupted.self) {
            try Migrator.copy(from: source, to: destination, options: MigrationOptions(batchSize: 100),
                              shouldStop: { batches += 1; return batches == 12 })
        }
        let check = try runCLI(["check", destination.description])
        #expect(check.status != 0)
        let line = check.errors.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(line.contains("unfinished") && !line.contains("dangling") && !line.contains("\n"), "\(line)")
        let command = try #require(line.range(of: "finish it with: ").map { String(line[$0.upperBound...]) })
        #expect(command.hasPrefix("migrate-store copy --from 'sqlite:"), "\(command)")
        for other in [["inspect", destination.description], ["verify", "--from", source.description, "--to",
                                                                destination.description]] {
            let result = try runCLI(other)
            #expect((result.output + result.errors).contains(command), "\(other[0]): \(result.output)\(result.errors)")
        }
        // Pasted into a shell, with migrate-store on the PATH, the command finishes the copy.
        let path = (migrateStore.path as NSString).deletingLastPathComponent + ":"
            + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let finished = try runCommand("/usr/bin/env", ["PATH=\(path)", "/bin/sh", "-c", command + " --progress none"])
        #expect(finished.contains("verified: every item equals the source snapshot"), "\(finished)")
        #expect(try runCLI(["check", destination.description]).status == 0)
    }

    @Test func aWordIsQuotedOnlyWhenItMustBe() {
        #expect(ShellCommand.quoted("sqlite:/tmp/app.sqlite") == "sqlite:/tmp/app.sqlite")
        #expect(ShellCommand.quoted("sqlite:/tmp/my app.sqlite") == "'sqlite:/tmp/my app.sqlite'")
        #expect(ShellCommand.quoted("postgres://h/db?sslmode=require&application_name=x")
            == "'postgres://h/db?sslmode=require&application_name=x'")
        #expect(ShellCommand.quoted("it's") == #"'it'\''s'"#)
        #expect(ShellCommand.quoted("") == "''")
    }
}
