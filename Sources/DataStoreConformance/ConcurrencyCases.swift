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
        ConformanceCase(
            "Concurrency", "manyReaderThreadsAndAWriterSeeOnlyCommittedStates",
            manyReaderThreadsAndAWriterSeeOnlyCommittedStates),
        ConformanceCase(
            "Concurrency", "manyTasksWriteAndReadConcurrently", manyTasksWriteAndReadConcurrently),
    ]
}
