import ArgumentParser
import DataStoreAPI
import Foundation
import StoreMigration

extension MigrateStore {
    struct Upgrade: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply a declarative schema plan (JSON) to a store of any kind, in one transaction.",
            discussion: """
                The plan lists the steps of each version: {"versions": [{"version": 2, "steps": [...]}]}. \
                The store is brought from its version to the plan's last one; it is all-old or all-new \
                whatever happens. Steps: addEntity, removeEntity, renameEntity, addAttribute, \
                removeAttribute, renameAttribute, changeType, addIndex, removeIndex (see the README).
                """)

        @Argument(help: "The store, KIND:PATH (or a bare KIND for the one store in the current directory).")
        var store: String

        @OptionGroup var key: StoreKeyOption

        @Option(help: "The plan: a JSON file.")
        var plan: String

        @Flag(help: "Check the plan against the store and report what it would change; write nothing.")
        var dryRun = false

        @Option(help: "Progress display: auto (a bar on a terminal, plain lines otherwise), bar, plain or none.")
        var progress: ProgressStyle = .auto

        func run() throws {
            let location = try CommandFailure.catching {
                try key.apply(to: StoreLocation.resolve([store], store: nil, takesStoreOption: false)[0])
            }
            let schemaPlan = try CommandFailure.catching { try SchemaPlanFile.read(plan) }
            try runUpgrade(location, schemaPlan, dryRun: dryRun, progress: progress)
        }
    }
}

/// Reads a plan file.
enum SchemaPlanFile {
    static func read(_ path: String) throws -> SchemaPlan {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw StoreError(.notFound, "the plan \(path) does not exist or cannot be read")
        }
        return try JSONInput.decode(SchemaPlan.self, from: data, what: "the plan \(path)")
    }
}

/// Runs an upgrade with progress and prints what it did.
func runUpgrade(_ location: StoreLocation, _ plan: SchemaPlan, dryRun: Bool, progress: ProgressStyle) throws {
    let display = ProgressDisplay(style: progress)
    let interrupt = InterruptHandler.shared
    interrupt.setMessage(dryRun ? "migrate-store: interrupted; the dry run wrote nothing"
        : "migrate-store: interrupted; the upgrade is one transaction and \(location) is unchanged")
    // Ctrl-C ends the upgrade from inside its transaction, at its next progress report (every
    // 10,000 items), where nothing is committed; one that comes after the last report ends the
    // process once the upgrade is over, saying so.
    interrupt.holdEnding()
    let report: UpgradeReport
    do {
        let started = Date()
        report = try SchemaUpgrade.upgrade(location, plan: plan, dryRun: dryRun) { step in
            interrupt.endIfInterrupted()
            let seconds = Date().timeIntervalSince(started)
            display.show(MigrationProgress(phase: .upgrade, entity: "v\(step.version) \(step.step)", done: step.items,
                                           total: step.totalItems,
                                           itemsPerSecond: seconds > 0 ? Double(step.items) / seconds : 0))
        }
    } catch {
        display.finish()
        // Nothing was committed.
        interrupt.releaseEnding()
        throw CommandFailure.exit(for: error)
    }
    display.finish()
    interrupt.setMessage(dryRun ? "migrate-store: interrupted; the dry run wrote nothing"
        : "migrate-store: interrupted after the upgrade had committed: \(location) is at schema version "
            + "\(report.toVersion)")
    interrupt.releaseEnding()
    if report.fromVersion == report.toVersion {
        print("\(location) is at schema version \(report.fromVersion); the plan has nothing to apply")
        return
    }
    print("\(dryRun ? "would upgrade" : "upgraded") \(location) from schema version \(report.fromVersion) to "
        + "\(report.toVersion)\(dryRun ? "" : String(format: " in %.2f s", report.seconds))")
    for step in report.steps {
        print("  v\(step.version): \(step.step)" + (step.items.map { " (\($0) items)" } ?? ""))
    }
}
