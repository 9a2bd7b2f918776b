import DataStoreAPI
import Foundation
import LMDBStore
import SQLiteStore
#if Postgres
import PostgresStore
#endif

/// The two processes of the cross-process feed tests, on the crash writer's schema:
///
///     crash-writer sqlite|lmdb|postgres PATH feed-write N [PAUSE_MS]
///         commits N transactions, each inserting one Entry, updating the previous one, deleting
///         every seventh, and moving the Counter; prints "done N" at the end
///     crash-writer sqlite|lmdb|postgres PATH feed-observe N [polling]
///         prints "ready" once it follows the feed from the store's current token, then receives
///         N transactions; checks that they come in order, each exactly once with the changes the
///         writer made, and that a live query of the counter ends on its final value; prints
///         "received N in-order OK median-us M p99-us P worst-us W notified B final V". With
///         `polling`, the store does not use commit notifications.
enum FeedFixture {
    static func main(_ arguments: [String]) -> Int32 {
        guard arguments.count >= 5, let count = Int(arguments[4]) else {
            FileHandle.standardError.write(Data("usage: crash-writer KIND PATH feed-write|feed-observe N\n".utf8))
            return 2
        }
        do {
            let store: Store
            switch arguments[1] {
            case "sqlite":
                store = try SQLiteStore(path: arguments[2], schema: schema, options: SQLiteOptions(durability: .normal))
            case "lmdb": store = try LMDBStore(path: arguments[2], schema: schema, options: LMDBOptions(durability: .normal))
            #if Postgres
            case "postgres": store = try PostgresStore(url: arguments[2], schema: schema, durability: .normal)
            #endif
            default:
                FileHandle.standardError.write(Data("unknown kind \(arguments[1])\n".utf8))
                return 2
            }
            defer { try? store.close() }
            if arguments.count >= 6, arguments[5] == "polling" { store.usesCommitNotifications = false }
            if arguments[3] == "feed-write" {
                let pause = arguments.count >= 6 ? Double(arguments[5]) ?? 0 : 0
                try write(store, count, pauseMilliseconds: pause)
                print("done \(count)")
                return 0
            }
            return try observe(store, count)
        } catch {
            FileHandle.standardError.write(Data("crash-writer: \(error)\n".utf8))
            return 1
        }
    }

    static func write(_ store: any DataStore, _ count: Int, pauseMilliseconds: Double) throws {
        let start = try store.read { r -> Int in
            if case .int(let done)? = try r.get("Counter", key: "committed")?["value"] { return Int(done) + 1 }
            return 1
        }
        for n in start..<(start + count) {
            try store.writeSync { w in
                try w.insert(["id": .int(Int64(n)), "batch": .int(Int64(n)), "text": .string("entry \(n)")], into: "Entry")
                if n > 1, try w.get("Entry", key: .int(Int64(n - 1))) != nil {
                    try w.update("Entry", key: .int(Int64(n - 1)), set: ["text": .string("updated by \(n)")])
                }
                if n % 7 == 0 { try w.delete("Entry", key: .int(Int64(n - 3))) }
                try w.save(["name": "committed", "value": .int(Int64(n))], into: "Counter")
            }
            if pauseMilliseconds > 0 { usleep(UInt32(pauseMilliseconds * 1000)) }
        }
    }

    /// What transaction `n` of ``write(_:_:pauseMilliseconds:)`` changed in a new store (whose
    /// transaction `n` has sequence number `n`): the counter, then the entries in key order.
    static func expected(_ n: Int) -> [ItemChange] {
        var items = [ItemChange(entity: "Counter", key: "committed", kind: n == 1 ? .inserted : .updated)]
        if n % 7 == 0 { items.append(ItemChange(entity: "Entry", key: .int(Int64(n - 3)), kind: .deleted)) }
        if n > 1 { items.append(ItemChange(entity: "Entry", key: .int(Int64(n - 1)), kind: .updated)) }
        items.append(ItemChange(entity: "Entry", key: .int(Int64(n)), kind: .inserted))
        return items
    }

    static func observe(_ store: Store, _ count: Int) throws -> Int32 {
        let token = try store.currentChangeToken()
        let outcome = Outcome()
        let done = DispatchSemaphore(value: 0)
        let task = Task {
            defer { done.signal() }
            var delays: [Int64] = []
            var expectedSequence = token.sequence + 1
            var problems: [String] = []
            for try await set in store.changes(since: token) {
                let now = try Timestamp(Date()).microsecondsSinceEpoch
                delays.append(now - set.committedAt.microsecondsSinceEpoch)
                if set.sequence != expectedSequence { problems.append("got \(set.sequence), expected \(expectedSequence)") }
                expectedSequence = set.sequence + 1
                let want = expected(Int(set.sequence))
                if set.items != want { problems.append("transaction \(set.sequence): \(set.items) != \(want)") }
                if delays.count == count { break }
            }
            // The live query of the counter ends on the final value.
            var final: Value = .null
            for try await results in store.observe(FetchRequest("Counter")) {
                final = results.first?["value"] ?? .null
                if final == .int(Int64(expectedSequence - 1)) { break }
            }
            outcome.set(delays: delays, problems: problems, final: final)
        }
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        done.wait()
        _ = task
        let (delays, problems, final) = outcome.get()
        let sorted = delays.sorted()
        let median = sorted.isEmpty ? 0 : sorted[sorted.count / 2]
        let p99 = sorted.isEmpty ? 0 : sorted[sorted.count * 99 / 100]
        print("received \(delays.count) in-order \(problems.isEmpty ? "OK" : "FAIL \(problems.prefix(3))") "
            + "median-us \(median) p99-us \(p99) worst-us \(sorted.last ?? 0) "
            + "notified \(store.receivesCommitNotifications) final \(final)")
        return problems.isEmpty && delays.count == count ? 0 : 1
    }

    final class Outcome: @unchecked Sendable {
        private let lock = NSLock()
        private var value: ([Int64], [String], Value) = ([], [], .null)
        func set(delays: [Int64], problems: [String], final: Value) {
            lock.withLock { value = (delays, problems, final) }
        }
        func get() -> ([Int64], [String], Value) { lock.withLock { value } }
    }
}
