import Foundation

/// The cross-process feed test: an observer process follows the feed of a store while a writer
/// process commits transactions to it.
public enum CrossProcessFeed {
    public struct Outcome: CustomStringConvertible {
        public var received: Int
        public var inOrder: Bool
        public var medianMicroseconds: Int
        public var worstMicroseconds: Int
        public var output: String
        public var description: String {
            "\(received) transactions, in order: \(inOrder), delay median \(medianMicroseconds) µs, worst "
                + "\(worstMicroseconds) µs"
        }
    }

    /// Starts `crash-writer KIND PATH feed-observe COUNT`, waits until it follows the feed, runs
    /// the writer for `count` transactions, and parses what the observer saw.
    public static func run(kind: String, path: String, count: Int) throws -> Outcome {
        let observer = Process()
        observer.executableURL = CrashRecovery.tool
        observer.arguments = [kind, path, "feed-observe", String(count)]
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
        _ = try runCommand(CrashRecovery.tool.path, [kind, path, "feed-write", String(count)])
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
                       medianMicroseconds: number(after: "median-us"), worstMicroseconds: number(after: "worst-us"),
                       output: text)
    }
}
