import ArgumentParser
@_spi(Backend) import DataStoreAPI
import Foundation
import JSONLStore
import StoreMigration

extension MigrateStore {
    struct Copy: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy a store into a new one of any kind, in key order, in checkpointed batches, then verify it.",
            discussion: """
                The destination's files, and the staging files and checkpoints of the copy, take the \
                permission bits of the source's files (as `cp -p` does): a store only its owner can read \
                is copied into files only its owner can read.
                """)

        @OptionGroup var options: TransferOptions

        @Flag(help: "Finish an interrupted copy into the destination (reconciling what it holds with the source).")
        var resume = false

        @Flag(help: ArgumentHelp("Replace the destination if it exists and is a store of its kind (or an empty file or "
            + "directory); anything else there (a user's files, another program's database) is refused, never deleted."))
        var overwrite = false

        @Flag(help: "Skip the item-by-item verification after the copy.")
        var noVerify = false

        @Flag(help: "Read and count the source and check the destination, but write nothing.")
        var dryRun = false

        @Flag(help: "Skip the integrity check of the source before the copy (its cost is in the summary).")
        var noCheck = false

        @Option(help: ArgumentHelp("After the copy, upgrade the destination with this schema plan (JSON, as for "
            + "`upgrade`): move a store to another backend and to a new schema version in one command.",
            valueName: "plan.json"))
        var plan: String?

        @OptionGroup var follow: FollowOption

        func validate() throws {
            try follow.validate()
            if follow.enabled && dryRun { throw ValidationError("--follow and --dry-run exclude each other") }
            if follow.enabled && plan != nil {
                throw ValidationError("--follow and --plan exclude each other: follow a source of the same schema")
            }
            if resume && overwrite { throw ValidationError("--resume and --overwrite exclude each other") }
            if resume && dryRun {
                throw ValidationError("--resume and --dry-run exclude each other: a resume writes the differences it finds")
            }
        }

        func run() throws {
            let schemaPlan = try plan.map { path in try CommandFailure.catching { try SchemaPlanFile.read(path) } }
            if follow.enabled { try checkFollow(options) }
            if schemaPlan != nil && !dryRun {
                try CommandFailure.catching {
                    try Migrator.requireTransactions(options.locations().1, toDo: "be upgraded with --plan")
                }
            }
            try runTransfer(options, name: "copy", resumeHint: true, dryRun: dryRun, overwrite: overwrite) { source, destination, stop, progress in
                try Migrator.copy(from: source, to: destination,
                                  options: MigrationOptions(entities: options.entityList, batchSize: options.batchSize,
                                                            resume: resume, overwrite: overwrite, verify: !noVerify,
                                                            dryRun: dryRun, checkSource: !noCheck),
                                  shouldStop: stop, progress: progress)
            }
            // The copy has just made the destination equal to its snapshot of the source (a resume
            // by a merge join): the follow starts from the position the copy stored with it.
            if follow.enabled { try runFollow(options, follow, compareFirst: false) }
            if let schemaPlan {
                // A dry run checks the plan against the source, since no destination was written.
                let (source, destination) = try CommandFailure.catching { try options.locations() }
                try runUpgrade(dryRun ? source : destination, schemaPlan, dryRun: dryRun, progress: options.progress)
            }
        }
    }

    struct Sync: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply only the differences (inserts, updates, deletes) from the source to an existing destination.",
            discussion: """
                With --from diff:FILE, applies a diff written by `migrate-store diff` instead, in one \
                transaction, if the destination still holds what the diff saw (exit 2 naming the first \
                line that no longer matches, with nothing written).
                """)

        @OptionGroup var options: TransferOptions
        @OptionGroup var check: SourceCheckOption
        @OptionGroup var follow: FollowOption

        func validate() throws {
            try follow.validate()
            if options.from.hasPrefix("diff:") && follow.enabled {
                throw ValidationError("--follow follows a store, not a diff file")
            }
        }

        func run() throws {
            if options.from.hasPrefix("diff:") {
                try runApplyDiff(String(options.from.dropFirst(5)), options)
            } else if follow.enabled {
                try checkFollow(options)
                // Follow starts with the merge-join sync itself, then follows the feed.
                try runFollow(options, follow)
            } else {
                try runComparison(options, check, name: "sync", Migrator.sync)
            }
        }
    }

    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Compare two stores item by item; exit 1 on any difference.")

        @OptionGroup var options: TransferOptions
        @OptionGroup var check: SourceCheckOption

        @Flag(name: .customLong("checksum"), help: ArgumentHelp(
            "Hash each side once in key ranges of 1,000 items and compare items only in the ranges whose "
                + "digests differ: the same differences as the item-by-item compare."))
        var checksum = false

        func run() throws {
            try runComparison(options, check, name: "verify", checksum: checksum, Migrator.verify)
        }
    }
}

