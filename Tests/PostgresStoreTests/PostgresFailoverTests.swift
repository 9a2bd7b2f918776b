#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
import PostgresStore
import Synchronization
import Testing

/// What one failover run saw.
private struct FailoverRun {
    var acknowledged: Set<Int64> = []
    var failures: [StoreError.Code: Int] = [:]
    var resumedAfterPromotion: Duration?
}

/// Failover to a promoted standby, ten times with seeded kill times: an app's 16 writer threads
/// write without pause on one store (its writer pool) through a two-host URL (`target_session_attrs=read-write`); the primary is killed with
/// SIGKILL (every process of it at once) at a random moment, and the standby promoted. Every
/// acknowledged transaction is on the new primary (replication is synchronous, `Durability.full`
/// waits for the standby's flush); writes fail with `unavailable` (or `io` for a commit whose
/// outcome the lost connection hid) while no primary is reachable, and resume within 2 s of the
/// promotion without reopening the store; an observer following the change feed from its token
/// sees every committed item once: no gap, no duplicate.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func theStoreFollowsAFailoverToThePromotedStandbyAndLosesNoAcknowledgedCommit() throws {
    let schema = Schema(entities: [EntitySchema("Event", primaryKey: "id",
                                                attributes: [Attribute("id", .int), Attribute("note", .string)])])
    // Seeded kill times: 0.3 s to 1.2 s after the writes start.
    let killTimes = (1...10).map { round in 0.3 + Double((round * 7_919) % 10) / 10 }
    for (round, killAfter) in zip(1..., killTimes) {
        let dir = try TemporaryDirectory()
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: dir.url.path)
        let servers = try ReplicatedServers(dir: dir.path("servers"))
        let url = servers.url(schema: "failover")
        let store = try PostgresStore(url: url, schema: schema, durability: .full)
        let observed = try PostgresStore(url: url, schema: nil)

        let stop = Atomic<Bool>(false)
        let promotedAt = Mutex<ContinuousClock.Instant?>(nil)
        let run = Mutex(FailoverRun())
        let clock = ContinuousClock()
        let writers = (0..<16).map { index in Thread {
            var next = Int64(index) * 1_000_000 + 1
            while !stop.load(ordering: .relaxed) {
                let id = next
                next += 1
                do {
                    try store.writeSync { try $0.insert(["id": .int(id), "note": "event \(id)"], into: "Event") }
                    let now = clock.now
                    run.withLock { run in
                        run.acknowledged.insert(id)
                        if run.resumedAfterPromotion == nil, let promoted = promotedAt.withLock({ $0 }) {
                            run.resumedAfterPromotion = now - promoted
                        }
                    }
                } catch let error as StoreError {
                    run.withLock { $0.failures[error.code, default: 0] += 1 }
                    usleep(20_000)
                } catch {
                    run.withLock { $0.failures[.io, default: 0] += 1 }
                }
            }
        } }
        // The observer follows the feed page by page from its token, and retries from the same
        // token when a read fails.
        let seen = Mutex<[Int64]>([])
        let startToken = try observed.currentChangeToken()
        let token = Mutex<ChangeToken?>(startToken)
        // What each page gave (its start, and the sequence numbers of its sets), the failed
        // reads and the failover's steps, in order, for a round that misses an entry.
        let pages = Mutex<[(last: UInt64?, line: String)]>([])
        /// One page after the observer's token; false when there was none.
        @Sendable func follow() throws -> Bool {
            guard let from = token.withLock({ $0 }) else { return false }
            let sets = try observed.changes(since: from, limit: 500)
            if let first = sets.first, let last = sets.last {
                let line = "\(clock.now): after \(from.sequence), \(sets.count) entries \(first.token.sequence)...\(last.token.sequence)"
                pages.withLock { $0.append((last.token.sequence, line)) }
            }
            for set in sets {
                let ids = set.items.compactMap { change -> Int64? in
                    if case .int(let id) = change.key, change.kind == .inserted { return id }
                    return nil
                }
                seen.withLock { $0 += ids }
                token.withLock { $0 = set.token }
            }
            return !sets.isEmpty
        }
        let observer = Thread {
            while !stop.load(ordering: .relaxed) {
                do {
                    if try !follow() { usleep(10_000) }
                } catch {
                    pages.withLock { $0.append((nil, "\(clock.now): the read failed: \(error)")) }
                    usleep(50_000)
                }
            }
        }
        for writer in writers { writer.start() }
        observer.start()
        usleep(UInt32(killAfter * 1_000_000))
        pages.withLock { $0.append((nil, "\(clock.now): killing the primary")) }
        try servers.run("kill-primary")
        pages.withLock { $0.append((nil, "\(clock.now): killed")) }
        usleep(300_000)
        try servers.run("promote")
        pages.withLock { $0.append((nil, "\(clock.now): promoted")) }
        promotedAt.withLock { $0 = clock.now }
        // Writes go on for a while on the new primary.
        let deadline = clock.now + .seconds(3)
        while clock.now < deadline, run.withLock({ $0.resumedAfterPromotion }) == nil { usleep(20_000) }
        usleep(500_000)
        stop.store(true, ordering: .relaxed)
        while writers.contains(where: \.isExecuting) || observer.isExecuting { usleep(10_000) }

        let result = run.withLock { $0 }
        let stored = Set(try store.read { try $0.fetch(FetchRequest("Event")) }.compactMap { record -> Int64? in
            if case .int(let id) = record["id"] { return id }
            return nil
        })
        // The observer catches up from its token with what the store holds now.
        while try follow() {}
        let missingAcknowledged = result.acknowledged.subtracting(stored)
        #expect(missingAcknowledged.isEmpty, "round \(round): acknowledged but lost: \(missingAcknowledged.sorted().prefix(10))")
        let resumed = result.resumedAfterPromotion
        #expect(resumed.map { $0 < .seconds(2) } == true, "round \(round): writes resumed \(String(describing: resumed)) after the promotion")
        let failureCodes = Set(result.failures.keys)
        #expect(failureCodes.isSubset(of: [.unavailable, .io]), "round \(round): \(result.failures)")
        let delivered = seen.withLock { $0 }
        #expect(Set(delivered).count == delivered.count, "round \(round): the observer saw an item twice")
        let missed = stored.subtracting(delivered).sorted().prefix(10)
        let extra = Set(delivered).subtracting(stored).sorted().prefix(10)
        #expect(missed.isEmpty && extra.isEmpty, "round \(round): the observer missed \(missed), saw \(extra) unstored")
        if !missed.isEmpty {
            // Where the missed items are in the feed (read again from the start), and the
            // observer's pages around them, with the failover's steps and the failed reads.
            // (Each step on its own: one that fails, a token expired, still leaves the others.)
            var entries: [UInt64] = []
            do {
                for set in try observed.changes(since: startToken, limit: 100_000) {
                    for change in set.items {
                        guard case .int(let id) = change.key, missed.contains(id) else { continue }
                        entries.append(set.token.sequence)
                        print("round \(round): item \(id) is in entry \(set.token.sequence) as \(change.kind); "
                            + "acknowledged: \(result.acknowledged.contains(id))")
                    }
                }
            } catch {
                print("round \(round): the feed could not be read again from the start: \(error)")
            }
            // Held back at the catch-up (a later page has them), or passed by the token.
            var pagesAfter = 0
            do {
                while try follow() { pagesAfter += 1 }
            } catch {
                print("round \(round): a page after the catch-up failed: \(error)")
            }
            let late = Set(seen.withLock { $0 }).intersection(missed).sorted()
            let head = (try? observed.currentChangeToken()).map { "\($0.sequence)" } ?? "unread"
            print("round \(round): the observer's token \(token.withLock { $0 }.map { "\($0.sequence)" } ?? "none"), "
                + "the feed's head \(head); \(pagesAfter) pages more, which delivered \(late) of the missed items")
            let log = pages.withLock { $0 }
            let around = log.firstIndex { line in line.last.map { last in entries.contains { $0 <= last } } ?? false } ?? log.count
            for (index, line) in log.enumerated() where line.last == nil || abs(index - around) <= 3 {
                print("round \(round): \(line.line)")
            }
        }
        print("failover round \(round): killed after \(String(format: "%.2f", killAfter)) s; "
            + "\(result.acknowledged.count) acknowledged, all on the new primary; "
            + "\(result.failures.values.reduce(0, +)) failed writes (\(result.failures.map { "\($0.key) \($0.value)" }.sorted().joined(separator: ", "))); "
            + "writes resumed \(resumed.map { "\($0)" } ?? "never") after the promotion; observer saw \(delivered.count) items, no duplicate")
        try store.close()
        try observed.close()
        withExtendedLifetime(servers) {}
    }
}
#endif
