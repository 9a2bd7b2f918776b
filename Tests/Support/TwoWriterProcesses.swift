import DataStoreAPI
import Foundation
import Synchronization
import Testing

/// A `crash-writer` process whose acknowledged batch numbers are collected as it prints them.
final class WriterProcess: @unchecked Sendable {
    let process = Process()
    let acknowledged = Mutex<[Int]>([])
    private let done = DispatchSemaphore(value: 0)

    init(kind: String, path: String, commits: Int, withReader: Bool = false) throws {
        process.executableURL = CrashRecovery.tool
        process.arguments = [kind, path, String(commits)] + (withReader ? ["with-reader"] : [])
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let handle = pipe.fileHandleForReading
        Thread.detachNewThread { [self] in
            var lines = NumberLines()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                let numbers = lines.numbers(in: chunk)
                acknowledged.withLock { $0.append(contentsOf: numbers) }
            }
            done.signal()
        }
    }

    var count: Int { acknowledged.withLock { $0.count } }

    /// Whether each of two writers acknowledged a commit after the other's first one.
    static func interleaved(_ a: WriterProcess, _ b: WriterProcess) -> Bool {
        let (ackA, ackB) = (a.acknowledged.withLock { $0 }, b.acknowledged.withLock { $0 })
        guard let aFirst = ackA.min(), let aLast = ackA.max(), let bFirst = ackB.min(), let bLast = ackB.max() else {
            return false
        }
        return bFirst < aLast && aFirst < bLast
    }

    func kill() {
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        done.wait()
    }
}

