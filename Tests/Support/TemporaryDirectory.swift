import Foundation

/// A temporary directory for one test, removed when released.
public final class TemporaryDirectory {
    public let url: URL

    public init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("datastore-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// A path inside the directory.
    public func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// Runs a command and returns its standard output and error.
/// - Throws: when the command cannot start, or exits non-zero unless `allowingFailure`.
public func runCommand(_ executable: String, _ arguments: [String], allowingFailure: Bool = false) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let output = String(decoding: data, as: UTF8.self)
    guard process.terminationStatus == 0 || allowingFailure else {
        throw CommandFailed(command: ([executable] + arguments).joined(separator: " "), status: process.terminationStatus,
                            output: output)
    }
    return output
}

/// A command that exited non-zero.
public struct CommandFailed: Error, CustomStringConvertible {
    public let command: String
    public let status: Int32
    public let output: String
    public var description: String { "\(command) exited \(status): \(output)" }
}

/// Whether the run leaves out the slow tests (`Scripts/test.sh --quick` sets
/// `DATASTORE_QUICK=1`): the damaged-store corpus, the SIGKILL loops, the cross-process and
/// PostgreSQL tests. The plain test command runs everything.
public let runsSlowTests = ProcessInfo.processInfo.environment["DATASTORE_QUICK"] == nil

/// Whether the run takes the longer draws of the tests that have one (`DATASTORE_THOROUGH=1`,
/// which Scripts/release-check.sh sets): every combination of a SIGKILL test's backends and
/// moments rather than a few of them. The test command runs each such test on its shorter draw.
public let runsThoroughTests = ProcessInfo.processInfo.environment["DATASTORE_THOROUGH"] == "1"

/// Whether the tests that measure scheduling delays run: `Scripts/test.sh` runs them in a step
/// of their own after the others (`DATASTORE_TIMING_TESTS=1`), so that no other test's work
/// shares the cores with what they measure.
public let runsTimingTests = ProcessInfo.processInfo.environment["DATASTORE_TIMING_TESTS"] == "1"
