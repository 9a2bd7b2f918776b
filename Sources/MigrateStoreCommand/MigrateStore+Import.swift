import ArgumentParser
import DataStoreAPI
import Foundation
import JSONLStore
import StoreMigration

extension MigrateStore {
    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Import an API's JSON (an array of objects, or JSON Lines) into an entity, as the Sync library does.",
            discussion: """
                JSON keys map onto attributes and relationships: the same name, the camelCase form of \
                a snake_case key (user_id is userID), or the --mapping file ({"json_key": "attribute", \
                "Note.json_key": "attribute"}). Nested objects and arrays are synced into the related \
                entities, to any depth; "company_id" and "notes_ids" give related items by key. The \
                primary key decides between insert and update, and an object equal to its item is not \
                written. Items of the entity that the JSON does not hold (among those --where selects) \
                are deleted, and items a nested array no longer lists are deleted or unlinked as the \
                relationship's delete rule says: see what would be with --dry-run, keep them with \
                --keep-missing; when a value names no item by its key (null, an object without the key), \
                nothing is deleted, the rest is imported, and the command exits 2. Dates may be ISO 8601 text (2014-01-02, 2014-02-14T04:30:10+00:00) or \
                Unix timestamps. Objects that cannot be imported are counted, listed with their reason \
                in --rejects, and skipped; input that is not JSON, or holds no JSON value (an empty \
                file), writes nothing: deleting every item takes an explicit empty array []. Objects \
                are written in transactions of --batch-size, each storing a checkpoint: after Ctrl-C \
                or a crash, the same command goes on from the last one.
                """)

        @Option(help: "The store, KIND:PATH (or a bare KIND for the one store in the current directory).")
        var to: String

        @OptionGroup var key: StoreKeyOption

        @Option(help: "The entity to import into.")
        var entity: String

        @Argument(help: "The JSON file.")
        var file: String

        @Option(help: ArgumentHelp("A JSON object mapping JSON keys onto attribute names.", valueName: "mapping.json"))
        var mapping: String?

        @Flag(help: "Do not map snake_case keys onto camelCase attributes.")
        var noSnakeCase = false

        @Flag(help: "Do not insert new items.")
        var skipInserts = false

        @Flag(help: "Do not update existing items.")
        var skipUpdates = false

        @Flag(name: [.customLong("keep-missing"), .customLong("skip-deletes")],
              help: "Delete or unlink nothing: keep the items the JSON does not hold.")
        var keepMissing = false

        @Option(name: .customLong("where"),
                help: ArgumentHelp("The scope of the sync (Sync's predicate): of the items the JSON does not hold, only "
                    + "those that match are deleted (for example \"companyID == 3 and active == true\").",
                    valueName: "filter"))
        var scope: String?

        @Option(help: ArgumentHelp("How numbers given for dates are read: seconds, milliseconds or automatic "
            + "(milliseconds from 100000000000 up)."))
        var epoch: String = "automatic"

        @Option(help: ArgumentHelp("Write the rejected objects, with their reasons, as JSON Lines.", valueName: "rejects.jsonl"))
        var rejects: String?

        @Option(help: "Objects per write transaction (default: 1000).", transform: { try positiveCount($0, "--batch-size") })
        var batchSize: PositiveInt = 1_000

        @Flag(help: ArgumentHelp("Print what the import would delete, unlink, insert, update, link and reject, "
            + "per entity, and write nothing."))
        var dryRun = false

        @Option(help: "Progress display: auto (a bar on a terminal, plain lines otherwise), bar, plain or none.")
        var progress: ProgressStyle = .auto

        func validate() throws {
            guard JSONImport.EpochUnit(rawValue: epoch) != nil else {
                throw ValidationError("--epoch must be seconds, milliseconds or automatic")
            }
        }

        /// " (N of them again: …)" after an update count, when some updates rewrote an item an
        /// earlier object of the input had written.
        static func again(_ count: Int) -> String {
            count == 0 ? "" : " (\(count) of them again: items that several objects of the input give)"
        }

        func run() throws {
            let location = try CommandFailure.catching {
                try key.apply(to: StoreLocation.resolve([to], store: nil, takesStoreOption: false)[0])
            }
            if let rejects, !dryRun {
                try checkOutputPath(rejects, option: "--rejects", inputs: [location.path, file, mapping, key.keyFile])
            }
            guard location.exists else {
                throw CommandFailure.exit(for: StoreError(.notFound, "\(location) does not exist: an import writes into "
                    + "a store that has the schema; create it with: migrate-store create \(location) --schema "
                    + "schema.json (or --schema-of STORE; `migrate-store inspect STORE --schema` prints a schema file)"))
            }
            var options = JSONImport.Options(snakeCaseToCamelCase: !noSnakeCase,
                                             epochUnit: JSONImport.EpochUnit(rawValue: epoch) ?? .automatic,
                                             batchSize: batchSize, dryRun: dryRun)
            if skipInserts { options.operations.remove(.insert) }
            if skipUpdates { options.operations.remove(.update) }
            if keepMissing { options.operations.remove(.delete) }
            options.storeName = location.description
            if let mapping {
                options.mapping = try CommandFailure.catching {
                    guard let data = FileManager.default.contents(atPath: mapping) else {
                        throw StoreError(.notFound, "the mapping file \(mapping) does not exist")
                    }
                    return try JSONInput.decode([String: String].self, from: data,
                                                what: "the mapping file \(mapping) (a JSON object of strings)")
                }
            }
            let interrupt = InterruptHandler.shared
            interrupt.setMessage(dryRun ? "migrate-store: interrupted; the dry run wrote nothing"
                : "migrate-store: interrupted; the batches imported so far are kept, and the same command run again "
                    + "goes on from the last one")
            let report: JSONImport.Report
            do {
                let store = try location.open(schema: nil)
                defer { try? store.close() }
                if let scope {
                    guard let target = store.schema.entity(named: entity) else {
                        throw StoreError(.unknownEntity, "the store has no entity '\(entity)'")
                    }
                    options.scope = try Filter(parsing: scope, for: target, in: store.schema)
                }
                let display = ProgressDisplay(style: progress)
                let start = Date()
                defer { display.finish() }
                report = try JSONImport.run(file, into: store, entity: entity, options: options,
                                            rejects: dryRun ? nil : rejects, shouldStop: { interrupt.isSet },
                                            reporting: { done, total in
                    display.show(MigrationProgress(phase: .copy, entity: entity, done: done, total: total,
                                                   itemsPerSecond: Double(done) / max(Date().timeIntervalSince(start), 1e-6)))
                })
            } catch let stopped as JSONImport.Interrupted {
                let done = stopped.report.inserted + stopped.report.updated + stopped.report.unchanged
                FileHandle.standardError.write(Data(("migrate-store: interrupted after a finished batch (\(done) objects "
                    + "imported); the same command run again goes on from there\n").utf8))
                throw ExitCode(130)
            } catch {
                throw CommandFailure.exit(for: error)
            }
            // Deletions first: they are what an import of the wrong file costs.
            let would = dryRun ? "would be " : ""
            print("import \(file) -> \(location) \(entity)" + (dryRun ? " (dry run: nothing written)" : "") + ": "
                + "\(report.deleted) \(would)deleted, \(report.inserted) \(would)inserted, "
                + "\(report.updated) \(would)updated\(Self.again(report.updatedAgain)), \(report.unchanged) unchanged, "
                + "\(report.rejected.count) rejected, "
                + "of \(report.objects) objects"
                + (report.resumedAfter.map { " (went on after \($0) objects of an interrupted run)" } ?? ""))
            for (name, counts) in report.entities.sorted(by: { $0.key < $1.key }) where name != entity {
                print("  \(name): \(counts.deleted) \(would)deleted, \(counts.unlinked) \(would)unlinked, "
                    + "\(counts.inserted) \(would)inserted, \(counts.updated) \(would)updated\(Self.again(counts.updatedAgain)), "
                    + "\(counts.linked) "
                    + "\(would)linked, \(counts.unchanged) unchanged")
            }
            for reject in report.rejected.prefix(10) { print("  rejected object \(reject.position): \(reject.reason)") }
            if report.rejected.count > 10 { print("  ... \(report.rejected.count - 10) more") }
            for kept in report.keptByDeleteRules.prefix(10) { print("  \(would)kept by a delete rule: \(kept)") }
            if report.keptByDeleteRules.count > 10 { print("  ... \(report.keptByDeleteRules.count - 10) more") }
            for missing in report.missingLinks.prefix(10) {
                print("  object \(missing.position) \(would)imported without a link: \(missing.reason)")
            }
            if report.missingLinks.count > 10 { print("  ... \(report.missingLinks.count - 10) more") }
            if let skipped = report.deletesSkipped {
                FileHandle.standardError.write(Data(("migrate-store: error: the \(entity) items the input leaves out "
                    + "\(dryRun ? "would not be" : "were not") deleted: \(skipped); the rest of the import "
                    + "\(dryRun ? "would be" : "is") done\n").utf8))
                throw ExitCode(2)
            }
            // Items the input leaves out that a delete rule keeps, and objects in the store
            // without a link they give, are not a success: exit 2, saying which.
            if let first = report.keptByDeleteRules.first {
                FileHandle.standardError.write(Data(("migrate-store: error: \(report.keptByDeleteRules.count) items "
                    + "the input leaves out \(dryRun ? "would be" : "were") kept by delete rules, the first "
                    + "\(entity) \(first); the rest of the import is done\n").utf8))
                throw ExitCode(2)
            }
            if let first = report.missingLinks.first {
                FileHandle.standardError.write(Data(("migrate-store: error: \(report.missingLinks.count) objects "
                    + "\(dryRun ? "would be" : "were") imported without a link, the first at object "
                    + "\(first.position): \(first.reason); import the items they name first, or export with "
                    + "--relationships nested, which carries them\n").utf8))
                throw ExitCode(2)
            }
        }
    }
}
