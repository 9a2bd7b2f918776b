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
                let ran = try await probe(store)
                try store.close()
                outcome.withLock { $0 = ran ? 0 : 1 }
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
        let reads = min(4, ProcessInfo.processInfo.activeProcessorCount + 1)
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
}
