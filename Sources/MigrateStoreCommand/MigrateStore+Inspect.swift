import ArgumentParser
import DataStoreAPI
import Foundation
import StoreMigration

extension MigrateStore {
    struct Inspect: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a store's schema, item counts per entity, size on disk and migration state.")

        @Argument(help: "The store, KIND:PATH (or a bare KIND for the one store in the current directory).")
        var store: String

        @Flag(help: "Check the store's integrity too (as `check` does).")
        var check = false

        func run() throws {
            let location = try CommandFailure.catching { try StoreLocation.resolve([store], store: nil)[0] }
            try CommandFailure.catching {
                if check {
                    let report = try location.check()
                    print("checked in \(String(format: "%.2f", report.seconds)) s: \(report.engineCheck); "
                        + "\(report.items) items")
                }
                let opened = try Migrator.acceptingUnfinished { try location.openSource(alreadyChecked: check) }
                defer { try? opened.close() }
                print("\(location)  \(location.sizeOnDisk) bytes on disk  schema version \(opened.schema.version)")
                let marker = try opened.read { try $0.metadata(forKey: MetadataKeys.incompleteMigration) }
                let checkpoint = try Migrator.checkpoint(of: opened)
                try opened.read { reader in
                    if let marker {
                        let source = String(decoding: marker, as: UTF8.self)
                        print("state: UNFINISHED migration from \(source); finish it with: "
                            + "migrate-store copy --from \(source) --to \(location) --resume")
                        if let checkpoint {
                            print("checkpoint: \(checkpoint.entity) up to key \(checkpoint.lastKey ?? .null)"
                                + (checkpoint.finishedEntities.isEmpty ? ""
                                    : " (finished: \(checkpoint.finishedEntities.joined(separator: ", ")))"))
                        }
                    } else {
                        print("state: complete")
                    }
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
                    }
                }
            }
        }
    }

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check a store for damage without writing to it; exit 2 when it is damaged.",
            discussion: """
                SQLite: PRAGMA integrity_check. LMDB: every page of every database walked with bounds \
                checks before liblmdb reads it. Both: every item read back and checked against the \
                schema (types, required values, valid UTF-8).
                """)

        @Argument(help: "The store, KIND:PATH (or a bare KIND for the one store in the current directory).")
        var store: String

        func run() throws {
            let location = try CommandFailure.catching { try StoreLocation.resolve([store], store: nil)[0] }
            let report = try CommandFailure.catching { try location.check() }
            print("\(location): no damage found in \(String(format: "%.2f", report.seconds)) s: "
                + "\(report.engineCheck); \(report.items) items")
        }
    }

    struct Seed: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a realistic demo store: customers, products and orders with every value type.")

        @Option(help: "The store to create, KIND:PATH.")
        var to: String

        @Option(help: "Items in total (a fifth customers, a tenth products, the rest orders).")
        var items: Int = 100_000

        @Option(help: "The random seed; the same seed gives the same store.")
        var seed: UInt64 = 1

        @Flag(help: "Replace the store if it exists.")
        var overwrite = false

        @Option(help: "Progress display: auto, bar, plain or none.")
        var progress: ProgressStyle = .auto

        func validate() throws {
            guard items > 0 else { throw ValidationError("--items must be at least 1") }
        }

        func run() throws {
            let location = try CommandFailure.catching { try StoreLocation(parsing: to) }
            let display = ProgressDisplay(style: progress)
            let start = Date()
            try CommandFailure.catching {
                if location.exists {
                    guard overwrite else {
                        throw StoreError(.invalidArgument, "\(location) already exists; replace it with --overwrite")
                    }
                    try location.destroy()
                }
                try DemoData.seed(location, items: items, seed: seed) { done in
                    display.show(MigrationProgress(phase: .copy, entity: "seed", done: done, total: items,
                                                   itemsPerSecond: Double(done) / max(Date().timeIntervalSince(start), 1e-6)))
                }
            }
            display.finish()
            print("seeded \(location) with \(items) items (seed \(seed))")
        }
    }
}
