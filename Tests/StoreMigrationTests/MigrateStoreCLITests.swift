import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import StoreMigration
import Testing

struct CommandResult {
    var status: Int32
    var output: String
    var errors: String
}

let migrateStore = CrashRecovery.executable(named: "migrate-store")

/// Starts migrate-store, through `launcher` when given (a command that runs the binary passed as
/// its next argument, such as setpriv or a bash wrapper); standard output is discarded unless
/// `capturingOutput`, standard error goes to the returned pipe.
func startCLI(_ arguments: [String], via launcher: [String] = [], capturingOutput: Bool = false,
              in directory: String? = nil) throws -> (process: Process, output: Pipe, errors: Pipe) {
    let process = Process()
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    process.executableURL = URL(fileURLWithPath: launcher.first ?? migrateStore.path)
    process.arguments = Array(launcher.dropFirst()) + (launcher.isEmpty ? [] : [migrateStore.path]) + arguments
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = capturingOutput ? output : FileHandle.nullDevice
    process.standardError = errors
    try process.run()
    return (process, output, errors)
}

/// Runs migrate-store to completion.
func runCLI(_ arguments: [String], via launcher: [String] = [], in directory: String? = nil) throws -> CommandResult {
    let (process, out, err) = try startCLI(arguments, via: launcher, capturingOutput: true, in: directory)
    let output = out.fileHandleForReading.readDataToEndOfFile()
    let errors = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return CommandResult(status: process.terminationStatus, output: String(decoding: output, as: UTF8.self),
                         errors: String(decoding: errors, as: UTF8.self))
}

func fileDigest(_ path: String) -> [UInt8] {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return [] }
    let file = isDirectory.boolValue ? path + "/data.mdb" : path
    return Array((try? Data(contentsOf: URL(fileURLWithPath: file))) ?? Data())
}

/// Whether `location` opens as a complete store.
func opensAsComplete(_ location: StoreLocation) -> Bool {
    guard let store = try? location.open(schema: nil) else { return false }
    try? store.close()
    return true
}

@Test func badInputGetsOneLineErrorsAndLeavesTheSourceUntouched() throws {
    let dir = try TemporaryDirectory()
    let good = dir.location(.sqlite, "good")
    try DemoData.seed(good, items: 500, seed: 3)
    let random = dir.url.appendingPathComponent("random.sqlite").path
    try Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 7_919) }).write(to: URL(fileURLWithPath: random))
    let truncated = dir.url.appendingPathComponent("truncated.sqlite").path
    try Data(Data(contentsOf: URL(fileURLWithPath: good.path)).prefix(3000)).write(to: URL(fileURLWithPath: truncated))
    let plain = dir.url.appendingPathComponent("plain.sqlite").path
    _ = try runCommand("/usr/bin/sqlite3", [plain, "CREATE TABLE t(x); INSERT INTO t VALUES (1);"])
    let existing = dir.location(.lmdb, "existing")
    try DemoData.seed(existing, items: 10, seed: 1)

    let cases: [(String, [String], String)] = [
        ("missing file", ["--from", "sqlite:\(dir.url.path)/nope.sqlite", "--to", "lmdb:\(dir.url.path)/a"], "nope.sqlite"),
        ("random bytes", ["--from", "sqlite:\(random)", "--to", "lmdb:\(dir.url.path)/b"], "random.sqlite"),
        ("truncated", ["--from", "sqlite:\(truncated)", "--to", "lmdb:\(dir.url.path)/c"], "truncated.sqlite"),
        ("not a store", ["--from", "sqlite:\(plain)", "--to", "lmdb:\(dir.url.path)/d"], "not a DataStore store"),
        ("unknown kind", ["--from", "oracle:db", "--to", "lmdb:\(dir.url.path)/e"], "unknown store kind 'oracle'"),
        ("bare kind, no store here", ["--from", "sqlite", "--to", "lmdb:\(dir.url.path)/f"], "give one with --store"),
        ("non-empty destination", ["--from", good.description, "--to", existing.description], "--overwrite"),
        ("unknown entity", ["--from", good.description, "--to", "lmdb:\(dir.url.path)/g", "--entities", "Nope"], "Nope"),
    ]
    let before = [good.path, random, truncated, plain, existing.path].map(fileDigest)
    for (what, arguments, naming) in cases {
        let result = try runCLI(arguments + ["--progress", "none"])
        #expect(result.status == 2, "\(what): exit \(result.status) \(result.errors)")
        let lines = result.errors.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].hasPrefix("migrate-store: error:"), "\(what): \(result.errors)")
        #expect(result.errors.contains(naming), "\(what): \(result.errors)")
    }
    #expect([good.path, random, truncated, plain, existing.path].map(fileDigest) == before, "inputs untouched")
    for name in ["a", "b", "c", "d", "e", "f", "g"] {
        #expect(!opensAsComplete(StoreLocation(kind: .lmdb, path: "\(dir.url.path)/\(name)")), "\(name)")
    }
    #expect(opensAsComplete(existing), "the existing destination is untouched")
}