/// `--check` of the commands that compare two stores.
struct SourceCheckOption: ParsableArguments {
    @Flag(name: .customLong("check"), help: "Check the source's integrity first (as `check` does).")
    var enabled = false
}

/// Runs `sync` or `verify`: the same options, a different pass of the migration engine.
func runComparison(
    _ options: TransferOptions, _ check: SourceCheckOption, name: String, checksum: Bool = false,
    _ pass: @escaping (StoreLocation, StoreLocation, MigrationOptions, @escaping () -> Bool,
                       @escaping (MigrationProgress) -> Void) throws -> MigrationReport
) throws {
    try runTransfer(options, name: name, resumeHint: false) { source, destination, stop, progress in
        try pass(source, destination,
                 MigrationOptions(entities: options.entityList, batchSize: options.batchSize, checkSource: check.enabled,
                                  checksum: checksum),
                 stop, progress)
    }
}

/// Runs a copy, sync or verify with progress, Ctrl-C handling, the summary and the exit code.
func runTransfer(_ options: TransferOptions, name: String, resumeHint: Bool, dryRun: Bool = false, overwrite: Bool = false,
                 _ body: (StoreLocation, StoreLocation, @escaping () -> Bool,
                          @escaping (MigrationProgress) -> Void) throws -> MigrationReport) throws {
    let (source, destination) = try CommandFailure.catching { try options.locations() }
    try checkReportPath(options.report, inputs: inputPaths(options, source, destination))
    let display = ProgressDisplay(style: options.progress)
    let interrupt = InterruptHandler.shared
    let hint = { @Sendable () -> String in
        finishHint(name, source, destination, resumeHint: resumeHint, overwrite: overwrite)
    }
    interrupt.setMessage { "migrate-store: interrupted; to finish, run: \(hint())" }
    let report: MigrationReport
    do {
        report = try body(source, destination, { interrupt.isSet }, { display.show($0) })
    } catch let stopped as MigrationInterrupted {
        display.finish()
        printSummary(stopped.report, dryRun: dryRun)
        FileHandle.standardError.write(Data("migrate-store: interrupted after a finished batch; to finish, run: \(hint())\n".utf8))
        throw ExitCode(130)
    } catch {
        display.finish()
        throw CommandFailure.exit(for: error)
    }
    display.finish()
    printSummary(report, dryRun: dryRun)
    if let path = options.report { try writeReport(report, to: path) }
    if report.differences > 0 {
        let message = "migrate-store: \(report.differences) differences between \(source) and \(destination)\n"
        FileHandle.standardError.write(Data(message.utf8))
        throw ExitCode(1)
    }
}

/// What to run to finish a copy, sync or verify stopped by Ctrl-C, from its destination's state.
///
/// A copy stopped before its destination appeared (while it checked the source) starts again;
/// one stopped while it verified a complete destination is checked by verify. With
/// `--overwrite`, a complete destination is the one the copy was to replace (a copy's own
/// destination stays unfinished until it has been verified): the copy is run again.
func finishHint(_ name: String, _ source: StoreLocation, _ destination: StoreLocation, resumeHint: Bool,
                overwrite: Bool) -> String {
    let again = ShellCommand.migrateStore(name, "--from", source.description, "--to", destination.description)
    guard resumeHint else { return again }
    switch try? Migrator.copyState(of: destination) {
    case nil: return ShellCommand.migrateStore("check", destination.description)
    case .missing: return again
    case .unfinished: return again + " --resume"
    case .complete where overwrite: return again + " --overwrite"
    case .complete: return ShellCommand.migrateStore("verify", "--from", source.description, "--to", destination.description)
    }
}

