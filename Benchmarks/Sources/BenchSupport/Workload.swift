import DataStoreAPI
import Foundation

/// The items every benchmark writes: an int key, a string, an indexed int, a double and 16 bytes.
package struct Workload {
    package let count: Int

    package init(count: Int) {
        self.count = count
    }

    package static let schema = Schema(entities: [
        EntitySchema("Item", primaryKey: "id", attributes: [
            Attribute("id", .int), Attribute("name", .string), Attribute("score", .int),
            Attribute("ratio", .double), Attribute("payload", .bytes),
        ], indexes: [Index("byScore", on: ["score"])]),
    ])

    /// DDL identical to what SQLiteStore creates for `schema`: the row's checksum last
    /// (``RawRowSum``), and the trigger that takes it off a row another program updates.
    package static let sqliteDDL = """
        CREATE TABLE "Item" ("id" INTEGER PRIMARY KEY NOT NULL, "name" TEXT NOT NULL, "score" INTEGER NOT NULL, \
        "ratio" NOT NULL, "payload" BLOB NOT NULL, "_ds_sum" INTEGER);
        CREATE TRIGGER "_ds_sum.Item" AFTER UPDATE ON "Item" FOR EACH ROW WHEN NEW."_ds_sum" IS OLD."_ds_sum" \
        AND (NEW."id" IS NOT OLD."id" OR NEW."name" IS NOT OLD."name" OR NEW."score" IS NOT OLD."score" \
        OR NEW."ratio" IS NOT OLD."ratio" OR NEW."payload" IS NOT OLD."payload") \
        BEGIN UPDATE "Item" SET "_ds_sum" = NULL WHERE "id" = NEW."id"; END;
        CREATE INDEX "Item.byScore" ON "Item" ("score");
        """

    package func name(_ i: Int) -> String { "name-\(i % 1_000)" }
    package func score(_ i: Int) -> Int64 { Int64(i % 1_000) }
    package func ratio(_ i: Int) -> Double { Double(i % 997) / 997 }
    package func payload(_ i: Int) -> [UInt8] { (0..<16).map { UInt8(truncatingIfNeeded: i &+ $0) } }

    package func record(_ i: Int) -> Record {
        ["id": .int(Int64(i)), "name": .string(name(i)), "score": .int(score(i)), "ratio": .double(ratio(i)),
         "payload": .bytes(payload(i))]
    }

    /// Keys for point gets: a fixed pseudo-random sample.
    package var lookups: [Int] {
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        return (0..<min(count, 100_000)).map { _ in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return Int(state % UInt64(count))
        }
    }

    package static let smallTransactions = 10_000
    package static let queriedScores = 100
    package static let ratioBound = 0.01
}

/// An item of the workload as a typed model, for the typed rows of `profile-store` and
/// `count-allocations`.
package struct WorkloadItem: DataObject {
    package static let entityName = "Item"
    package static let primaryKey = "id"
    package var id: Int64
    package var name: String
    package var score: Int64
    package var ratio: Double
    package var payload: [UInt8]
}

/// A row as the raw benchmarks decode it, so both sides build the same Swift values.
package struct RawRow: Equatable {
    package var id: Int64
    package var name: String
    package var score: Int64
    package var ratio: Double
    package var payload: [UInt8]

    package init(id: Int64, name: String, score: Int64, ratio: Double, payload: [UInt8]) {
        (self.id, self.name, self.score, self.ratio, self.payload) = (id, name, score, ratio, payload)
    }
}

/// A stored row's fields as the raw side reads them, where they lie (LMDB's map, SQLite's
/// statement).
package struct RawFields {
    package var id: Int64
    package var name: UnsafeRawBufferPointer
    package var score: Int64
    package var ratio: Double
    package var payload: UnsafeRawBufferPointer
}