/// A copy killed with SIGKILL as it starts, once its first batch is written and once it verifies
/// (each moment a line of its progress, not a time): it finishes with `--resume`, or, killed before
/// its destination was staged, by running it again.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"),
      arguments: ["as it starts", "copy ", "verify "])
func aCopyKilledWithSIGKILLFinishesWithResume(_ moment: String) throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    let destination = dir.location(.lmdb, "destination")
    try DemoData.seed(source, items: 8_000, seed: 9)
    let (process, _, errors) = try startCLI(["copy", "--from", source.description, "--to", destination.description,
                                             "--batch-size", "100", "--progress", "plain"])
    var seen = ""
    while moment != "as it starts" && !seen.contains("\n" + moment) && !seen.hasPrefix(moment) {
        let chunk = errors.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        seen += String(decoding: chunk, as: UTF8.self)
    }
    kill(process.processIdentifier, SIGKILL)
    process.waitUntilExit()
    #expect(process.terminationReason == .uncaughtSignal, "killed \(moment): \(seen)")
    if moment != "as it starts" {
        #expect(destination.exists && !opensAsComplete(destination), "killed at '\(moment)': \(seen)")
    }
    if !destination.exists {
        // Killed before the staged destination was moved into place: start again.
        #expect(try runCLI(["--from", source.description, "--to", destination.description, "--progress", "none"]).status == 0)
    } else if !opensAsComplete(destination) {
        let resumed = try runCLI(["--from", source.description, "--to", destination.description, "--resume",
                                  "--progress", "plain"])
        #expect(resumed.status == 0, "\(resumed.errors)")
        #expect(resumed.output.contains("(resumed)") && resumed.output.contains("verified: every item"))
    }
    #expect(opensAsComplete(destination))
    #expect(try contents(destination) == contents(source))
    // The demo store is a graph: every reference of the finished destination holds.
    let check = try runCLI(["check", destination.description])
    #expect(check.status == 0 && check.output.contains(" references"), "\(check.output)\(check.errors)")
}

