import Foundation

/// The cross-process feed test: an observer process follows the feed of a store while a writer
/// process commits transactions to it.
public enum CrossProcessFeed {
    public struct Outcome: CustomStringConvertible {
        public var received: Int
        public var inOrder: Bool
        public var medianMicroseconds: Int
        public var p99Microseconds: Int
        public var worstMicroseconds: Int
        /// Whether the observer learned of the commits from notifications (not by polling).
        public var notified: Bool
        public var output: String
        public var description: String {
            "\(received) transactions, in order: \(inOrder), delay median \(medianMicroseconds) µs, p99 "
                + "\(p99Microseconds) µs, worst \(worstMicroseconds) µs, \(notified ? "notified" : "polling")"
        }
    }

    /// Starts `crash-writer KIND PATH feed-observe COUNT`, waits until it follows the feed, runs
    /// the writer for `count` transactions, and parses what the observer saw.
    public static func run(kind: String, path: String, count: Int, pauseMilliseconds: Int = 0,
                           polling: Bool = false) throws -> Outcome {
        let observer = Process()
        observer.executableURL = CrashRecovery.tool
        observer.arguments = [kind, path, "feed-observe", String(count)] + (polling ? ["polling"] : [])
        let pipe = Pipe()
        observer.standardOutput = pipe
        observer.standardError = pipe
        try observer.run()
        // Wait for "ready": the observer holds its start token before the first commit.
        var output = Data()
        while !String(decoding: output, as: UTF8.self).contains("ready") {
            let chunk = pipe.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            output += chunk
        }
        _ = try runCommand(CrashRecovery.tool.path, [kind, path, "feed-write", String(count), String(pauseMilliseconds)])
        let deadline = Date(timeIntervalSinceNow: 120)
        while observer.isRunning && Date() < deadline { usleep(10_000) }
        if observer.isRunning { observer.terminate() }
        output += pipe.fileHandleForReading.readDataToEndOfFile()
        observer.waitUntilExit()
        let text = String(decoding: output, as: UTF8.self)
        func number(after label: String) -> Int {
            guard let range = text.range(of: label + " ") else { return -1 }
            return Int(text[range.upperBound...].prefix { $0.isNumber }) ?? -1
        }
        return Outcome(received: number(after: "received"), inOrder: text.contains("in-order OK"),
                       medianMicroseconds: number(after: "median-us"), p99Microseconds: number(after: "p99-us"),
                       worstMicroseconds: number(after: "worst-us"), notified: text.contains("notified true"),
                       output: text)
    }
}

extension CrossProcessFeed {
    /// The same 200 transactions, 5 ms apart, delivered to an observer process with commit
    /// notifications and, into a second store, by polling; `path(name)` names each store.
    public static func notificationsAndPolling(kind: String, path: (String) -> String) throws
        -> (notified: Outcome, polled: Outcome)
    {
        (try run(kind: kind, path: path("notified"), count: 200, pauseMilliseconds: 5),
         try run(kind: kind, path: path("polled"), count: 200, pauseMilliseconds: 5, polling: true))
    }
}

/// The saturation probe (`crash-writer KIND PATH saturate [blocking]`): 64 tasks read and write
/// without pause while one task measures how late it wakes from 1 ms sleeps.
public enum PoolSaturation {
    public struct Outcome: CustomStringConvertible {
        public var medianMicroseconds: Int
        public var p99Microseconds: Int
        public var maxMicroseconds: Int
        public var samples: Int
        public var reads: Int
        public var writes: Int
        public var output: String
        public var description: String {
            "scheduling delay median \(medianMicroseconds) µs, p99 \(p99Microseconds) µs, max \(maxMicroseconds) µs "
                + "over \(samples) samples; \(reads) reads and \(writes) writes of the load"
        }
    }

    public static func run(kind: String, path: String, blocking: Bool) throws -> Outcome {
        let text = try runCommand(CrashRecovery.tool.path, [kind, path, "saturate"] + (blocking ? ["blocking"] : []))
        func number(after label: String) -> Int {
            guard let range = text.range(of: label + " ") else { return -1 }
            return Int(text[range.upperBound...].prefix { $0.isNumber }) ?? -1
        }
        return Outcome(medianMicroseconds: number(after: "p50-us"), p99Microseconds: number(after: "p99-us"),
                       maxMicroseconds: number(after: "max-us"), samples: number(after: "samples"),
                       reads: number(after: "reads"), writes: number(after: "writes"), output: text)
    }
}
