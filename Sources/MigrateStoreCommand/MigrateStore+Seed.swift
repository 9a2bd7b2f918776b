import ArgumentParser
import DataStoreAPI
import Foundation
import StoreMigration

extension MigrateStore {
    struct Seed: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a realistic demo store: customers, products and orders with every value type.")

        @Option(help: "The store to create, KIND:PATH.")
        var to: String

        @Option(help: "Items in total (a fifth customers, a tenth products, the rest orders).")
        var items: Int = 100_000

        @Option(help: "The random seed; the same seed gives the same store.")
        var seed: UInt64 = 1

        @Flag(help: "Replace the store if it exists and is a store of its kind (or an empty file or directory).")
        var overwrite = false

        @Option(help: "Progress display: auto, bar, plain or none.")
        var progress: ProgressStyle = .auto

        func validate() throws {
            guard (1...DemoData.maxItems).contains(items) else {
                throw ValidationError("--items must be from 1 to \(DemoData.maxItems), not \(items)")
            }
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
                    try location.requireReplaceable()
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
