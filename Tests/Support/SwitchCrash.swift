import DataStoreAPI
import DataStoreConformance
import Foundation
import StoreMigration
import Testing

/// The crash test of a switching store: `crash-writer switch` (an app that writes and reads
/// without pause while its store switches backends) killed with SIGKILL again and again, at
/// random moments and at each step of the cutover, relaunched each time, and finally run to
/// its end. Then every acknowledged transaction is in the store that serves, exactly once; no
/// read went back; and the kept old store, brought up to date, equals the new one.
public enum SwitchCrash {
    /// What one launch printed.
    public struct Run {
        public var lines: [String]
        public var status: Int32
        var firstPhase: String? { lines.first { $0.hasPrefix("phase ") }.map { String($0.dropFirst(6)) } }
        var acks: [Int64] { lines.compactMap { $0.hasPrefix("ack ") ? Int64($0.dropFirst(4)) : nil } }
        var reads: [Int64] { lines.compactMap { $0.hasPrefix("read ") ? Int64($0.dropFirst(5)) : nil } }
        /// The phase this launch was in when it ended (killed, or at its end).
        public var lastPhase: String {
            lines.last { $0.hasPrefix("phase ") }.map { String($0.dropFirst(6)) } ?? "starting"
        }
        /// The write pause of this launch's cutover, in microseconds.
        public var pause: Int? { lines.first { $0.hasPrefix("switched ") }.flatMap { Int($0.dropFirst(9)) } }
    }

    /// The cutover's steps a launch may be told to die at: `held` and `applied` come before the
    /// decisive record, the others after it.
    public static let cutoverSteps = ["held", "applied", "recorded", "released", "retired"]

