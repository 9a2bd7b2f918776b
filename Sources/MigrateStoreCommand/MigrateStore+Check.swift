import ArgumentParser
import DataStoreAPI
import Foundation
import StoreMigration

extension MigrateStore {
    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check a store for damage without writing to it; exit 2 when it is damaged.",
            discussion: """
                SQLite: PRAGMA integrity_check. LMDB: every page of every database walked with bounds \
                checks before liblmdb reads it. Both: every item read back and checked against the \
                schema (types, required values, valid UTF-8, each record's checksum), then the \
                change feed's state and entries.
                """)

        @OptionGroup var foreign: ForeignSourceOptions

        @Argument(help: "The store, KIND:PATH (or a bare KIND for the one store in the current directory).")
        var store: String

        func run() throws {
            // The check only reads: Ctrl-C has nothing to wait for.
            InterruptHandler.shared.endAtOnce()
            let location = try CommandFailure.catching { try foreign.apply(to: StoreLocation.resolve([store], store: nil, takesStoreOption: false)[0]) }
            let report = try CommandFailure.catching { try location.check() }
            print("\(location): no damage found in \(String(format: "%.2f", report.seconds)) s: "
                + "\(report.engineCheck); \(report.items) items\(report.references.map { ", \($0) references" } ?? "")"
                + (report.changeFeedEntries.map { ", \($0) change feed entries" } ?? ""))
        }
    }
}
