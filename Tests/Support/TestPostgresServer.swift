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

/// A pgbouncer in transaction pooling mode in front of the test server, started by
/// `Scripts/pgbouncer.sh` at first use (installing Debian's pgbouncer when missing) and
/// stopped when the test process exits; its Unix socket directory (port 6432).
public enum TestPgBouncer {
    public static let host: String = {
        let server = TestPostgresServer.host
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("datastore-pgbouncer-\(getpid())").path
        let status = system("/bin/bash '\(script)' start '\(dir)' '\(server)' >/dev/null")
        precondition(status == 0, "the test pgbouncer did not start (\(script) start \(dir) \(server))")
        stopDirectory = dir
        atexit {
            guard let dir = TestPgBouncer.stopDirectory else { return }
            _ = system("/bin/bash '\(TestPgBouncer.script)' stop '\(dir)'")
        }
        return dir
    }()

    nonisolated(unsafe) static var stopDirectory: String?

    public static var script: String {
        URL(fileURLWithPath: TestPostgresServer.script).deletingLastPathComponent().appendingPathComponent("pgbouncer.sh").path
    }
}