    /// Runs the switch from `old` to `new` with `kills` SIGKILLs, then once to its end, and checks
    /// the outcome; returns every launch's output. `steps` are the steps to die at, one launch
    /// each, one after the other from `stepsFrom` (the middle by default); `then` is `cancel` or
    /// `rollback` for those tests.
    @discardableResult
    public static func run(old: StoreLocation, new: StoreLocation, seed: Int = 20_000, kills: Int,
                           steps: [String] = cutoverSteps, pace: Int = 4_000, gap: Int = 1, then: String? = nil,
                           stepsFrom: Int? = nil, seedOfRandomness: UInt64 = 1,
                           sourceLocation: SourceLocation = #_sourceLocation) throws -> [Run] {
        var random = SplitMix64(seed: seedOfRandomness)
        var runs: [Run] = []
        var arguments = ["switch", old.description, new.description, "\(seed)", "pace", "\(pace)", "gap", "\(gap)"]
        if let then { arguments += ["then", then] }
        // Random kills in the first half (the copy, the follow), then the steps one after the
        // other (a launch that dies at a step before the decisive record leaves the cutover to
        // the next one), then random kills after the cutover.
        var stepAt: [Int: String] = [:]
        for (index, step) in steps.enumerated() { stepAt[(stepsFrom ?? kills / 2) + index] = step }
        for kill in 0..<kills {
            if let step = stepAt[kill] {
                runs.append(try launch(arguments + ["die-at", step], killAfter: nil))
            } else {
                // Up to 1.5 s: the launch, part of the copy (five seconds in all at the default
                // pace and size), the follow and the cutover, or what comes after.
                runs.append(try launch(arguments, killAfter: Double.random(in: 0.02...1.5, using: &random)))
            }
            let last = runs[runs.count - 1]
            #expect(!last.lines.contains { $0.hasPrefix("error") || $0.hasPrefix("TIME TRAVEL") },
                    "launch \(runs.count): \(last.lines.filter { $0.hasPrefix("error") || $0.hasPrefix("TIME") })",
                    sourceLocation: sourceLocation)
        }
        let final = try launch(then == nil ? arguments + ["finish", "verify"] : Array(arguments.dropLast(2)),
                               killAfter: nil)
        runs.append(final)
        #expect(final.status == 0 && final.lines.last == "done", "the last launch: \(final.lines.suffix(3))",
                sourceLocation: sourceLocation)
        try check(runs, old: old, new: new, then: then, sourceLocation: sourceLocation)
        return runs
    }

    /// Starts `crash-writer` and, after `killAfter` seconds (if it has not ended), kills it with
    /// SIGKILL; returns what it printed.
    static func launch(_ arguments: [String], killAfter: Double?) throws -> Run {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("switch-\(UUID().uuidString).out")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        let handle = try FileHandle(forWritingTo: output)
        let process = Process()
        process.executableURL = CrashRecovery.tool
        process.arguments = arguments
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        if let killAfter {
            let deadline = Date(timeIntervalSinceNow: killAfter)
            while process.isRunning && Date() < deadline { usleep(2_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        process.waitUntilExit()
        try handle.close()
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        return Run(lines: text.split(separator: "\n").map(String.init), status: process.terminationStatus)
    }

    /// The checks after the last launch.
    static func check(_ runs: [Run], old: StoreLocation, new: StoreLocation, then: String?,
                      sourceLocation: SourceLocation) throws {
        let serving = then == nil ? new : old
        // An in-memory old store ends with its process: before the cutover nothing it
        // acknowledged outlives a kill (the next launch starts from a new one), so the checks
        // start at the launch whose cutover happened.
        var first = 0
        if old.kind == .memory, then == nil {
            let switchedRun = runs.firstIndex { $0.lines.contains("phase switched") } ?? 0
            first = runs[switchedRun].firstPhase == "switched" ? max(0, switchedRun - 1) : switchedRun
        }
        let considered = runs[first...]
        var lastRead: Int64 = 0
        var wentBack: [String] = []
        for (index, run) in considered.enumerated() {
            for read in run.reads {
                if read < lastRead { wentBack.append("launch \(first + index + 1): read \(read) after \(lastRead)") }
                lastRead = max(lastRead, read)
            }
        }
        #expect(wentBack.isEmpty, "reads went back: \(wentBack.prefix(3))", sourceLocation: sourceLocation)
        let acknowledged = Set(considered.flatMap(\.acks))
        let store = try serving.open(schema: nil)
        defer { try? store.close() }
        try store.read { reader in
            func counter(_ name: String) throws -> Int64 {
                if case .int(let n)? = try reader.get("Counter", key: .string(name))?["value"] { return n }
                return 0
            }
            let items = try counter("items")
            let transactions = try counter("txn")
            let entries = try reader.fetch(FetchRequest("Entry"))
            // Exactly once: the counter, moved by what each transaction added, equals the entries;
            // every transaction up to the last is there, and none after it.
            #expect(Int64(entries.count) == items, "\(entries.count) entries, counter \(items)",
                    sourceLocation: sourceLocation)
            var batches: [Int64: Int] = [:]
            for entry in entries { if case .int(let batch) = entry["batch"] { batches[batch, default: 0] += 1 } }
            let missing = (1...max(1, transactions)).filter { batches[$0] == nil }
            let beyond = batches.keys.filter { $0 > transactions }.count
            #expect(missing.isEmpty, "transactions missing: \(missing.prefix(5)); last \(transactions)",
                    sourceLocation: sourceLocation)
            #expect(beyond == 0, "\(beyond) transactions after the last one", sourceLocation: sourceLocation)
            let lost = acknowledged.filter { batches[$0] == nil }.sorted()
            #expect(lost.isEmpty, "\(lost.count) acknowledged transactions lost: \(lost.prefix(5))",
                    sourceLocation: sourceLocation)
            let lastAcknowledged = acknowledged.max() ?? 0
            #expect(lastAcknowledged <= transactions, sourceLocation: sourceLocation)
        }
        let final = runs[runs.count - 1].lines
        if then == nil {
            #expect(final.contains("phase switched"), sourceLocation: sourceLocation)
            // The kept old store, brought up to date by the feed, equals the new one; then it is
            // dropped. (An in-memory old store is gone once a later launch serves from the new one.)
            let verified = final.first { $0.hasPrefix("verified ") }
            if old.kind != .memory || runs.last?.firstPhase != "switched" {
                #expect(verified?.hasPrefix("verified 0 differences") == true, "\(verified ?? "no verify")",
                        sourceLocation: sourceLocation)
                #expect(!old.exists, "the old store is dropped after its verify", sourceLocation: sourceLocation)
            }
        } else {
            #expect(final.contains(then == "cancel" ? "phase cancelled" : "phase rolledBack"),
                    sourceLocation: sourceLocation)
            #expect(!new.exists, "the new store is discarded", sourceLocation: sourceLocation)
        }
    }

    /// The pauses of the cutovers in `runs`, in microseconds.
    public static func pauses(_ runs: [Run]) -> [Int] { runs.compactMap(\.pause) }
}
