import ArgumentParser
import DataStoreAPI
import Foundation
import JSONLStore
import StoreMigration

extension MigrateStore {
    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write an entity's items as JSON, the way an app's API sends them.",
            discussion: """
                The items are written as one JSON array, one object per line, in primary-key order, \
                read in one snapshot of a live store (which is never written). --relationships nested \
                writes to-many relationships as arrays of the related objects, to any depth; ids writes \
                the related items' keys (notes_ids with --snake-case); none leaves relationships out. \
                `migrate-store import` reads the file back into the same items.
                """)

        @OptionGroup var foreign: ForeignSourceOptions

        @Option(help: "The store, KIND:PATH (or a bare KIND for the one store in the current directory).")
        var from: String

        @Option(help: "The entity whose items to write.")
        var entity: String

        @Option(help: ArgumentHelp("How relationships are written: nested, ids or none.", valueName: "form"))
        var relationships: String = "nested"

        @Flag(help: "Write keys in snake_case (createdAt as created_at, userID as user_id).")
        var snakeCase = false

        @Option(name: .customLong("where"),
                help: ArgumentHelp("Only the items that match (for example \"rating >= 4\").", valueName: "filter"))
        var scope: String?

        @Option(name: .shortAndLong, help: ArgumentHelp("The file to write (standard output when left out).",
                                                         valueName: "file.json"))
        var output: String?

        func validate() throws {
            guard JSONExport.Relationships(rawValue: relationships) != nil else {
                throw ValidationError("--relationships must be nested, ids or none, not '\(relationships)'")
            }
        }

        func run() throws {
            let location = try CommandFailure.catching { try foreign.apply(to: StoreLocation.resolve([from], store: nil, takesStoreOption: false)[0]) }
            if let output {
                try checkOutputPath(output, option: "-o", inputs: [location.path, foreign.keyFile, foreign.model])
            }
            var options = JSONExport.Options(relationships: JSONExport.Relationships(rawValue: relationships) ?? .nested,
                                             snakeCase: snakeCase)
            let count: Int
            let destination = output ?? FileManager.default.temporaryDirectory
                .appendingPathComponent("migrate-store-export-\(getpid()).json").path
            InterruptHandler.shared.removeOnInterrupt(destination + ".exporting")
            if output == nil { InterruptHandler.shared.removeOnInterrupt(destination) }
            // Nothing to finish: the first Ctrl-C ends the export (its temporary file removed).
            // One that lands after the file took its name says so: the export is complete. The
            // file is this export's when it is not the one that was there before (the rename
            // gives the name the temporary file's identity).
            let before = output.flatMap(Self.identity)
            InterruptHandler.shared.setMessage { [output] in
                if let output, let now = Self.identity(of: output), before.map({ $0 != now }) ?? true {
                    return "migrate-store: interrupted; the export had finished: \(output) is complete"
                }
                return "migrate-store: interrupted; nothing was exported"
            }
            InterruptHandler.shared.endAtOnce()
            do {
                let store = try location.openSource(alreadyChecked: false)
                defer { try? store.close() }
                if let scope {
                    guard let target = store.schema.entity(named: entity) else {
                        throw StoreError(.unknownEntity, "the store has no entity '\(entity)' (it has "
                            + store.schema.entities.map(\.name).joined(separator: ", ") + ")")
                    }
                    options.filter = try Filter(parsing: scope, for: target, in: store.schema)
                }
                count = try JSONExport.run(from: store, entity: entity, options: options, to: destination)
            } catch {
                throw CommandFailure.exit(for: error)
            }
            if output == nil {
                InterruptHandler.shared.setMessage("migrate-store: interrupted; the export written to standard output "
                    + "was cut short")
                defer { unlink(destination) }
                guard let handle = FileHandle(forReadingAtPath: destination) else { throw ExitCode(3) }
                defer { try? handle.close() }
                while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
                    do {
                        try FileHandle.standardOutput.write(contentsOf: chunk)
                    } catch {
                        throw CommandFailure.exit(for: StoreError(.io, "cannot write the export to standard output: "
                            + error.localizedDescription))
                    }
                }
            } else {
                FileHandle.standardError.write(Data("export \(location) \(entity) -> \(destination): \(count) items\n".utf8))
            }
        }

        /// The device and inode of the file at `path`, or `nil` when there is none.
        static func identity(of path: String) -> [UInt64]? {
            var status = stat()
            guard stat(path, &status) == 0 else { return nil }
            return [UInt64(status.st_dev), UInt64(status.st_ino)]
        }
    }
}
