@_spi(Backend) import DataStoreAPI
import Foundation
import StoreMigration
import Synchronization

/// `crash-writer switch OLD NEW SEED [die-at STEP] [pace N] [gap MS] [then cancel|rollback] [finish verify]`: an app that switches its store
/// from OLD to NEW (store locations) while it writes and reads without pause, for the crash
/// tests of ``SwitchingStore``.
///
/// Each transaction `n` inserts ``entriesPerTransaction`` entries of batch `n` and adds as
/// many to the counter `items` (read, then written: a transaction applied twice would show), and
/// sets the counter `txn` to `n`; the app prints `ack n` once `writeSync` returned. Before the
/// switching store, an app that has no store yet (or whose in-memory store ended with its
/// process) fills a plain one with `SEED` entries, 500 per transaction, so that the copy has
/// work; through the switching store each transaction writes 10. After each write it reads the two counters in one snapshot and prints
/// `read ITEMS`, and fails (`TIME TRAVEL`, exit 1) when they went back. It goes on from the `txn`
/// an earlier run left, prints `phase P` whenever the switch's phase changes, `switched PAUSE_US`
/// after the cutover, writes 20 more transactions and ends with `done`.
///
/// With `die-at STEP`, the process kills itself with SIGKILL at that step of the cutover (see
/// ``SwitchingStore/stepHook``); with `pace N` the copy goes at N items per second; `gap MS`
/// is the pause between two transactions before the cutover (1 ms by default). With `then
/// cancel` the app cancels the switch after 50 transactions (if its cutover has not happened);
/// with `then rollback` it rolls the switch back 10 transactions after the cutover. With
/// `finish verify`, once switched it compares the kept old store with the new one
/// (``SwitchingStore/verifyOldStore()``), prints `verified D differences, N items`, and drops
/// the old store when they are equal.
enum SwitchFixture {
    static let entriesPerTransaction = 10
    /// The switching store, for the step hook.
    static let running = Mutex<SwitchingStore?>(nil)

    static func microseconds(_ duration: Duration) -> Int {
        Int(duration.components.seconds) * 1_000_000 + Int(duration.components.attoseconds / 1_000_000_000_000)
    }

    static func main(_ arguments: [String]) -> Int32 {
        guard arguments.count >= 5, let old = try? StoreLocation(parsing: arguments[2]),
            let new = try? StoreLocation(parsing: arguments[3]), let seed = Int(arguments[4])
        else {
            FileHandle.standardError.write(Data("usage: crash-writer switch OLD NEW SEED [die-at STEP] [pace N]\n".utf8))
            return 2
        }
        var pace = SwitchingStore.Policy.Pace.unlimited
        if ProcessInfo.processInfo.environment["TRACE"] != nil {
            SwitchingStore.stepHook.withLock { $0 = { step in say("step \(step) \(Date().timeIntervalSince1970)") } }
        }
        var gap: UInt32 = 1_000
        var then = ""
        var verifies = false
        var index = 5
        while index + 1 < arguments.count {
            let value = arguments[index + 1]
            switch arguments[index] {
            case "die-at":
                SwitchingStore.stepHook.withLock { hook in
                    hook = { step in
                        guard step == value else { return }
                        // Past the release, the cutover's pause is known: report it first.
                        if let pause = running.withLock({ $0 })?.progress.lastPause { say("switched \(microseconds(pause))") }
                        kill(getpid(), SIGKILL)
                    }
                }
            case "pace":
                pace = .itemsPerSecond((try? PositiveInt(Int(value) ?? 1_000)) ?? 1_000)
            case "then":
                then = value
            case "finish":
                verifies = value == "verify"
            case "gap":
                gap = UInt32(value).map { $0 * 1_000 } ?? gap
            default:
                break
            }
            index += 2
        }
        do {
            if !old.exists && (!new.exists || old.kind == .memory) {
                // The app before the switch: its store holds SEED entries.
                let plain = try old.open(schema: schema)
                var n: Int64 = 0
                while Int(try plain.read { try counter($0, "items") }) < seed {
                    n += 1
                    try write(n, size: 500, into: plain)
                }
                try plain.close()
            }
            let store = try SwitchingStore(from: old, to: new, schema: schema,
                                           policy: SwitchingStore.Policy(pace: pace, batchSize: 500))
            running.withLock { $0 = store }
            say("phase \(store.phase.rawValue)")
            var (transaction, lastRead) = try store.read { reader in
                (try counter(reader, "txn"), try counter(reader, "items"))
            }
            var phase = store.phase
            var after = 0
            let start = transaction
            while after < 20 {
                transaction += 1
                let n = transaction
                try write(n, size: entriesPerTransaction, into: store)
                say("ack \(n)")
                let items = try store.read { try counter($0, "items") }
                guard items >= lastRead else {
                    say("TIME TRAVEL read \(items) after \(lastRead)")
                    return 1
                }
                lastRead = items
                say("read \(items)")
                if store.phase != phase {
                    phase = store.phase
                    say("phase \(phase.rawValue)")
                    if phase == .switched {
                        say("switched \(store.progress.lastPause.map(microseconds) ?? -1)")
                    }
                }
                if then == "cancel" && n == start + 50 && (phase == .copying || phase == .following) {
                    try store.cancel()
                    phase = store.phase
                    say("phase \(phase.rawValue)")
                }
                if then == "rollback" && phase == .switched && after == 10 {
                    try store.rollBack()
                    phase = store.phase
                    say("phase \(phase.rawValue)")
                }
                if [.switched, .cancelled, .rolledBack].contains(phase) { after += 1 } else { usleep(gap) }
                if n % 100 == 0 { say("lag \(store.progress.lagTransactions)") }
            }
            if verifies && store.progress.phase == .switched {
                do {
                    let report = try store.verifyOldStore()
                    say("verified \(report.differences) differences, \(report.entities.map(\.itemsVerified).reduce(0, +)) items")
                    if report.differences == 0 { try store.dropOldStore() }
                } catch let error as StoreError where error.code == .invalidArgument {
                    say("not verified: \(error.message)")
                }
            }
            try store.close()
            say("done")
            return 0
        } catch {
            say("error \(error)")
            return 1
        }
    }

    /// Transaction `n`: `size` entries of batch `n`, the counters moved.
    static func write(_ n: Int64, size: Int, into store: any DataStore) throws {
        try store.writeSync { writer in
            let items = try counter(writer, "items")
            for i in 0..<size {
                try writer.insert(["id": .int(n * 1_000 + Int64(i)), "batch": .int(n), "text": .string("t\(n)")],
                                  into: "Entry")
            }
            try writer.save(["name": .string("items"), "value": .int(items + Int64(size))], into: "Counter")
            try writer.save(["name": .string("txn"), "value": .int(n)], into: "Counter")
        }
    }

    /// One line on standard output, written at once (the test reads it while the process runs).
    static func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

    static func counter(_ reader: ReadAccessor, _ name: String) throws -> Int64 {
        if case .int(let n)? = try reader.get("Counter", key: .string(name))?["value"] { return n }
        return 0
    }
}