func printSummary(_ report: MigrationReport, dryRun: Bool = false) {
    let header = ["entity", "read", "written", "deleted", "verified", "differences", "seconds"]
    var rows = report.entities.map {
        [$0.entity, "\($0.itemsRead)", "\($0.itemsWritten)", "\($0.itemsDeleted)", "\($0.itemsVerified)",
         "\($0.differences)", String(format: "%.2f", $0.seconds)]
    }
    func total(_ path: KeyPath<EntityReport, Int>) -> String { "\(report.entities.reduce(0) { $0 + $1[keyPath: path] })" }
    rows.append(["total", total(\.itemsRead), total(\.itemsWritten), total(\.itemsDeleted), total(\.itemsVerified),
                 total(\.differences), String(format: "%.2f", report.seconds)])
    let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
    func line(_ cells: [String]) -> String {
        cells.enumerated().map { i, cell in
            i == 0 ? cell.padding(toLength: widths[i], withPad: " ", startingAt: 0)
                : String(repeating: " ", count: widths[i] - cell.count) + cell
        }.joined(separator: "  ")
    }
    print("\(report.operation) \(report.source) -> \(report.destination)\(report.resumed ? " (resumed)" : "")"
        + (dryRun ? " (dry run: nothing written)" : ""))
    if let check = report.sourceCheck {
        print("source checked in \(String(format: "%.2f", check.seconds)) s: \(check.engineCheck); \(check.items) items\(check.references.map { ", \($0) references" } ?? "")")
    }
    print(line(header))
    for row in rows { print(line(row)) }
    if report.verified {
        print(report.differences == 0 ? "verified: every item equals the source snapshot"
            : "verified: \(report.differences) differences")
        let ranges = report.entities.compactMap(\.rangesCompared)
        if !ranges.isEmpty {
            let differing = report.entities.compactMap(\.rangesDiffering).reduce(0, +)
            print("by checksum: \(differing) of \(ranges.reduce(0, +)) ranges differed and were compared item by item")
        }
        for sample in report.sampleDifferences { print("  \(sample)") }
    }
}

/// `--follow` and `--until-idle` of `copy` and `sync`.
struct FollowOption: ParsableArguments {
    @Flag(name: .customLong("follow"), help: ArgumentHelp(
        "Then keep applying the source's change feed to the destination, showing the lag, until Ctrl-C or "
            + "--until-idle: the way to switch a live app to another backend. Resumable: a later `sync --follow` "
            + "compares the stores (writes made outside the package are not in the feed) and goes on from there."))
    var enabled = false

    @Option(name: .customLong("until-idle"), help: ArgumentHelp(
        "With --follow, stop once the source has committed nothing for this many seconds.", valueName: "SECONDS"))
    var untilIdle: Double?

    func validate() throws {
        if untilIdle != nil && !enabled { throw ValidationError("--until-idle needs --follow") }
        // At most a year: a Duration holds no more than about 1.7e20 seconds, and no wait is longer.
        if let untilIdle, !(untilIdle >= 0 && untilIdle <= 31_536_000) {
            throw ValidationError("--until-idle must be a number of seconds from 0 to 31536000 (a year), not \(untilIdle)")
        }
    }
}

/// Refuses, before anything is read or written, a follow that cannot work.
func checkFollow(_ options: TransferOptions) throws {
    guard options.entityList == nil else {
        throw CommandFailure.exit(for: StoreError(.invalidArgument, "--follow follows every entity; drop --entities"))
    }
    try CommandFailure.catching {
        let (source, destination) = try options.locations()
        try Migrator.checkFollow(from: source, to: destination)
    }
}

