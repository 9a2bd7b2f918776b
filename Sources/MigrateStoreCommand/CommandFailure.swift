import ArgumentParser
import DataStoreAPI
import Foundation
import StoreMigration
import Synchronization

/// One-line errors and the documented exit codes.
enum CommandFailure {
    static let badInput: Set<StoreError.Code> = [
        .notFound, .notAStore, .corrupt, .incompatibleFormat, .schemaMismatch, .invalidArgument, .unknownEntity,
        .incompleteMigration, .readOnly, .typeMismatch, .newerSchemaVersion, .invalidValue, .uniqueViolation,
        .conflict,
    ]

    /// Prints `migrate-store: error: …` and returns the exit code to throw.
    static func exit(for error: any Error) -> ExitCode {
        if let exit = error as? ExitCode { return exit }
        let message = (error as? StoreError).map { error in
            error.message + (error.cause.map { " (\($0))" } ?? "")
        } ?? "\(error)"
        let oneLine = message.split(whereSeparator: \.isNewline).joined(separator: " ")
        FileHandle.standardError.write(Data("migrate-store: error: \(oneLine)\n".utf8))
        if let store = error as? StoreError, badInput.contains(store.code) { return ExitCode(2) }
        return ExitCode(3)
    }

    static func catching<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch {
            throw exit(for: error)
        }
    }
}
