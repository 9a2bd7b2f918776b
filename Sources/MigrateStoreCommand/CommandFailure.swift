import ArgumentParser
@_spi(Backend) import DataStoreAPI
import Foundation
import StoreMigration
import Synchronization

/// One-line errors and the documented exit codes.
enum CommandFailure {
    /// The exit code of a failure with this error code: 2 when the input is at fault (a file,
    /// a store, an argument, a plan, a mapping or a value the command was given), 3 when the
    /// operation failed while running (the disk, the OS, a lock, the store closing under it).
    static func exitCode(for code: StoreError.Code) -> Int32 {
        switch code {
        case .storeFull, .io, .closed, .reentrantCall, .accessorExpired, .busy, .unavailable: 3
        default: 2
        }
    }

    /// Prints `migrate-store: error: …` and returns the exit code to throw.
    static func exit(for error: any Error) -> ExitCode {
        if let exit = error as? ExitCode { return exit }
        let message = (error as? StoreError).map { error in
            error.message + (error.cause.map { " (\($0))" } ?? "")
        } ?? "\(error)"
        // What could be a secret (a location that did not parse) never reaches the terminal.
        let oneLine = LocationSecrets.redacted(message.split(whereSeparator: \.isNewline).joined(separator: " "))
        FileHandle.standardError.write(Data("migrate-store: error: \(oneLine)\n".utf8))
        return ExitCode((error as? StoreError).map { exitCode(for: $0.code) } ?? 3)
    }

    static func catching<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch {
            throw exit(for: error)
        }
    }
}
