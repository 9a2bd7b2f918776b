import DataStoreAPI
import Foundation
import Testing

/// Kills a schema upgrade (the `crash-writer` tool's `upgrade` of its `UpgradeFixture`) with
/// SIGKILL at random points and checks each store it leaves: all version 1 with the old items,
/// or all version 2 with every item rewritten; and that the next open finishes the job.
public enum SchemaUpgradeCrash {
    public struct Outcome: Sendable {
        /// Kills that left the store at version 1 after the migration had reported progress.
        public var oldAfterProgress = 0
        /// Kills that left it at version 1 (all of them, progress or not).
        public var old = 0
        /// Kills after the migration committed.
        public var new = 0
        /// Seconds of one whole migration, unkilled.
        public var seconds = 0.0
    }

    /// - Parameters:
    ///   - copy: copies the pristine store at the first path to the second (a file or a directory).
    ///   - open: opens a store with its stored schema.
    public static func run(kind: String, directory: TemporaryDirectory, items: Int, kills: Int,
                           open: (String) throws -> any DataStore,
                           sourceLocation: SourceLocation = #_sourceLocation) throws -> Outcome {
        let suffix = kind == "sqlite" ? "sqlite" : "lmdb"
        let pristine = directory.path("pristine.\(suffix)")
        #expect(try tool(kind, pristine, ["seed-v1", String(items)]).status == 0, sourceLocation: sourceLocation)
        var outcome = Outcome()
        // One whole run, to know how long a migration takes.
        let timed = directory.path("timed.\(suffix)")
        try copy(pristine, timed)
        let started = Date()
        let whole = try tool(kind, timed, ["upgrade"])
        outcome.seconds = Date().timeIntervalSince(started)
        #expect(whole.status == 0 && whole.output.hasSuffix("done\n"), "\(whole.output)", sourceLocation: sourceLocation)
        try check(open(timed), items: items, expectVersion: 2, sourceLocation: sourceLocation)

        var rng = SystemRandomNumberGenerator()
        for kill in 0..<kills {
            let path = directory.path("kill\(kill).\(suffix)")
            try copy(pristine, path)
            // Every other kill waits for the migration's first, second or third progress line (of
            // six), so that kills land inside it however long the machine takes; the others are
            // spread over the time the unkilled run took, and a little past it.
            let when: Kill = kill % 2 == 0
                ? .atProgressLine(1 + kill / 2 % 3)
                : .after(Double.random(in: 0.05...(outcome.seconds * 1.1), using: &rng))
            let result = try tool(kind, path, ["upgrade"], kill: when)
            let store = try open(path)
            let version = store.schema.version
            try check(store, items: items, expectVersion: version, sourceLocation: sourceLocation)
            if version == 1 {
                outcome.old += 1
                if result.output.contains("progress") { outcome.oldAfterProgress += 1 }
            } else {
                outcome.new += 1
            }
            // The next open finishes the job.
            let finish = try tool(kind, path, ["upgrade"])
            #expect(finish.status == 0, "the next open finishes: \(finish.output)", sourceLocation: sourceLocation)
            try check(open(path), items: items, expectVersion: 2, sourceLocation: sourceLocation)
        }
        return outcome
    }

    /// Checks that the store is wholly at `expectVersion`: every item in that version's form.
    static func check(_ store: any DataStore, items: Int, expectVersion: Int,
                      sourceLocation: SourceLocation) throws {
        defer { try? store.close() }
        #expect(store.schema.version == expectVersion, sourceLocation: sourceLocation)
        var bad = 0
        var count = 0
        try store.read { r in
            var after: Value?
            while true {
                let page = try r.scan("Entry", after: after, limit: 5_000)
                for record in page {
                    guard case .int(let id) = record["id"] else { bad += 1; continue }
                    let ok = expectVersion == 1
                        ? record == ["id": .int(id), "batch": .int(id / 10), "text": .string("entry \(id)")]
                        : record == ["id": .int(id), "batch": .string(String(id / 10)), "body": .string("entry \(id)"),
                                     "weight": .double(1.5)]
                    if !ok { bad += 1 }
                    count += 1
                }
                guard let last = page.last else { break }
                after = last["id"]
            }
            if expectVersion == 2 {
                let byBody = try r.count(FetchRequest("Entry", filter: .compare("body", .equal, .string("entry 77"))))
                #expect(byBody == 1, "the new index answers", sourceLocation: sourceLocation)
            }
        }
        #expect(count == items && bad == 0, "version \(expectVersion): \(count) items, \(bad) not in that version's form",
                sourceLocation: sourceLocation)
    }

    static func copy(_ from: String, _ to: String) throws {
        try? FileManager.default.removeItem(atPath: to)
        try FileManager.default.copyItem(atPath: from, toPath: to)
    }

    struct ToolResult {
        var status: Int32
        var output: String
    }

    /// When to send SIGKILL.
    enum Kill {
        /// After this many seconds.
        case after(Double)
        /// As soon as the tool has printed this many progress lines (never, if it prints fewer).
        case atProgressLine(Int)
    }

    /// Runs `crash-writer kind path arguments…`, killing it with SIGKILL when `kill` says.
    static func tool(_ kind: String, _ path: String, _ arguments: [String], kill when: Kill? = nil) throws
        -> ToolResult
    {
        let process = Process()
        process.executableURL = CrashRecovery.tool
        process.arguments = [kind, path] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        try pipe.fileHandleForWriting.close()
        var output = Data()
        switch when {
        case .after(let seconds):
            usleep(UInt32(seconds * 1_000_000))
            kill(process.processIdentifier, SIGKILL)
        case .atProgressLine(let line):
            // Reads what the tool prints as it prints it, until the line it waits for.
            while String(decoding: output, as: UTF8.self).components(separatedBy: "progress ").count - 1 < line {
                let chunk = pipe.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                output.append(chunk)
            }
            kill(process.processIdentifier, SIGKILL)
        case nil:
            break
        }
        output.append(pipe.fileHandleForReading.readDataToEndOfFile())
        process.waitUntilExit()
        return ToolResult(status: process.terminationStatus, output: String(decoding: output, as: UTF8.self))
    }
}
