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
    /// that fails is cleaned up and tried again on other ports, three times at most.
    init(dir: String, synchronous: Bool = true) throws {
        self.dir = dir
        for attempt in 1...3 {
            primaryPort = Int.random(in: 30_000..<40_000)
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
