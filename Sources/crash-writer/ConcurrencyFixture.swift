import DataStoreAPI
import Foundation
import StoreMigration
import Synchronization
#if Postgres
import PostgresStore
#endif

/// One process of the concurrent writers' correctness test:
///
///     crash-writer postgres URL concurrent-writers setup
///     crash-writer postgres URL concurrent-writers SECONDS SEED STORES THREADS
///
/// `setup` makes the store, with the four counters at 0 and owners 0 to 7. The other form
/// opens STORES stores at URL (each its own connections), each followed by an observer from its
/// current token, and prints `ready`; then THREADS writer threads per store run random
/// transactions for SECONDS: read-modify-write increments of four hot counters (each also
/// inserting a `Tick` named after the counter and the value it wrote), inserts, renames and
/// deletes of items (a unique name, a required owner), inserts and deletes of owners (a `deny`
/// rule keeps one with items). It prints `acked I N` for each counter (the increments whose
/// `writeSync` returned) and `writers-done`; each observer then reads until the change set that
/// sets the counter `end` (which the test writes), and prints `observer S FROM COUNT HASH
/// ordered|unordered`: the sequence numbers it saw after FROM, their count and FNV-1a hash, and
/// whether they rose one by one.
enum ConcurrencyFixture {
    static let schema = Schema(entities: [
        EntitySchema("Counter", primaryKey: "name", attributes: [Attribute("name", .string), Attribute("n", .int)]),
        EntitySchema("Tick", primaryKey: "id", attributes: [Attribute("id", .string)]),
        EntitySchema("Owner", primaryKey: "id", attributes: [Attribute("id", .int)],
                     relationships: [.toMany("items", to: "Item", inverse: "owner", deleteRule: .deny)]),
        EntitySchema("Item", primaryKey: "id", attributes: [Attribute("id", .int), Attribute("name", .string)],
                     indexes: [Index("byName", on: ["name"], unique: true)],
                     relationships: [.toOne("owner", to: "Owner", inverse: "items", optional: false)]),
    ])

    static let counters = 4

    static func main(_ arguments: [String]) -> Int32 {
        #if Postgres
        if arguments.count == 5, arguments[4] == "setup" {
            do {
                let store = try PostgresStore(url: arguments[2], schema: schema, durability: .normal)
                defer { try? store.close() }
                try store.writeSync { w in
                    for counter in 0..<counters { try w.insert(["name": .string("c\(counter)"), "n": 0], into: "Counter") }
                    for owner in 0..<8 { try w.insert(["id": .int(Int64(owner))], into: "Owner") }
                }
                print("set up")
                return 0
            } catch {
                FileHandle.standardError.write(Data("crash-writer: \(error)\n".utf8))
                return 1
            }
        }
        guard arguments.count >= 8, let seconds = Double(arguments[4]), let seed = UInt64(arguments[5]),
              let storeCount = Int(arguments[6]), let threads = Int(arguments[7]) else {
            FileHandle.standardError.write(Data("usage: crash-writer postgres URL concurrent-writers SECONDS SEED STORES THREADS\n".utf8))
            return 2
        }
        do {
            let stores = try (0..<storeCount).map { _ in try PostgresStore(url: arguments[2], schema: schema, durability: .normal) }
            defer { for store in stores { try? store.close() } }
            let observers = try stores.enumerated().map { index, store in try Observer(store, index) }
            say("ready")
            let acked = Mutex([Int](repeating: 0, count: counters))
            let deadline = Date().addingTimeInterval(seconds)
            var workers: [Thread] = []
            let finished = DispatchGroup()
            for (s, store) in stores.enumerated() {
                for t in 0..<threads {
                    finished.enter()
                    let thread = Thread {
                        var random = DemoRandom(seed: seed &* 1_000_003 &+ UInt64(s * 100 + t))
                        while Date() < deadline {
                            if let counter = step(store, &random) { acked.withLock { $0[counter] += 1 } }
                        }
                        finished.leave()
                    }
                    workers.append(thread)
                    thread.start()
                }
            }
            finished.wait()
            for (counter, count) in acked.withLock({ $0 }).enumerated() { say("acked \(counter) \(count)") }
            say("writers-done")
            for observer in observers { say(observer.waitForEnd()) }
            return 0
        } catch {
            FileHandle.standardError.write(Data("crash-writer: \(error)\n".utf8))
            return 1
        }
        #else
        FileHandle.standardError.write(Data("crash-writer: built without the Postgres trait\n".utf8))
        return 2
        #endif
    }

    /// A line on standard output, written at once (a pipe would buffer `print`).
    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// One random transaction; the counter it incremented when it was an acknowledged increment.
    static func step(_ store: any DataStore, _ random: inout DemoRandom) -> Int? {
        let choice = random.next() % 10
        let a = Int64(random.next() % 200), b = Int64(random.next() % 200), owner = Int64(random.next() % 8)
        do {
            switch choice {
            case 0..<4:
                let counter = Int(random.next() % UInt64(counters))
                try store.writeSync { w in
                    let name = Value.string("c\(counter)")
                    let now: Int64
                    if case .int(let n)? = try w.get("Counter", key: name)?["n"] { now = n } else { now = 0 }
                    try w.save(["name": name, "n": .int(now + 1)], into: "Counter")
                    try w.insert(["id": .string("c\(counter)-\(now + 1)")], into: "Tick")
                }
                return counter
            case 4, 5:
                try store.writeSync { w in
                    try w.insert(["id": .int(a), "name": .string("n\(b)"), "owner": .int(owner)], into: "Item")
                }
            case 6:
                try store.writeSync { w in _ = try w.update("Item", key: .int(a), set: ["name": .string("n\(b)")]) }
            case 7:
                try store.writeSync { w in _ = try w.delete("Item", key: .int(a)) }
            case 8:
                try store.writeSync { w in try w.insert(["id": .int(owner)], into: "Owner") }
            default:
                try store.writeSync { w in _ = try w.delete("Owner", key: .int(owner)) }
            }
        } catch let error as StoreError where [.keyExists, .uniqueViolation, .notFound, .referenceViolation, .conflict]
            .contains(error.code) {
            // A rule refused it (or it conflicted more times than the retries): rolled back.
        } catch {
            FileHandle.standardError.write(Data("crash-writer: unexpected \(error)\n".utf8))
            exit(1)
        }
        return nil
    }

    /// Follows one store's feed from its token when made until the change set that writes the
    /// counter `end`.
    final class Observer: @unchecked Sendable {
        private let done = DispatchSemaphore(value: 0)
        private let lock = NSLock()
        private var line = ""
        private var task: Task<Void, Never>?

        init(_ store: any DataStore, _ index: Int) throws {
            let start = try store.currentChangeToken()
            task = Task { [self] in
                var count = 0
                var hash: UInt64 = 0xcbf2_9ce4_8422_2325
                var ordered = true
                var last = start.sequence
                do {
                    for try await set in store.changes(since: start) {
                        if set.sequence <= last { ordered = false }
                        last = set.sequence
                        count += 1
                        for byte in String(set.sequence).utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
                        hash = (hash ^ 0x2c) &* 0x100_0000_01b3
                        if set.items.contains(where: { $0.entity == "Counter" && $0.key == "end" }) { break }
                    }
                    lock.withLock { line = "observer \(index) \(start.sequence) \(count) \(hash) \(ordered ? "ordered" : "unordered")" }
                } catch {
                    lock.withLock { line = "observer \(index) failed \(error)" }
                }
                done.signal()
            }
        }

        func waitForEnd() -> String {
            done.wait()
            return lock.withLock { line }
        }
    }
}
