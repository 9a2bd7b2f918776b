import DataStoreAPI
import Foundation
import InMemoryStore
import LMDBStore
import SQLiteStore
import Synchronization
#if Postgres
import PostgresStore
#endif

/// The test of async access that needs a process of its own (a test process shares its
/// cooperative pool with every test running beside it):
///
///     crash-writer sqlite|lmdb|memory|postgres PATH async-probe
///
/// blocks more `readAsync` and `writeAsync` blocks at once than Swift's cooperative pool has
/// threads, then starts a task; prints "probe ran while N blocks were blocked" and exits 0 when
/// it ran, "probe did not run" and exits 1 when the blocks held the pool (a timer off the pool
/// opens the blocks after 10 s, so that the process ends either way).
///
///     crash-writer sqlite|lmdb|memory|postgres PATH saturate [blocking]
///
/// saturates the cooperative pool: 64 tasks read all of 20,000 entries or update 500 of them,
/// without pause, for 3 s, while one more task sleeps 1 ms at a time and measures how late it
/// wakes; prints "delay p50-us A p99-us B max-us C reads R writes W". The tasks use
/// `readAsync` and `await writeAsync`, or with `blocking` the synchronous `read` and
/// `writeSync`, which hold a thread of the pool for the whole block.
enum AsyncProbe {
    static func main(_ arguments: [String]) -> Int32 {
        let outcome = Mutex<Int32>(1)
        let done = DispatchSemaphore(value: 0)
        Task {
            do {
                let store: any DataStore
                switch arguments[1] {
                case "sqlite": store = try SQLiteStore(path: arguments[2], schema: schema)
                case "lmdb": store = try LMDBStore(path: arguments[2], schema: schema)
#if Postgres
                case "postgres": store = try PostgresStore(url: arguments[2], schema: schema)
#endif
                default: store = try InMemoryStore(schema: schema)
                }
                if arguments[3] == "saturate" {
                    let figures = try await saturate(store, blocking: arguments.count > 4 && arguments[4] == "blocking")
                    print(figures)
                    outcome.withLock { $0 = 0 }
                } else {
                    let ran = try await probe(store)
                    outcome.withLock { $0 = ran ? 0 : 1 }
                }
                try store.close()
            } catch {
                print("crash-writer: \(error)")
            }
            done.signal()
        }
        done.wait()
        return outcome.withLock { $0 }
    }

    final class Count: Sendable { let value = Mutex(0) }

    static func probe(_ store: any DataStore) async throws -> Bool {
        try store.writeSync { w in
            for n in 1...20 { try w.insert(["id": .int(Int64(n)), "batch": 1, "text": "t"], into: "Entry") }
        }
        let gate = DispatchSemaphore(value: 0)
        let running = Count()
        // As many reads as the store runs at once (one per core), and a write: one block more
        // than the pool has threads.
        let reads = ProcessInfo.processInfo.activeProcessorCount
        var tasks: [Task<Int, any Error>] = []
        for n in 0...reads {
            tasks.append(Task {
                let block = { @Sendable (reader: ReadAccessor) throws -> Int in
                    running.value.withLock { $0 += 1 }
                    gate.wait()
                    return try reader.count(FetchRequest("Entry"))
                }
                return n < reads ? try await store.readAsync(block) : try await store.writeAsync { try block($0) }
            })
        }
        let opened = Count()
        let open = { @Sendable in
            if opened.value.withLock({ count in defer { count = 1 }; return count == 0 }) {
                for _ in 0...reads { gate.signal() }
            }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + 10, execute: open)
        while running.value.withLock({ $0 }) < reads + 1 && opened.value.withLock({ $0 }) == 0 {
            try await Task.sleep(for: .milliseconds(1))
        }
        let blocked = running.value.withLock { $0 }
        let ran = await Task.detached { opened.value.withLock { $0 } == 0 }.value
        open()
        for task in tasks where try await task.value != 20 { print("a block read a wrong count") }
        print(ran && blocked == reads + 1 ? "probe ran while \(blocked) blocks were blocked" : "probe did not run")
        return ran && blocked == reads + 1
    }

    final class Load: Sendable {
        let stop = Atomic<Bool>(false)
        let reads = Atomic<Int>(0)
        let writes = Atomic<Int>(0)
    }

    static func saturate(_ store: any DataStore, blocking: Bool) async throws -> String {
        let entries = 20_000
        try store.writeSync { w in
            try w.insert(contentsOf: (1...entries).map {
                ["id": .int(Int64($0)), "batch": .int(Int64($0 % 100)), "text": .string("entry \($0)")]
            }, into: "Entry")
        }
        let load = Load()
        @Sendable func scan(_ reader: ReadAccessor) throws -> Int {
            let all = try reader.fetch(FetchRequest("Entry"))
            guard all.count == entries else { throw StoreError(.corrupt, "a scan read \(all.count) entries") }
            return all.count
        }
        @Sendable func update(_ writer: WriteAccessor, _ round: Int) throws {
            let first = (round * 500) % entries
            for id in first..<(first + 500) {
                try writer.update("Entry", key: .int(Int64(id + 1)), set: ["text": .string("round \(round)")])
            }
        }
        let clock = ContinuousClock()
        // Before the load's tasks: the probe's first delay counts from here.
        let started = clock.now
        let delays = try await withThrowingTaskGroup(of: [Duration].self) { group in
            for client in 0..<64 {
                group.addTask {
                    var round = 0
                    while !load.stop.load(ordering: .relaxed) {
                        round += 1
                        let round = round
                        if client % 8 == 0 {
                            if blocking {
                                try store.writeSync { try update($0, round) }
                            } else {
                                try await store.writeAsync { try update($0, round) }
                            }
                            load.writes.add(1, ordering: .relaxed)
                        } else {
                            _ = blocking ? try store.read(scan) : try await store.readAsync(scan)
                            load.reads.add(1, ordering: .relaxed)
                        }
                        // The next request: a server's handler is a task that ends.
                        await Task.yield()
                    }
                    return []
                }
            }
            // Off the pool, which the blocking calls may hold.
            DispatchQueue.global().asyncAfter(deadline: .now() + 3.3) { load.stop.store(true, ordering: .relaxed) }
            group.addTask {
                // Let the load start, then measure for 3 s. The first sleep counts too: when the
                // load holds the pool's threads, it is the only one, and lasts the whole run.
                try await Task.sleep(until: started + .milliseconds(300), clock: clock)
                var delays: [Duration] = [clock.now - (started + .milliseconds(300))]
                let end = clock.now + .seconds(3)
                while clock.now < end && !load.stop.load(ordering: .relaxed) {
                    let start = clock.now
                    try await Task.sleep(for: .milliseconds(1), tolerance: .zero)
                    delays.append(clock.now - start - .milliseconds(1))
                }
                return delays
            }
            var all: [Duration] = []
            for try await delays in group { all += delays }
            return all.sorted()
        }
        func microseconds(_ d: Duration) -> Int64 {
            d.components.seconds * 1_000_000 + d.components.attoseconds / 1_000_000_000_000
        }
        let p99 = delays.isEmpty ? .zero : delays[delays.count * 99 / 100]
        return "delay p50-us \(microseconds(delays.isEmpty ? .zero : delays[delays.count / 2])) "
            + "p99-us \(microseconds(p99)) max-us \(microseconds(delays.last ?? .zero)) samples \(delays.count) "
            + "reads \(load.reads.load(ordering: .relaxed)) writes \(load.writes.load(ordering: .relaxed))"
    }
}