extension RawRow {
    /// What an in-place visit computes of a row without building anything: its numbers, the
    /// lengths and first bytes of its text and bytes (both sides read the same fields).
    @inline(__always)
    package static func inPlaceSum(id: Int64, score: Int64, ratio: Double, name: UnsafeRawBufferPointer,
                                   payload: UnsafeRawBufferPointer) -> Int64 {
        id &+ score &+ Int64(ratio * 1_000) &+ Int64(name.count) &+ Int64(name.first ?? 0) &+ Int64(payload.count)
            &+ Int64(payload.first ?? 0)
    }
}

/// Hands a value to code the optimizer cannot see into, so that what a visit decodes is not
/// optimized away; both sides of a row call it alike. Inlinable (but never inlined), so that a
/// caller in another module (a row of datastore-bench) calls a copy specialized for its type, as
/// the raw side in this module does: called unspecialized, it cost the API's side of a typed visit
/// 48 instructions an item (the generic `withExtendedLifetime` and the value's witness table)
/// against the raw side's 4.
@inlinable @inline(never) package func consume<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

/// Times a block with the continuous clock, and notes the peak of the process's own memory
/// (RssAnon, sampled every 2 ms) above what it was when the block began (after `malloc_trim`), in
/// ``RssAnonSampler/peaks`` (the API's block is timed before the raw one of the same row).
package func time(_ body: () throws -> Void) rethrows -> Double {
    RssAnonSampler.shared.begin()
    let start = ContinuousClock.now
    try body()
    let elapsed = ContinuousClock.now - start
    RssAnonSampler.shared.end()
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

/// The fastest of `runs` runs of a read-only `body`, in one memory-sampled block: a single run
/// of a read that takes a few tens of milliseconds varies by a third on this machine. A write
/// cannot run again on the same keys (a second run would find the data there): the main and
/// feed tables' write rows take rounds on keys or stores of their own instead
/// (`inTurns(_:api:raw:)` in datastore-bench).
package func bestOf(_ runs: Int, _ body: () throws -> Void) rethrows -> Double {
    RssAnonSampler.shared.begin()
    defer { RssAnonSampler.shared.end() }
    var best = Double.infinity
    for _ in 0..<runs {
        let start = ContinuousClock.now
        try body()
        let elapsed = ContinuousClock.now - start
        best = min(best, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }
    return best
}

/// glibc's `malloc_trim`, which the Glibc module does not import.
@_silgen_name("malloc_trim") package func mallocTrim(_ pad: Int) -> Int32

/// Samples RssAnon from /proc/self/status on a thread of its own.
package final class RssAnonSampler: @unchecked Sendable {
    package static let shared = RssAnonSampler()
    private let lock = NSLock()
    private var base = 0
    private var peak = 0
    private var running = false
    /// The peaks of the blocks timed so far, in KiB above their start, oldest first.
    package private(set) var peaks: [Int] = []

    private init() {
        Thread.detachNewThread { [self] in
            while true {
                let now = Self.rssAnon()
                lock.withLock { if running { peak = max(peak, now) } }
                usleep(2_000)
            }
        }
    }

    package func begin() {
        // Heap that earlier blocks freed goes back to the system first, so that a block's
        // growth is its own and not hidden by memory malloc kept for reuse.
        _ = mallocTrim(0)
        let now = Self.rssAnon()
        lock.withLock {
            base = now
            peak = now
            running = true
        }
    }

    package func end() {
        let now = Self.rssAnon()
        lock.withLock {
            running = false
            peaks.append(max(peak, now) - base)
        }
    }

    /// The peak of the block timed `back` blocks ago (1: the last).
    package func peak(back: Int) -> Int { lock.withLock { peaks.count >= back ? peaks[peaks.count - back] : 0 } }

    /// RssAnon in KiB.
    package static func rssAnon() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("RssAnon:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        }
        return 0
    }
}

/// A fresh temporary directory.
package func scratch(_ name: String) -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("bench-\(name)-\(UUID().uuidString)").path
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}
