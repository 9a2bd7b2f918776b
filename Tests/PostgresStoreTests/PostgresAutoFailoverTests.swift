#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
@_spi(Backend) import PostgresStore
import Synchronization
import Testing

/// A pg_auto_failover formation of its own (`Scripts/postgres-auto-failover.sh`): a monitor
/// and two nodes on loopback, stopped when the value is released.
private final class Formation {
    let dir: String
    private(set) var ports = (monitor: 0, node1: 0, node2: 0)

    init(dir: String) throws {
        self.dir = dir
        var lastError: (any Error)?
        for _ in 1...3 {
            let base = Int.random(in: 20_000..<30_000)
            ports = (base, base + 1, base + 2)
            do {
                try run("start", "\(base) \(base + 1) \(base + 2)")
                return
            } catch {
                lastError = error
                _ = system("/bin/bash '\(Self.script)' stop '\(dir)' >/dev/null 2>&1")
            }
        }
        throw lastError ?? StoreError(.io, "the formation did not start")
    }

    /// Runs a command of the script; returns what it printed.
    @discardableResult
    func run(_ command: String, _ extra: String = "") throws -> String {
        let output = dir + ".out"
        let status = system("/bin/bash '\(Self.script)' \(command) '\(dir)' \(extra) >'\(output)'")
        let printed = (try? String(contentsOfFile: output, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        guard status == 0 else { throw StoreError(.io, "postgres-auto-failover.sh \(command) failed") }
        return printed
    }

    /// The formation's multi-host URI, as `pg_autoctl show uri` gives it, with the store's
    /// parameters: writes go to the node that accepts them, reads to both nodes as standbys.
    func url(schema: String) -> String {
        "postgres://postgres@127.0.0.1:\(ports.node1),127.0.0.1:\(ports.node2)/datastore?schema=\(schema)"
            + "&target_session_attrs=read-write&connect_timeout=2"
            + "&read_hosts=127.0.0.1:\(ports.node1),127.0.0.1:\(ports.node2)"
    }

    static var script: String {
        URL(fileURLWithPath: PostgresTestServer.script).deletingLastPathComponent()
            .appendingPathComponent("postgres-auto-failover.sh").path
    }

    deinit { _ = system("/bin/bash '\(Self.script)' stop '\(dir)' >/dev/null 2>&1") }
}

/// What the writers and readers of one round saw.
private struct Round {
    var acknowledged: Set<Int64> = []
    var writeFailures: [StoreError.Code: Int] = [:]
    var readFailures: [StoreError.Code: Int] = [:]
    var lastWriteFailure: ContinuousClock.Instant?
    var lastReadFailure: ContinuousClock.Instant?
    var firstReadFailure: String?
    /// Failures that are not the store's errors (none expected).
    var otherReadFailures: [String] = []
}

/// Failover done by pg_auto_failover, three times on one formation and one open store: 8 writer
/// threads insert without pause and 4 readers read on the standbys (read-your-writes on) while
/// the primary node (its keeper and every process of its server) is killed at a seeded moment;
/// the monitor promotes the other node, and the killed one rejoins as its standby before the
/// next round. Every acknowledged insert is on the new primary, an observer following the change
/// feed sees every stored item once, and writes and reads both work again within 5 s of the
/// new primary taking writes.
// (Each kill waits for 6 s of a steady primary and secondary: pg_auto_failover promotes no node
// it has taken for catching up.) A failure prints the monitor's last decisions.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func pgAutoFailoverFailsOverUnderWritersAndReadersAndLosesNoAcknowledgedCommit() throws {
    let directory = try TemporaryDirectory()
    try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory.url.path)
    let formation = try Formation(dir: directory.path("formation"))
    let schema = Schema(entities: [EntitySchema("Event", primaryKey: "id",
                                                attributes: [Attribute("id", .int), Attribute("note", .string)])])
    let url = formation.url(schema: "autofailover")
    let store = try PostgresStore(url: url, schema: schema)
    let observed = try PostgresStore(url: url, schema: nil)
    defer {
        try? store.close()
        try? observed.close()
    }
    let seen = Mutex<[Int64]>([])
    let token = Mutex(try observed.currentChangeToken())
    /// One page of the feed after the observer's token; false when there was none.
    @Sendable func follow() throws -> Bool {
        let sets = try observed.changes(since: token.withLock { $0 }, limit: 500)
        for set in sets {
            seen.withLock { seen in
                seen += set.items.compactMap { change -> Int64? in
                    if case .int(let id) = change.key, change.kind == .inserted { return id }
                    return nil
                }
            }
            token.withLock { $0 = set.token }
        }
        return !sets.isEmpty
    }
    var acknowledged: Set<Int64> = []
    for (round, killAfter) in zip(1...3, [0.6, 1.1, 0.8]) {
        let stop = Atomic<Bool>(false)
        let state = Mutex(Round())
        let clock = ContinuousClock()
        let writers = (0..<8).map { index in Thread {
            var next = Int64(round) * 100_000_000 + Int64(index) * 1_000_000 + 1
            while !stop.load(ordering: .relaxed) {
                let id = next
                next += 1
                do {
                    try store.writeSync { try $0.insert(["id": .int(id), "note": "event \(id)"], into: "Event") }
                    state.withLock { _ = $0.acknowledged.insert(id) }
                } catch let error as StoreError {
                    state.withLock { state in
                        state.writeFailures[error.code, default: 0] += 1
                        state.lastWriteFailure = clock.now
                    }
                    usleep(20_000)
                } catch {
                    state.withLock { $0.writeFailures[.io, default: 0] += 1 }
                }
            }
        } }
        let readers = (0..<4).map { _ in Thread {
            while !stop.load(ordering: .relaxed) {
                do {
                    _ = try store.read { try $0.count(FetchRequest("Event")) }
                } catch let error as StoreError {
                    state.withLock { state in
                        state.readFailures[error.code, default: 0] += 1
                        state.lastReadFailure = clock.now
                        if state.firstReadFailure == nil { state.firstReadFailure = error.message }
                    }
                    usleep(20_000)
                } catch {
                    state.withLock { $0.otherReadFailures.append("\(error)") }
                }
            }
        } }
        let observer = Thread {
            while !stop.load(ordering: .relaxed) {
                if (try? follow()) != true { usleep(20_000) }
            }
        }
        let servedBefore = store.readsServed
        for thread in writers + readers + [observer] { thread.start() }
        usleep(UInt32(killAfter * 1_000_000))
        // The kill waits, under the load, for a formation that can fail over (primary and
        // secondary): pg_auto_failover promotes no node it has taken for catching up.
        try formation.run("wait-healthy")
        let killed = try formation.run("kill-primary")
        try formation.run("wait-failover", killed)
        let failedOver = clock.now
        // Writes and reads go on for a while on the new primary.
        usleep(5_000_000)
        stop.store(true, ordering: .relaxed)
        while (writers + readers + [observer]).contains(where: { !$0.isFinished }) { usleep(10_000) }
        let result = state.withLock { $0 }
        acknowledged.formUnion(result.acknowledged)

        let stored = Set(try store.read(on: .primary) { try $0.fetch(FetchRequest("Event")) }.compactMap { record -> Int64? in
            if case .int(let id) = record["id"] { return id }
            return nil
        })
        let lost = acknowledged.subtracting(stored)
        #expect(lost.isEmpty, "round \(round): acknowledged but lost: \(lost.sorted().prefix(10))")
        while try follow() {}
        let delivered = seen.withLock { $0 }
        #expect(Set(delivered).count == delivered.count, "round \(round): the observer saw an item twice")
        let missed = stored.subtracting(delivered).sorted().prefix(10)
        let extra = Set(delivered).subtracting(stored).sorted().prefix(10)
        #expect(missed.isEmpty && extra.isEmpty, "round \(round): the observer missed \(missed), saw \(extra) unstored")
        #expect(Set(result.writeFailures.keys).isSubset(of: [.unavailable, .io]), "round \(round): \(result.writeFailures)")
        #expect(Set(result.readFailures.keys).isSubset(of: [.unavailable, .io]), "round \(round): \(result.readFailures)")
        #expect(result.otherReadFailures.isEmpty, "round \(round): \(result.otherReadFailures.prefix(3))")
        #expect(store.readsServed.standbys > servedBefore.standbys, "round \(round): no read went to a standby")
        let writesBack = result.lastWriteFailure.map { $0 - failedOver } ?? .zero
        let readsBack = result.lastReadFailure.map { $0 - failedOver } ?? .zero
        #expect(writesBack < .seconds(5), "round \(round): writes failed until \(writesBack) after the failover")
        #expect(readsBack < .seconds(5), "round \(round): reads failed until \(readsBack) after the failover")
        print("pg_auto_failover round \(round): killed the primary on port \(killed) after \(killAfter) s; "
            + "\(result.acknowledged.count) inserts acknowledged, all stored; "
            + "\(result.writeFailures.values.reduce(0, +)) failed writes, last \(writesBack) after the new primary took writes; "
            + "\(result.readFailures.values.reduce(0, +)) failed reads, last \(readsBack) after "
            + "(the first: \(result.firstReadFailure ?? "none")); "
            + "observer saw \(delivered.count) items, none twice")
        // (The killed node rejoins for the next round; after the last, the formation stops.)
        if round < 3 { try formation.run("rejoin", killed) }
    }
    withExtendedLifetime(formation) {}
}
#endif
