#if Postgres
@_spi(Backend) import DataStoreAPI
import Foundation
import PostgresStore

/// The PostgreSQL server the tests use: the one `PGHOST` names when it is set, else a throwaway
/// server that `Scripts/postgres-server.sh` starts at first use (installing PostgreSQL 15 when
/// it is missing) and stops when the test process exits.
enum PostgresTestServer {
    static let host: String = {
        if let host = ProcessInfo.processInfo.environment["DATASTORE_TEST_PGHOST"] { return host }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("datastore-pg-\(getpid())").path
        let script = root.appendingPathComponent("Scripts/postgres-server.sh").path
        // system(3), not Process: Foundation's waitUntilExit can miss the end of a script whose
        // child (the server) lives on.
        let status = system("/bin/bash '\(script)' start '\(dir)' >/dev/null")
        precondition(status == 0, "the test PostgreSQL server did not start (\(script) start \(dir))")
        stopDirectory = dir
        atexit {
            guard let dir = PostgresTestServer.stopDirectory else { return }
            _ = system("/bin/bash '\(PostgresTestServer.script)' stop '\(dir)'")
        }
        return dir
    }()

    nonisolated(unsafe) static var stopDirectory: String?
    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Scripts/postgres-server.sh").path
    }

    /// A store location of its own for `key` (a test's temporary path): a schema named by its hash.
    static func location(_ key: String) -> PostgresLocation {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        // swiftlint:disable:next force_try
        return try! PostgresLocation(parsing: "postgres://postgres@/datastore?schema=t\(String(hash, radix: 16))&host=\(host)")
    }
}
#endif
