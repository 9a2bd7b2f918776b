import DataStoreAPI
import Foundation
import StoreMigration

/// `crash-writer switch-bench OLD NEW ITEMS [gap MS]`: what a switch costs the app that keeps
/// writing through it, measured. Fills OLD with ITEMS entries, then:
///
/// 1. writes one small transaction (10 entries and the counters) every `gap` ms (2 by default)
///    for 3 s through a plain store, timing each `writeSync`: the write latency without a copy;
/// 2. opens a switching store from OLD to NEW and writes the same way until 1 s after the
///    cutover, timing each write and noting whether the copy, the follow or the cutover ran;
///
/// then prints `baseline`, `copy` (writes while the copy and follow ran) and `cutover` (the
/// writes that waited for it) lines with p50, p99 and max in microseconds, the cutover's
/// `pause` as the store measured it, and the copy's `pace` in items per second.
enum SwitchBench {
    static func main(_ arguments: [String]) -> Int32 {
        guard arguments.count >= 5, let old = try? StoreLocation(parsing: arguments[2]),
            let new = try? StoreLocation(parsing: arguments[3]), let items = Int(arguments[4])
        else {
            FileHandle.standardError.write(Data("usage: crash-writer switch-bench OLD NEW ITEMS [gap MS]\n".utf8))
            return 2
        }
        let gap = arguments.count >= 7 && arguments[5] == "gap" ? UInt32(arguments[6]).map { $0 * 1_000 } ?? 2_000 : 2_000
        do {
            let plain = try old.open(schema: schema)
            var n: Int64 = 0
            while Int(try plain.read { try SwitchFixture.counter($0, "items") }) < items {
                n += 1
                try plain.writeSync { writer in
                    for i in 0..<10_000 {
                        try writer.insert(["id": .int(-1 - n * 100_000 - Int64(i)), "batch": .int(-n), "text": .string("seed \(i)")],
                                          into: "Entry")
                    }
                    try writer.save(["name": .string("items"), "value": .int(n * 10_000)], into: "Counter")
                    try writer.save(["name": .string("txn"), "value": .int(n)], into: "Counter")
                }
            }
            var baseline: [Double] = []
            let baselineEnd = Date(timeIntervalSinceNow: 3)
            var next = n * 100
            while Date() < baselineEnd {
                next += 1
                baseline.append(try timed { try SwitchFixture.write(next, size: 10, into: plain) })
                usleep(gap)
            }
            try plain.close()

            let opened = Date()
            let store = try SwitchingStore(from: old, to: new, schema: schema)
            var duringCopy: [Double] = []
            var atCutover: [Double] = []
            var copied: Double?
            var switchedAt: Date?
            while switchedAt.map({ Date().timeIntervalSince($0) < 1 }) ?? true {
                next += 1
                let before = store.phase
                let took = try timed { try SwitchFixture.write(next, size: 10, into: store) }
                let after = store.phase
                if before != .switched && after == .switched {
                    // This write waited for the cutover.
                    atCutover.append(took)
                } else if after != .switched {
                    duringCopy.append(took)
                }
                if after == .switched && switchedAt == nil { switchedAt = Date() }
                if copied == nil && after != .copying { copied = Date().timeIntervalSince(opened) }
                if let failure = store.progress.failure {
                    SwitchFixture.say("error the switch stopped: \(failure)")
                    return 1
                }
                usleep(gap)
            }
            let pause = store.progress.lastPause.map { Double($0.components.seconds) * 1e6
                + Double($0.components.attoseconds) / 1e12 } ?? -1
            let verify = try store.verifyOldStore()
            try store.close()
            SwitchFixture.say("baseline " + summary(baseline))
            SwitchFixture.say("copy " + summary(duringCopy))
            SwitchFixture.say("cutover " + summary(atCutover))
            SwitchFixture.say("pause \(Int(pause))")
            SwitchFixture.say("pace \(Int(Double(items) / (copied ?? 1))) items/s (\(items) items in "
                + String(format: "%.2f", copied ?? 0) + " s)")
            SwitchFixture.say("verified \(verify.differences) differences")
            return 0
        } catch {
            SwitchFixture.say("error \(error)")
            return 1
        }
    }

    /// How long `body` took, in microseconds.
    static func timed(_ body: () throws -> Void) rethrows -> Double {
        let start = ContinuousClock.now
        try body()
        let took = ContinuousClock.now - start
        return Double(took.components.seconds) * 1e6 + Double(took.components.attoseconds) / 1e12
    }

    /// `n=COUNT p50=… p99=… max=…` in microseconds.
    static func summary(_ samples: [Double]) -> String {
        guard !samples.isEmpty else { return "n=0" }
        let sorted = samples.sorted()
        func at(_ q: Double) -> Int { Int(sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))]) }
        return "n=\(sorted.count) p50=\(at(0.5)) p99=\(at(0.99)) max=\(Int(sorted.last!))"
    }
}
