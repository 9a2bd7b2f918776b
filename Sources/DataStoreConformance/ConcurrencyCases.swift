import DataStoreAPI
import Foundation
import Synchronization

enum ConcurrencyCases {
    static func manyReaderThreadsAndAWriterSeeOnlyCommittedStates(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { w in
            for i in 0..<20 { try w.insert(["key": .string("k\(i)"), "value": 0], into: "Keyed") }
        }
        let failures = Mutex<[String]>([])
        let group = DispatchGroup()
        for t in 0..<8 {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                do {
                    for _ in 0..<100 {
                        let values = try store.read { try $0.fetch(FetchRequest("Keyed")).map(\.["value"]) }
                        if Set(values).count != 1 || values.count != 20 {
                            failures.withLock { $0.append("thread \(t) saw a torn state \(values)") }
                        }
                    }
                } catch {
                    failures.withLock { $0.append("thread \(t): \(error)") }
                }
            }
        }
        for round in 1...50 {
            try store.writeSync { w in
                for i in 0..<20 {
                    try w.update("Keyed", key: .string("k\(i)"), set: ["value": .int(Int64(round))])
                }
            }
        }
        group.wait()
        c.expectEqual(failures.withLock { $0 }, [])
        c.expectEqual(try store.read { try $0.get("Keyed", key: "k0")?["value"] }, 50)
    }

    static func manyTasksWriteAndReadConcurrently(_ c: ConformanceContext) async throws {
        let store = try c.open()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for t in 0..<16 {
                group.addTask {
                    for i in 0..<20 {
                        if i % 2 == 0 {
                            try store.writeSync {
                                try $0.insert(["key": .string("t\(t)-\(i)")], into: "Keyed")
                            }
                        } else {
                            _ = try await store.writeAsync { w in
                                try w.insert(["key": .string("t\(t)-\(i)")], into: "Keyed")
                            }
                        }
                        _ = try store.read { try $0.count(FetchRequest("Keyed")) }
                    }
                }
            }
            try await group.waitForAll()
        }
        c.expectEqual(try store.read { try $0.count(FetchRequest("Keyed")) }, 16 * 20)
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("Concurrency", "asyncReadsAndWritesLeaveTheCooperativePoolFree",
                        asyncReadsAndWritesLeaveTheCooperativePoolFree),
        ConformanceCase(
            "Concurrency", "manyReaderThreadsAndAWriterSeeOnlyCommittedStates",
            manyReaderThreadsAndAWriterSeeOnlyCommittedStates),
        ConformanceCase(
            "Concurrency", "manyTasksWriteAndReadConcurrently", manyTasksWriteAndReadConcurrently),
    ]
}

extension ConcurrencyCases {
    /// Async reads and writes run on threads the store owns: while more of them are blocked
    /// inside their blocks than Swift's cooperative pool has threads (one per core), a new
    /// task still runs. (The synchronous API called from tasks would hold every thread of the
    /// pool, and the probe task would not start.)
    static func asyncReadsAndWritesLeaveTheCooperativePoolFree(_ c: ConformanceContext) async throws {
        let store = try c.open()
        try Fixtures.load(Fixtures.items(20, seed: 3), into: store)
        let gate = DispatchSemaphore(value: 0)
        let running = SharedCount()
        let reads = min(4, ProcessInfo.processInfo.activeProcessorCount + 1)
        var tasks: [Task<Int, any Error>] = []
        for n in 0...reads {
            tasks.append(Task {
                let block = { @Sendable (reader: ReadAccessor) throws -> Int in
                    running.value.withLock { $0 += 1 }
                    gate.wait()
                    return try reader.count(FetchRequest("Item"))
                }
                return n < reads ? try await store.readAsync(block) : try await store.writeAsync { try block($0) }
            })
        }
        // Should the blocks hold the pool's threads, nothing below could run: a timer off the
        // pool opens the gate after 10 s, and the probe then finds it opened.
        let opened = SharedCount()
        let open = { @Sendable in
            if opened.value.withLock({ count in defer { count = 1 }; return count == 0 }) {
                for _ in 0...reads { gate.signal() }
            }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + 10, execute: open)
        let deadline = Date(timeIntervalSinceNow: 10)
        while running.value.withLock({ $0 }) < reads + 1 && Date() < deadline {
            try await Task.sleep(for: .milliseconds(1))
        }
        c.expectEqual(running.value.withLock { $0 }, reads + 1, "async blocks blocked at once")
        let probeRanWhileBlocked = await Task.detached { opened.value.withLock { $0 } == 0 }.value
        c.expect(probeRanWhileBlocked, "a task ran while \(reads + 1) async blocks were blocked")
        open()
        for task in tasks { c.expectEqual(try await task.value, 20) }
    }
}

/// A count shared by tasks and threads.
private final class SharedCount: Sendable {
    let value = Mutex(0)
}
