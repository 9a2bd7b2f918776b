import ArgumentParser
@_spi(Backend) import DataStoreAPI
import Foundation
import ForeignStores
@_spi(Backend) import StoreMigration

extension SchemaDiagram.Format: ExpressibleByArgument {}

extension MigrateStore {
    struct Inspect: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a store's schema, item counts per entity, size on disk and migration state.")

        @OptionGroup var foreign: ForeignSourceOptions

        @Argument(help: "The store, KIND:PATH (or a bare KIND for the one store in the current directory).")
        var store: String

        @Flag(help: "Check the store's integrity too (as `check` does).")
        var check = false

        @Flag(help: ArgumentHelp("Print only the schema, as JSON: the schema file `create --schema` takes."))
        var schema = false

        @Option(help: ArgumentHelp("Print only the entities and relationships as a diagram: mermaid (an erDiagram, "
            + "which GitHub and Markdown viewers draw) or dot (Graphviz).", valueName: "format"))
        var diagram: SchemaDiagram.Format?

        /// One line on a store's part in a switch between backends.
        static func describe(_ status: SwitchingStore.Status, _ location: StoreLocation) -> String {
            let role = status.old == location.description ? "from" : "to"
            let switchLine = "switch from \(status.old) to \(status.new)"
            let when = status.switchedAt.map { " at " + ISO8601DateFormatter().string(from: $0) } ?? ""
            switch (status.phase, status.serving) {
            case (.copying, _), (.following, _):
                // The old store's record does not follow the copy: the new store's says where it is.
                return role == "from" ? "\(switchLine) in progress; this store serves the app"
                    : "\(switchLine) in progress (\(status.phase.rawValue)); this store is being filled; the app's "
                        + "SwitchingStore goes on with it at its next launch"
            case (.switched, true):
                return "\(switchLine) done\(when); this store serves the app"
                    + (status.rollingBack ? " (rolling back: the old store is catching up)" : "")
            case (.switched, false):
                return "\(switchLine) done\(when); this store is kept for a rollback until the app drops it"
            case (.rolledBack, _):
                return "\(switchLine) rolled back; this store serves the app"
            case (.cancelled, _):
                return "\(switchLine) cancelled before its cutover; this store serves the app"
            case (.rollingBack, _):
                return "\(switchLine) rolling back"
            }
        }

        func run() throws {
            // Inspecting only reads: Ctrl-C has nothing to wait for.
            InterruptHandler.shared.endAtOnce()
            let location = try CommandFailure.catching { try foreign.apply(to: StoreLocation.resolve([store], store: nil, takesStoreOption: false)[0]) }
            try CommandFailure.catching {
                // A store written whole (JSON Lines) is not in place until its copy finishes:
                // what there is to say of an unfinished one is its checkpoint, as for the others.
                if !location.exists, let streamed = try StoreBackends.backend(location.kind) as? any StreamedStoreBackend,
                   let position = streamed.unfinishedStreamPosition(at: location.path) {
                    print("\(location)  not in place yet (the copy writes it whole)")
                    print("state: UNFINISHED migration from \(position.source); finish it with: "
                        + ShellCommand.resume(from: position.source, to: location.description))
                    let finished = position.finishedEntities.joined(separator: ", ")
                    if let entity = position.entity {
                        print("checkpoint: \(entity) up to key \(position.lastKey ?? .null)"
                            + (finished.isEmpty ? "" : " (finished: \(finished))"))
                    } else {
                        print(finished.isEmpty ? "checkpoint: none yet"
                            : "checkpoint: every entity written (\(finished)); the copy had yet to verify it")
                    }
                    return
                }
                if let diagram {
                    let opened = try location.openSource(alreadyChecked: false)
                    defer { try? opened.close() }
                    print(SchemaDiagram.render(opened.schema, as: diagram))
                    return
                }
                if schema {
                    let opened = try location.openSource(alreadyChecked: false)
                    defer { try? opened.close() }
                    let encoder = JSONEncoder()
                    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                    print(String(decoding: try encoder.encode(opened.schema), as: UTF8.self))
                    return
                }
                if check {
                    let report = try location.check()
                    print("checked in \(String(format: "%.2f", report.seconds)) s: \(report.engineCheck); "
                        + "\(report.items) items\(report.references.map { ", \($0) references" } ?? "")")
                }
                let opened = try Migrator.acceptingUnfinished { try location.openSource(alreadyChecked: check) }
                defer { try? opened.close() }
                if let foreign = opened as? any ForeignStore {
                    print("\(location)  \(location.sizeOnDisk) bytes on disk")
                    for fact in foreign.facts { print(fact) }
                    print("read as: \(foreign.summary)")
                    try MigrateStore.printEntities(opened)
                    return
                }
                print("\(location)  \(location.sizeOnDisk) bytes on disk  schema version \(opened.schema.version)")
                let marker = try Migrator.unfinishedMarker(in: opened, of: location)
                let checkpoint = try Migrator.checkpoint(of: opened, named: location.description)
                let switching = try SwitchingStore.status(in: opened, named: location.description)
                try opened.read { reader in
                    if let switching {
                        print("state: " + Self.describe(switching, location))
                    } else if let source = marker {
                        print("state: UNFINISHED migration from \(source); finish it with: "
                            + ShellCommand.resume(from: source, to: location.description))
                        if let checkpoint {
                            print("checkpoint: \(checkpoint.entity) up to key \(checkpoint.lastKey ?? .null)"
                                + (checkpoint.finishedEntities.isEmpty ? ""
                                    : " (finished: \(checkpoint.finishedEntities.joined(separator: ", ")))"))
                        }
                    } else {
                        print("state: complete")
                    }
                    let history = try opened.schemaHistory()
                    if history.isEmpty {
                        print("schema history: none (created at version \(opened.schema.version))")
                    } else {
                        print("schema history:")
                        for entry in history {
                            print("  \(ValueConversion.iso8601Text(entry.date))  version \(entry.fromVersion) -> "
                                + "\(entry.toVersion): " + (entry.steps.isEmpty ? "no steps" : entry.steps.joined(separator: "; ")))
                        }
                    }
                }
                try MigrateStore.printEntities(opened)
            }
        }
    }

    /// Each entity of the store with its item count, attributes, indexes and relationships.
    static func printEntities(_ opened: any DataStore) throws {
        try opened.read { reader in
            for entity in opened.schema.entities {
                let count = try reader.count(FetchRequest(entity.name))
                print("\n\(entity.name): \(count) items, primary key \(entity.primaryKey)")
                for attribute in entity.attributes {
                    let optional = attribute.isOptional ? "?" : ""
                    let fallback = attribute.defaultValue.map { " = \($0)" } ?? ""
                    print("  \(attribute.name): \(attribute.type.rawValue)\(optional)\(fallback)")
                }
                for index in entity.indexes {
                    print("  index \(index.name)\(index.isUnique ? " (unique)" : ""): "
                        + index.attributes.joined(separator: ", "))
                }
                for relationship in entity.relationships {
                    let kind = relationship.cardinality == .toOne
                        ? (relationship.isOptional ? "to-one" : "required to-one")
                        : (relationship.isOrdered ? "ordered to-many" : "to-many")
                    print("  relationship \(relationship.name): \(kind) \(relationship.destination)"
                        + (relationship.inverse.map { ", inverse \($0)" } ?? "")
                        + ", delete rule \(relationship.deleteRule.rawValue)")
                }
            }
        }
    }
}
