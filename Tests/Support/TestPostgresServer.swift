import Foundation

/// The PostgreSQL server the tests use: the one `DATASTORE_TEST_PGHOST` names when it is set,
/// else a throwaway server that `Scripts/postgres-server.sh` starts at first use (installing
/// PostgreSQL 15 when it is missing) and stops when the test process exits. `host` is its
/// socket directory.
public enum TestPostgresServer {
    public static let host: String = {
        if let host = ProcessInfo.processInfo.environment["DATASTORE_TEST_PGHOST"] { return host }
        return startForTheProcess(script: script, name: "datastore-pg", arguments: "")
    }()

    public static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Scripts/postgres-server.sh").path
    }

    /// A server of the caller's own (for a test that changes the server's settings, which would
    /// reach every other test on the shared one), stopped when the process exits; its socket
    /// directory.
    /// `settings` go to the server's command line (`-c lc_messages=de_DE.UTF-8`).
    public static func startOwn(_ name: String, settings: String = "") -> String {
        startForTheProcess(script: script, name: "datastore-pg-\(name)", arguments: "",
                           environment: settings.isEmpty ? "" : "PG_OPTIONS='\(settings)' ")
    }
}

/// A pgbouncer in transaction pooling mode in front of the test server, started by
/// `Scripts/pgbouncer.sh` at first use (installing Debian's pgbouncer when missing) and
/// stopped when the test process exits; its Unix socket directory (port 6432).
public enum TestPgBouncer {
    public static let host: String = {
        startForTheProcess(script: script, name: "datastore-pgbouncer", arguments: "'\(TestPostgresServer.host)'")
    }()

    public static var script: String {
        URL(fileURLWithPath: TestPostgresServer.script).deletingLastPathComponent().appendingPathComponent("pgbouncer.sh").path
    }
}

/// The scripts' directories to stop when the test process exits, in the order they started.
nonisolated(unsafe) private var startedDirectories: [(script: String, dir: String)] = []

/// Runs `script start DIR ARGUMENTS` for a directory of this process's own, and `script stop
/// DIR` when the process exits (the last started first); returns DIR. system(3), not Process:
/// Foundation's waitUntilExit can miss the end of a script whose child (a server) lives on.
private func startForTheProcess(script: String, name: String, arguments: String, environment: String = "") -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(getpid())").path
    let status = system("\(environment)/bin/bash '\(script)' start '\(dir)' \(arguments) >/dev/null")
    precondition(status == 0, "\(script) start \(dir) \(arguments) failed")
    if startedDirectories.isEmpty {
        atexit {
            for (script, dir) in startedDirectories.reversed() { _ = system("/bin/bash '\(script)' stop '\(dir)'") }
        }
    }
    startedDirectories.append((script, dir))
    return dir
}
