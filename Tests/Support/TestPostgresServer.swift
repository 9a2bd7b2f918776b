import Foundation

/// The PostgreSQL server the tests use: the one `DATASTORE_TEST_PGHOST` names when it is set,
/// else a throwaway server that `Scripts/postgres-server.sh` starts at first use (installing
/// PostgreSQL 15 when it is missing) and stops when the test process exits. `host` is its
/// socket directory.
public enum TestPostgresServer {
    public static let host: String = {
        if let host = ProcessInfo.processInfo.environment["DATASTORE_TEST_PGHOST"] { return host }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("datastore-pg-\(getpid())").path
        // system(3), not Process: Foundation's waitUntilExit can miss the end of a script whose
        // child (the server) lives on.
        let status = system("/bin/bash '\(script)' start '\(dir)' >/dev/null")
        precondition(status == 0, "the test PostgreSQL server did not start (\(script) start \(dir))")
        stopDirectory = dir
        atexit {
            guard let dir = TestPostgresServer.stopDirectory else { return }
            _ = system("/bin/bash '\(TestPostgresServer.script)' stop '\(dir)'")
        }
        return dir
    }()

    nonisolated(unsafe) static var stopDirectory: String?

    public static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Scripts/postgres-server.sh").path
    }
}
