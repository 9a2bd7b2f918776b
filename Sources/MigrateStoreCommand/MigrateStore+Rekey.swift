import ArgumentParser
@_spi(Backend) import DataStoreAPI
import Foundation
import StoreMigration

extension MigrateStore {
    struct Rekey: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Give a store a new key, or encrypt or decrypt it, as a verified copy that then takes its place.",
            discussion: """
                The store is copied beside itself (PATH.rekeyed) under a new data key wrapped by the new key, \
                the copy is verified item by item, and the two are swapped in one atomic rename: the path \
                always names the whole old store or the whole new one. Run the same command again to finish \
                a rekey that was stopped (Ctrl-C, a crash, a full disk). No other process may have the store \
                open while it is rekeyed.
                """)

        @Argument(help: "The store, KIND:PATH (a sqlite or lmdb store).")
        var store: String

        @Option(help: ArgumentHelp("The file holding the store's current key; omit it to encrypt a store that is not "
            + "encrypted.", valueName: "path"))
        var keyFile: String?

        @Option(help: ArgumentHelp("The file holding the new key: 64 hexadecimal digits (openssl rand -hex 32) or a "
            + "passphrase.", valueName: "path"))
        var newKeyFile: String?

        @Flag(help: "Decrypt the store (no new key): its values are then written in the clear.")
        var decrypt = false

        @Option(help: "Items per write transaction and checkpoint (default: 1000).", transform: { try positiveCount($0, "--batch-size") })
        var batchSize: PositiveInt = 1_000

        @Option(help: "Progress display: auto (a bar on a terminal, plain lines otherwise), bar, plain or none.")
        var progress: ProgressStyle = .auto

        func validate() throws {
            if decrypt && newKeyFile != nil { throw ValidationError("--decrypt and --new-key-file exclude each other") }
            if !decrypt && newKeyFile == nil {
                throw ValidationError("give the new key with --new-key-file, or --decrypt to store the values in the clear")
            }
            if decrypt && keyFile == nil { throw ValidationError("--decrypt needs the store's key: --key-file") }
        }

        func run() throws {
            let (location, newKey) = try CommandFailure.catching {
                let location = try StoreLocation.resolve([store], store: nil, takesStoreOption: false)[0]
                return (location.with(key: try keyFile.map { try StoreKey(contentsOfFile: $0) }),
                        try newKeyFile.map { try StoreKey(contentsOfFile: $0) })
            }
            let display = ProgressDisplay(style: progress)
            let interrupt = InterruptHandler.shared
            let again = "migrate-store rekey " + CommandLine.arguments.dropFirst(2).map(ShellCommand.quoted).joined(separator: " ")
            interrupt.setMessage { "migrate-store: interrupted; to finish, run: \(again)" }
            let report: MigrationReport?
            do {
                report = try StoreMigration.Rekey.rekey(location, to: newKey, options: MigrationOptions(batchSize: batchSize),
                                                        shouldStop: { interrupt.isSet }, progress: { display.show($0) })
            } catch let stopped as MigrationInterrupted {
                display.finish()
                printSummary(stopped.report)
                FileHandle.standardError.write(Data("migrate-store: interrupted after a finished batch; to finish, run: \(again)\n".utf8))
                throw ExitCode(130)
            } catch {
                display.finish()
                throw CommandFailure.exit(for: error)
            }
            display.finish()
            if let report { printSummary(report) }
            print("\(location): " + (newKey == nil ? "decrypted" : keyFile == nil ? "encrypted" : "rekeyed")
                + ", verified and swapped into place")
        }
    }
}
