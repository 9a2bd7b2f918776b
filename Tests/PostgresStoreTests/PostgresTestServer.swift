#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
import PostgresStore

/// The PostgreSQL server the tests use: the one `PGHOST` names when it is set, else a throwaway
/// server that `Scripts/postgres-server.sh` starts at first use (installing PostgreSQL 15 when
/// it is missing) and stops when the test process exits.
enum PostgresTestServer {
    static var host: String { TestPostgresServer.host }
    static var script: String { TestPostgresServer.script }

    /// A store location of its own for `key` (a test's temporary path): a schema named by its hash.
    static func location(_ key: String) -> PostgresLocation {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        // swiftlint:disable:next force_try
        return try! PostgresLocation(parsing: "postgres://postgres@/datastore?schema=t\(String(hash, radix: 16))&host=\(host)")
    }

    /// Runs `sql` on the test server as the superuser, with `psql`; its rows, one per line, the
    /// values separated by `|`.
    @discardableResult
    static func psql(_ sql: String) throws -> String {
        try runCommand("/usr/bin/psql", ["-h", host, "-U", "postgres", "-d", "datastore", "-AtF", "|", "-v", "ON_ERROR_STOP=1",
                                         "-c", sql]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The same through the test pgbouncer (transaction pooling): observers `LISTEN` on the
    /// server directly, since notifications cannot pass a pooler in transaction mode.
    static func pooledLocation(_ key: String) -> PostgresLocation {
        let direct = location(key)
        // swiftlint:disable:next force_try
        return try! PostgresLocation(parsing: "postgres://postgres@/datastore?schema=\(direct.schema)"
            + "&host=\(TestPgBouncer.host)&port=6432&pooler=transaction&listen_host=\(host)&listen_port=5432")
    }
}
#endif
