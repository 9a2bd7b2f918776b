#if Postgres
import DataStoreAPI
import Foundation
import PostgresStore

/// A primary and a streaming standby of their own (`Scripts/postgres-replicas.sh`), synchronous
/// unless asked otherwise, stopped when the value is released.
final class ReplicatedServers {
    let dir: String
    private(set) var primaryPort = 0
    var standbyPort: Int { primaryPort + 1 }

    /// Random ports may be taken (another test's server, one still shutting down): a start
    /// that fails is cleaned up and tried again on other ports, three times at most. The ports
    /// are below Linux's range for the local ports of outgoing connections (32,768 to 60,999),
    /// where the tests' own connections to 127.0.0.1 would take them, and away from the
    /// pg_auto_failover and TLS tests' servers (20,000 to 29,999).
    init(dir: String, synchronous: Bool = true) throws {
        self.dir = dir
        for attempt in 1...3 {
            primaryPort = Int.random(in: 10_000..<20_000)
            do {
                try run("start", "\(primaryPort) \(standbyPort)" + (synchronous ? "" : " async"))
                return
            } catch {
                _ = system("/bin/bash '\(Self.script)' stop '\(dir)' >/dev/null 2>&1")
                if attempt == 3 { throw error }
            }
        }
    }

    func run(_ command: String, _ extra: String = "") throws {
        let status = system("/bin/bash '\(Self.script)' \(command) '\(dir)' \(extra) >/dev/null")
        guard status == 0 else { throw StoreError(.io, "postgres-replicas.sh \(command) failed") }
    }

    /// The two-host URL an app uses: libpq takes the host that accepts writes.
    func url(schema: String) -> String {
        "postgres://postgres@127.0.0.1:\(primaryPort),127.0.0.1:\(standbyPort)/datastore?schema=\(schema)"
            + "&target_session_attrs=read-write&connect_timeout=2"
    }

    static var script: String {
        URL(fileURLWithPath: PostgresTestServer.script).deletingLastPathComponent()
            .appendingPathComponent("postgres-replicas.sh").path
    }

    deinit { _ = system("/bin/bash '\(Self.script)' stop '\(dir)' >/dev/null 2>&1") }
}
#endif
