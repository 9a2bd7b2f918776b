import ArgumentParser
import DataStoreAPI
import Foundation
import StoreMigration

extension MigrateStore {
    struct Diff: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the item-level differences between two stores as JSON Lines; exit 1 when there are any.",
            discussion: """
                The lines are what `sync --from SOURCE --to DESTINATION` would do to the destination: \
                {"op":"insert"|"update"|"delete","entity":...,"key":...,"item":{...}}, an update listing \
                each changed attribute as {"old":...,"new":...}. After a header line with both stores and \
                the schema. `sync --from diff:FILE --to DESTINATION` applies such a file, in one \
                transaction, only if the destination still holds what the diff saw.
                """)

        @OptionGroup var foreign: ForeignSourceOptions

        @Option(help: "The source store: KIND:PATH, or a bare KIND.")
        var from: String

        @Option(help: "The destination store: KIND:PATH, or a bare KIND.")
        var to: String

        @Option(help: ArgumentHelp("The store's name (PATH/NAME) for a bare KIND.", valueName: "path/name"))
        var store: String?

        @Option(help: "Only these entities, comma-separated (default: all).")
        var entities: String?

        @Option(name: .shortAndLong, help: ArgumentHelp(
            "Write the diff to this file (gzip-compressed when it ends in .gz) instead of standard output.",
            valueName: "file"))
        var output: String?

        @Option(help: "Progress display: auto, bar, plain or none.")
        var progress: ProgressStyle = .auto

        @Option(help: "Write the summary as JSON to this file.")
        var report: String?

        func run() throws {
            let locations = try CommandFailure.catching { try StoreLocation.resolve([from, to], store: store).enumerated().map { $0 == 0 ? try foreign.apply(to: $1) : $1 } }
            let list = entities.map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
            let paths: [String?] = locations.map(\.path) + [foreign.keyFile, foreign.model]
            if let output, output != "-" { try checkOutputPath(output, option: "-o", inputs: paths) }
            try checkReportPath(report, inputs: paths + [output])
            // With the diff on standard output, the summary goes to standard error.
            let toStandardOutput = output == nil || output == "-"
            let display = ProgressDisplay(style: toStandardOutput && progress == .auto ? .none : progress)
            let result: DiffReport
            do {
                result = try Migrator.diff(from: locations[0], to: locations[1], output: output,
                                           options: MigrationOptions(entities: list, checkSource: false),
                                           progress: { display.show($0) })
            } catch {
                display.finish()
                throw CommandFailure.exit(for: error)
            }
            display.finish()
            var summary = "diff \(result.source) -> \(result.destination)\n"
            for counts in result.entities {
                summary += "  \(counts.entity): \(counts.inserted) to insert, \(counts.updated) to update, "
                    + "\(counts.deleted) to delete\n"
            }
            summary += "\(result.changes) differences\n"
            if toStandardOutput {
                FileHandle.standardError.write(Data(summary.utf8))
            } else {
                print(summary, terminator: "")
            }
            if let report { try writeReport(result, to: report) }
            if result.changes > 0 { throw ExitCode(1) }
        }
    }
}

/// `sync --from diff:FILE --to STORE`: applies a diff.
func runApplyDiff(_ path: String, _ options: TransferOptions) throws {
    let destination = try CommandFailure.catching { try StoreLocation.resolve([options.to], store: options.store)[0] }
    try checkReportPath(options.report, inputs: [path, destination.path, options.toKeyFile])
    let result = try CommandFailure.catching { try Migrator.apply(diff: path, to: destination) }
    print("applied \(path) (diff of \(result.source)) to \(result.destination)")
    for counts in result.entities {
        print("  \(counts.entity): \(counts.inserted) inserted, \(counts.updated) updated, \(counts.deleted) deleted")
    }
    if let report = options.report { try writeReport(result, to: report) }
}
