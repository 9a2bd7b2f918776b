import DataStoreAPI
import Foundation
import Testing

/// Kills a process that streams `writeSync` commits (the `crash-writer` tool) with SIGKILL and
/// checks the store it leaves: every acknowledged commit is there, no partial one is.
public enum CrashRecovery {
    /// Starts `crash-writer kind path`, waits for `acknowledged` commits, kills it, and
    /// returns the last number it printed.
    public static func killWriter(tool: URL, kind: String, path: String, after acknowledged: Int) throws -> Int {
        let process = try startWriter(tool: tool, kind: kind, path: path)
        return try stop(process, after: acknowledged)
    }

    /// What a reader process saw while another process wrote.
    public struct ReaderOutcome: Sendable {
        /// What it printed: "reads N failures F items I [first failure]".
        public var output: String
        public var status: Int32
        public var reads: Int
        public var failures: Int
        /// The entries its last snapshot held.
        public var items: Int
    }

    /// One process grows the store at `path` by `megabytes` in 1 MB transactions (LMDB from a
    /// 64 KiB map) while another reads it in a loop, checking that every snapshot's entries
    /// equal its counter.
    public static func readWhileAnotherProcessGrows(kind: String, path: String,
                                                    megabytes: Int) throws -> ReaderOutcome {
        func start(_ arguments: [String]) throws -> (Process, Pipe) {
            let process = Process()
            process.executableURL = tool
            process.arguments = [kind, path] + arguments
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            return (process, pipe)
        }
        let (creator, _) = try start(["grow", "1"])
        creator.waitUntilExit()
        let (reader, pipe) = try start(["read-loop"])
        usleep(300_000)
        let (writer, _) = try start(["grow", String(megabytes)])
        writer.waitUntilExit()
        usleep(300_000)
        _ = FileManager.default.createFile(atPath: path + ".stop", contents: Data())
        let printed = pipe.fileHandleForReading.readDataToEndOfFile()
        reader.waitUntilExit()
        let output = String(decoding: printed, as: UTF8.self)
        let fields = output.split(separator: " ").map(String.init)
        func number(after label: String) -> Int {
            guard let index = fields.firstIndex(of: label), index + 1 < fields.count else { return -1 }
            return Int(fields[index + 1]) ?? -1
        }
        return ReaderOutcome(output: output, status: reader.terminationStatus, reads: number(after: "reads"),
                             failures: number(after: "failures"), items: number(after: "items"))
    }

    /// Starts `crash-writer kind path`; its standard output is a pipe of acknowledged numbers.
    public static func startWriter(tool: URL, kind: String, path: String) throws -> Process {
        let process = Process()
        process.executableURL = tool
        process.arguments = [kind, path, "1000000"]
        process.standardOutput = Pipe()
        try process.run()
        return process
    }

    /// Reads `process`'s acknowledged numbers until `acknowledged` (counting from the first it
    /// prints), kills it with SIGKILL, and returns the last number it printed.
    public static func stop(_ process: Process, after acknowledged: Int) throws -> Int {
        guard let pipe = process.standardOutput as? Pipe else { return 0 }
        var last = 0
        var first: Int?
        var lines = NumberLines()
        let handle = pipe.fileHandleForReading
        while last - (first ?? 0) + 1 < acknowledged || first == nil {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            for n in lines.numbers(in: chunk) {
                last = n
                if first == nil { first = n }
            }
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        // Lines printed before the kill but not yet read are acknowledged too.
        var rest = handle.readDataToEndOfFile()
        rest.append(0x0A)
        for n in lines.numbers(in: rest) { last = max(last, n) }
        return last
    }

    /// Checks a store written by `crash-writer` after it was killed: the counter is at least the
    /// last acknowledged commit, and exactly the entries of commits 1...counter exist.
    public static func verify(_ store: any DataStore, acknowledged: Int,
                              sourceLocation: SourceLocation = #_sourceLocation) throws {
        let counter = try store.read { try $0.get("Counter", key: "committed")?["value"] }
        guard case .int(let committed)? = counter else {
            Issue.record("no committed counter after \(acknowledged) acknowledged commits", sourceLocation: sourceLocation)
            return
        }
        #expect(committed >= Int64(acknowledged), "acknowledged \(acknowledged), store has \(committed)",
                sourceLocation: sourceLocation)
        let entries = try store.read { try $0.count(FetchRequest("Entry")) }
        #expect(entries == Int(committed) * 10, "\(entries) entries for \(committed) commits: a partial commit",
                sourceLocation: sourceLocation)
        let beyond = try store.read { try $0.count(FetchRequest("Entry", filter: Field("batch") > .int(committed))) }
        #expect(beyond == 0, sourceLocation: sourceLocation)
    }

    /// Kills `crash-writer` after `commits` acknowledged commits, reopens the store with `open`
    /// and checks it (see ``verify(_:acknowledged:sourceLocation:)``).
    public static func killAndCheck(kind: String, path: String, after commits: Int,
                                    sourceLocation: SourceLocation = #_sourceLocation,
                                    open: () throws -> any DataStore) throws {
        let acknowledged = try killWriter(tool: tool, kind: kind, path: path, after: commits)
        #expect(acknowledged >= commits, sourceLocation: sourceLocation)
        let store = try open()
        try verify(store, acknowledged: acknowledged, sourceLocation: sourceLocation)
        try store.close()
    }

    /// The `crash-writer` tool built next to the test bundle.
    public static var tool: URL { executable(named: "crash-writer") }

    /// An executable of this package built next to the test bundle.
    public static func executable(named name: String) -> URL {
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let candidates = [bundle.appendingPathComponent(name),
                          Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent(name),
                          Bundle.main.bundleURL.appendingPathComponent(name)]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[0]
    }
}

/// The numbers a `crash-writer` prints, one per line, taken from its pipe's chunks as they come
/// (a line may span two chunks).
struct NumberLines {
    private var buffer = Data()

    /// The numbers of the lines that `chunk` completes.
    mutating func numbers(in chunk: Data) -> [Int] {
        buffer.append(chunk)
        var numbers: [Int] = []
        while let newline = buffer.firstIndex(of: 0x0A) {
            let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
            buffer.removeSubrange(buffer.startIndex...newline)
            if let n = Int(line) { numbers.append(n) }
        }
        return numbers
    }
}