@Test func ctrlCStopsAfterABatchAndSaysHowToResume() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.lmdb, "source")
    let destination = dir.location(.sqlite, "destination")
    try DemoData.seed(source, items: 20_000, seed: 2)
    let (process, _, err) = try startCLI(["--from", source.description, "--to", destination.description,
                                          "--batch-size", "200", "--progress", "plain"])
    // The signal goes once the first batch is written (its progress line says so), not after a
    // time: on a loaded machine the copy may not have begun.
    var seen = Data()
    while !String(decoding: seen, as: UTF8.self).contains("copy ") {
        let chunk = err.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        seen.append(chunk)
    }
    kill(process.processIdentifier, SIGINT)
    let errors = String(decoding: seen + err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    #expect(process.terminationStatus == 130, "\(errors)")
    #expect(errors.contains("--resume"))
    #expect(!opensAsComplete(destination))
    let inspect = try runCLI(["inspect", destination.description])
    #expect(inspect.output.contains("state: UNFINISHED") && inspect.output.contains("checkpoint: "), "\(inspect.output)")
    let resumed = try runCLI(["copy", "--from", source.description, "--to", destination.description, "--resume",
                              "--progress", "none", "--report", dir.url.appendingPathComponent("r.json").path])
    #expect(resumed.status == 0, "\(resumed.errors)")
    let report = try JSONDecoder().decode(MigrationReport.self,
                                          from: Data(contentsOf: dir.url.appendingPathComponent("r.json")))
    #expect(report.resumed && report.verified && report.differences == 0)
    #expect(report.entities.map(\.entity) == ["Customer", "Product", "Order", "Order_products"])
    #expect(try contents(destination) == contents(source))
}

@Test(arguments: [(StoreKind.sqlite, StoreKind.lmdb), (.lmdb, .sqlite)])
func aSourceWrittenByAnotherProcessCopiesItsSnapshotAndSyncCatchesUp(_ from: StoreKind, _ to: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(from, "live")
    let destination = dir.location(to, "copy")
    _ = try CrashRecovery.killWriter(tool: CrashRecovery.tool, kind: from.rawValue, path: source.path, after: 2_000)
    let writer = try CrashRecovery.startWriter(tool: CrashRecovery.tool, kind: from.rawValue, path: source.path)
    let copy = try runCLI(["--from", source.description, "--to", destination.description, "--batch-size", "300",
                           "--progress", "none"])
    let writtenDuring = try CrashRecovery.stop(writer, after: 1)
    #expect(copy.status == 0, "\(copy.errors)")
    #expect(copy.output.contains("verified: every item equals the source snapshot"), "\(copy.output)")
    // The copy is the snapshot: self-consistent, but behind the source the writer kept changing.
    let copied = try destination.open(schema: nil)
    try CrashRecovery.verify(copied, acknowledged: 1)
    let copiedCounter = try copied.read { try $0.get("Counter", key: "committed")?["value"] }
    try copied.close()
    guard case .int(let snapshotBatches)? = copiedCounter else {
        Issue.record("no counter in the copy")
        return
    }
    #expect(Int(snapshotBatches) < writtenDuring, "the writer went on after the snapshot")
    #expect(try runCLI(["verify", "--from", source.description, "--to", destination.description,
                        "--progress", "none"]).status == 1)
    let sync = try runCLI(["sync", "--from", source.description, "--to", destination.description, "--progress", "none"])
    #expect(sync.status == 0, "\(sync.errors)")
    #expect(try runCLI(["verify", "--from", source.description, "--to", destination.description,
                        "--progress", "none"]).status == 0)
    #expect(try contents(destination) == contents(source))
}

@Test func helpDocumentsEveryExitCodeAndOption() throws {
    let help = try runCLI(["--help"])
    for text in ["Exit codes", "0    success", "1    verify", "2    bad input", "3    the operation failed", "64",
                 "130", "copy", "sync", "verify", "inspect", "seed"] {
        #expect(help.output.contains(text), "\(text)")
    }
    let copyHelp = try runCLI(["copy", "--help"])
    for option in ["--from", "--to", "--entities", "--batch-size", "--resume", "--overwrite", "--no-verify",
                   "--dry-run", "--progress", "--report"] {
        #expect(copyHelp.output.contains(option), "\(option)")
    }
}

@Test func seedIsDeterministicAndInspectDescribesTheStore() throws {
    let dir = try TemporaryDirectory()
    let a = dir.location(.sqlite, "a")
    let b = dir.location(.lmdb, "b")
    #expect(try runCLI(["seed", "--to", a.description, "--items", "2000", "--seed", "5", "--progress", "none"]).status == 0)
    #expect(try runCLI(["seed", "--to", b.description, "--items", "2000", "--seed", "5", "--progress", "none"]).status == 0)
    #expect(try contents(a) == contents(b))
    let inspect = try runCLI(["inspect", a.description])
    #expect(inspect.status == 0)
    for text in ["Customer: 400 items", "Product: 200 items", "Order: 600 items", "Order_products: 800 items",
                 "index byEmail (unique): email",
                 "state: complete"] {
        #expect(inspect.output.contains(text), "\(text) in \(inspect.output)")
    }
}