/// Follows the source's feed into the destination until Ctrl-C or the idle limit, printing the
/// lag. Ctrl-C is the normal end (the cutover): the summary, then exit 130 as for every command
/// that Ctrl-C ends; the idle limit exits 0.
func runFollow(_ options: TransferOptions, _ follow: FollowOption, compareFirst: Bool = true) throws {
    let (source, destination) = try CommandFailure.catching { try options.locations() }
    try checkReportPath(options.report, inputs: inputPaths(options, source, destination))
    let display = ProgressDisplay(style: options.progress)
    let interrupt = InterruptHandler.shared
    interrupt.setMessage("migrate-store: interrupted while following; the destination holds every transaction "
        + "applied so far, and `migrate-store sync --follow --from \(source) --to \(destination)` goes on from there")
    let report: FollowReport
    do {
        report = try Migrator.follow(from: source, to: destination,
                                     options: FollowOptions(untilIdle: follow.untilIdle.map { .seconds($0) }, batchSize: options.batchSize ?? 1_000,
                                                            compareFirst: compareFirst),
                                     shouldStop: { interrupt.isSet }, progress: { display.show($0) })
    } catch {
        display.finish()
        throw CommandFailure.exit(for: error)
    }
    display.finish()
    for reason in report.catchUps { print("caught up by a merge-join sync: \(reason)") }
    print("followed \(source) into \(destination): \(report.transactionsApplied) transactions, "
        + "\(report.itemsWritten) items written, \(report.itemsDeleted) deleted; lag median "
        + String(format: "%.3f", report.lagMedianSeconds) + " s, worst " + String(format: "%.3f", report.lagWorstSeconds)
        + " s; ended by \(report.endedBy == "idle" ? "idle source" : "Ctrl-C") at source transaction "
        + "\(report.endToken?.description ?? "none")")
    if let path = options.report { try writeReport(report, to: path) }
    if report.endedBy != "idle" {
        FileHandle.standardError.write(Data(("migrate-store: interrupted while following, at source transaction "
            + "\(report.endToken?.description ?? "none"); `migrate-store sync --follow --from \(source) --to "
            + "\(destination)` goes on from there\n").utf8))
        throw ExitCode(130)
    }
}

/// Refuses, before the operation starts, a `--report` path that cannot be written: a missing
/// directory, a directory given as the file, a directory this user cannot write (exit 2, as for
/// every bad input), so that a long run does not fail at its very end; and one that names what
/// the report would replace and must not (``checkOutputPath(_:option:inputs:)``).
func checkReportPath(_ path: String?, inputs: [String?] = []) throws {
    guard let path else { return }
    try checkOutputPath(path, option: "--report", inputs: inputs)
}

/// Refuses a file the command writes (`option`, `--report` or `-o`) at `path` when it is empty,
/// names a store, something other than a regular file, or one of the command's own `inputs`
/// (stores, key files, input files: `JSONLines.checkOutputFile`), or when its
/// directory is missing or read-only: exit 2, before anything is read or written.
func checkOutputPath(_ path: String, option: String, inputs: [String?]) throws {
    try CommandFailure.catching {
        try JSONLines.checkOutputFile(path, option: option, inputs: inputs.compactMap { $0 })
        try Migrator.requireWritableDirectory(of: path, "\(option) \(path) cannot be written")
    }
}

/// The paths a transfer reads or writes besides its report: its two stores, and the key and
/// model files it was given.
func inputPaths(_ options: TransferOptions, _ source: StoreLocation, _ destination: StoreLocation) -> [String?] {
    [source.path, destination.path, options.toKeyFile, options.foreign.keyFile, options.foreign.model]
}

/// Writes a summary as pretty JSON for `--report`.
func writeReport(_ report: some Encodable, to path: String) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    do {
        try encoder.encode(report).write(to: URL(fileURLWithPath: path))
    } catch {
        throw CommandFailure.exit(for: StoreError(.io, "cannot write the report \(path): \(error.localizedDescription)"))
    }
}