/// Two writer processes commit to one PostgreSQL store at once, each transaction taking the
/// next batch number from a counter in the store; one is SIGKILLed mid-stream, then the other.
/// Every acknowledged commit of either is there, no batch number was given twice, no write is
/// lost (the batches are exactly 1...counter), and a reader in this process never sees a
/// partial transaction (entries always equal ten per committed batch).
extension CrashRecovery {
    /// Two writer processes commit to one store at once, each transaction taking the next batch
    /// number from a counter in the store; one is SIGKILLed mid-stream, then the other. Every
    /// acknowledged commit of either is there, no batch number was given twice, no write is lost
    /// (the batches are exactly 1...counter), and a reader in this process never sees a partial
    /// transaction (entries always equal ten per committed batch). Returns a summary line.
    public static func twoWriterProcesses(kind: String, path: String, open: () throws -> any DataStore) throws -> String {
        // The first writer creates the store, alone.
        let first = try WriterProcess(kind: kind, path: path, commits: 1)
        first.process.waitUntilExit()
        #expect(first.process.terminationStatus == 0)
        // Each writer process also reads on a thread of its own, as an app does: on LMDB such a
        // reader holds off a map growth while the other process's writer goes ahead.
        let a = try WriterProcess(kind: kind, path: path, commits: 1_000_000, withReader: true)
        let b = try WriterProcess(kind: kind, path: path, commits: 1_000_000, withReader: true)
        let store = try open()
        defer { try? store.close() }
        var snapshots = 0
        var partial: [String] = []
        let deadline = Date().addingTimeInterval(120)
        // Until each has 150 acknowledged commits and each committed after the other's first. That
        // they interleave is a state waited for, not a count: SQLite's busy handler polls, and the
        // write lock is free only between one transaction and the next and while a checkpoint
        // runs, so a writer that takes it back at once can hold the other off for a hundred
        // commits or more (1 run in 32 ended with a at 171 and b at 262, b's first after a's
        // last: a got no commit in while b made about 150). A writer that exited (SQLite gives
        // up with `busy` after 5 s) ends the wait at once; the expectations below then fail.
        while !(a.count >= 150 && b.count >= 150 && WriterProcess.interleaved(a, b))
            && a.process.isRunning && b.process.isRunning && Date() < deadline {
            let (entries, items) = try store.read { r -> (Int, Int64) in
                let items: Int64
                if case .int(let n)? = try r.get("Counter", key: "items")?["value"] { items = n } else { items = 0 }
                return (try r.count(FetchRequest("Entry")), items)
            }
            snapshots += 1
            if Int64(entries) != items { partial.append("\(entries) entries, counter \(items)") }
        }
        a.kill()
        let bAtKill = b.count
        while b.count < bAtKill + 100 && b.process.isRunning && Date() < deadline { usleep(10_000) }
        b.kill()
        #expect(partial.isEmpty, "partial transactions seen: \(partial.prefix(5))")
        let ackA = a.acknowledged.withLock { $0 }
        let ackB = b.acknowledged.withLock { $0 }
        #expect(ackA.count >= 150 && ackB.count >= 150, "a \(ackA.count), b \(ackB.count)")
        #expect(Set(ackA).isDisjoint(with: ackB), "a batch number was given to both writers")
        // They ran at once: each committed after the other's first commit.
        #expect(WriterProcess.interleaved(a, b), "a \(ackA.min() ?? 0)...\(ackA.max() ?? 0), b \(ackB.min() ?? 0)...\(ackB.max() ?? 0)")
        func totals() throws -> (committed: Int, batches: Int, entries: Int) {
            try store.read { r -> (Int, Int, Int) in
                guard case .int(let n)? = try r.get("Counter", key: "committed")?["value"] else { return (0, 0, 0) }
                let rows = try r.fetch(FetchRequest("Entry"))
                return (Int(n), Set(rows.map(\.["batch"])).count, rows.count)
            }
        }
        // A killed PostgreSQL client's server backend runs what it had already received (its last
        // entry and COMMIT) a moment after the process is gone: the totals and the feed are read
        // again until the totals are the same before and after the feed's read.
        var (committed, batches, entries) = try totals()
        var feed = try store.changes(since: ChangeToken(store: nil, sequence: 0), limit: 100_000)
        let settled = Date().addingTimeInterval(30)
        while Date() < settled {
            let after = try totals()
            if after == (committed, batches, entries) { break }
            (committed, batches, entries) = after
            feed = try store.changes(since: ChangeToken(store: nil, sequence: 0), limit: 100_000)
        }
        #expect(entries == committed * 10, "\(entries) entries for \(committed) commits")
        #expect(batches == committed, "every batch 1...\(committed) is there")
        #expect((ackA + ackB + first.acknowledged.withLock { $0 }).allSatisfy { $0 <= committed },
                "an acknowledged commit is missing")
        #expect(snapshots > 10)
        // The change feed lists every committed transaction once, numbered densely in commit
        // order, each with its batch's ten entries: a writer that took the feed's state from its
        // own last commit without noticing the other process's would reuse a number (and
        // overwrite or fail on the other's entry).
        #expect(feed.map(\.sequence) == Array(1...UInt64(max(committed, 1))).prefix(feed.count).map { $0 },
                "feed sequence numbers are not dense from 1")
        #expect(feed.count == committed, "\(feed.count) feed entries for \(committed) commits")
        let batchesInFeed = feed.map { set in
            Set(set.items.filter { $0.entity == "Entry" }.compactMap { item -> Int64? in
                guard case .int(let id) = item.key else { return nil }
                return id / 10
            })
        }
        #expect(batchesInFeed.allSatisfy { $0.count == 1 }, "a feed entry mixes or lacks batches")
        // What an entry too many would be: a batch listed twice, or one past the counter.
        let listed = batchesInFeed.flatMap { $0 }
        let twice = Dictionary(grouping: listed, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
        #expect(twice.isEmpty, "batches listed twice in the feed: \(twice.prefix(5))")
        let past = listed.filter { $0 > Int64(committed) }.sorted()
        #expect(past.isEmpty, "batches past the counter (\(committed)) in the feed: \(past.prefix(5))")
        let missing = Set(1...Int64(max(committed, 1))).subtracting(batchesInFeed.flatMap { $0 }).sorted()
        #expect(missing.isEmpty, "\(missing.count) batches of 1...\(committed) missing from the feed: \(missing.prefix(5))")
        return "two \(kind) writer processes: a \(ackA.count), b \(ackB.count) acknowledged commits, store at "
            + "\(committed); \(snapshots) snapshots read, none partial"
    }
}