@Test(arguments: [StoreKind.lmdb, .sqlite])
func aCopyStoppedByAFullDiskFailsCleanlyAndFinishesWithResume(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(kind == .lmdb ? .sqlite : .lmdb, "source")
    let destination = dir.location(kind, "destination")
    try DemoData.seed(source, items: 40_000, seed: 6)
    // A 4 MiB limit on file size (RLIMIT_FSIZE) makes the destination's writes fail part way,
    // as a full disk does; SIGXFSZ is ignored so the write returns an error instead.
    let limited = try runCLI(["copy", "--from", source.description, "--to", destination.description,
                              "--progress", "none"],
                             via: ["/bin/bash", "-c", "trap '' XFSZ; ulimit -f 4096; exec \"$0\" \"$@\""])
    #expect(limited.status == 3, "\(limited.errors)")
    #expect(limited.errors.split(separator: "\n").count == 1 && limited.errors.hasPrefix("migrate-store: error:"),
            "\(limited.errors)")
    #expect(!opensAsComplete(destination))
    let resumed = try runCLI(["copy", "--from", source.description, "--to", destination.description, "--resume",
                              "--progress", "none"])
    #expect(resumed.status == 0, "\(resumed.errors)")
    #expect(try contents(destination) == contents(source))
}

@Test func dryRunWritesNothingAndEntitiesAndNoVerifyAreHonoured() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    let destination = dir.location(.lmdb, "destination")
    try DemoData.seed(source, items: 3_000, seed: 8)
    let dry = try runCLI(["--from", source.description, "--to", destination.description, "--dry-run", "--progress", "none"])
    #expect(dry.status == 0, "\(dry.errors)")
    #expect(dry.output.contains("Customer") && dry.output.contains("900") && dry.output.contains("1200"),
            "\(dry.output)")
    #expect(!destination.exists, "a dry run creates nothing")
    let subset = try runCLI(["--from", source.description, "--to", destination.description, "--entities", "Order,Product",
                             "--no-verify", "--progress", "none"])
    #expect(subset.status == 0, "\(subset.errors)")
    #expect(!subset.output.contains("verified:"), "no verification was asked for")
    // The pairs of the many-to-many between the two come along.
    #expect(try contents(destination).keys.sorted() == ["Order", "Order_products", "Product"])
}

@Test(arguments: [StoreKind.sqlite, .lmdb])
func aReadOnlyDirectoryIsAOneLineErrorAndAMissingOneToo(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let readOnly = dir.path("read-only")
    try FileManager.default.createDirectory(atPath: readOnly, withIntermediateDirectories: false)
    try FileManager.default.setAttributes([.posixPermissions: 0o555], ofItemAtPath: readOnly)
    try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: dir.url.path)
    defer { try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: readOnly) }
    // Root ignores permissions, so as root the command runs as nobody (setpriv).
    let asUser = getuid() == 0 ? ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] : []
    let denied = try runCLI(["seed", "--to", "\(kind.rawValue):\(readOnly)/app.\(kind.rawValue)", "--items", "10",
                             "--progress", "none"], via: asUser)
    #expect(denied.status == 2, "\(denied.errors)")
    #expect(denied.errors.split(separator: "\n").count == 1 && denied.errors.contains(readOnly), "\(denied.errors)")
    let missing = try runCLI(["seed", "--to", "\(kind.rawValue):\(dir.path("no/such/dir"))/app", "--items", "10",
                              "--progress", "none"])
    #expect(missing.status == 2 && missing.errors.contains("does not exist"), "\(missing.errors)")
}
