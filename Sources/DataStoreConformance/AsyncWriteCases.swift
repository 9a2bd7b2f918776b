import DataStoreAPI
import Foundation
import Synchronization

enum AsyncWriteCases {
    static func writeAsyncBlocksRunInFIFOOrder(_ c: ConformanceContext) throws {
        let store = try c.open()
        let order = Mutex<[Int]>([])
        for i in 0..<50 {
            store.writeAsync(
                { w in
                    try w.save(["key": "counter", "value": .int(Int64(i))], into: "Keyed")
                    order.withLock { $0.append(i) }
                }, completion: { _ in })
        }
        try store.waitForPendingWrites()
        c.expectEqual(order.withLock { $0 }, Array(0..<50))
        c.expectEqual(try store.read { try $0.get("Keyed", key: "counter")?["value"] }, 49)
    }

    static func writeAsyncReportsAnErrorAndRollsBack(_ c: ConformanceContext) async throws {
        let store = try c.open()
        let outcome = try await withCheckedThrowingContinuation {
            (k: CheckedContinuation<Result<Int, any Error>, any Error>) in
            store.writeAsync(
                { w -> Int in
                    try w.insert(["key": "a"], into: "Keyed")
                    try w.insert(["key": "a"], into: "Keyed")
                    return 1
                }, completion: { k.resume(returning: $0) })
        }
        if case .failure(let error as StoreError) = outcome {
            c.expectEqual(error.code, .keyExists)
        } else {
            c.expect(false, "expected keyExists, got \(outcome)")
        }
        c.expectEqual(try store.read { try $0.count(FetchRequest("Keyed")) }, 0)
    }

    static func awaitedWriteAsyncReturnsItsValue(_ c: ConformanceContext) async throws {
        let store = try c.open()
        let value = try await store.writeAsync { w -> Int in
            try w.insert(["key": "a", "value": 7], into: "Keyed")
            return try w.count(FetchRequest("Keyed"))
        }
        c.expectEqual(value, 1)
        c.expectEqual(try store.read { try $0.get("Keyed", key: "a")?["value"] }, 7)
    }

    static func waitForPendingWritesWaitsForEveryEnqueuedWrite(_ c: ConformanceContext) throws {
        let store = try c.open()
        for i in 0..<200 {
            store.enqueueWrite { w in try w.insert(["key": .string("k\(i)")], into: "Keyed") }
        }
        try store.waitForPendingWrites()
        c.expectEqual(try store.read { try $0.count(FetchRequest("Keyed")) }, 200)
    }

    static func closeDrainsPendingWritesAndNothingIsLost(_ c: ConformanceContext) throws {
        let store = try c.open()
        let completed = Mutex(0)
        for i in 0..<100 {
            store.writeAsync(
                { w in try w.insert(["key": .string("k\(i)")], into: "Keyed") },
                completion: { r in if case .success = r { completed.withLock { $0 += 1 } } })
        }
        try store.close()
        c.expectEqual(completed.withLock { $0 }, 100)
        let reopened = try c.open()
        c.expectEqual(try reopened.read { try $0.count(FetchRequest("Keyed")) }, 100)
    }

    static func writeSyncAndWriteAsyncInterleaveWithoutLoss(_ c: ConformanceContext) throws {
        let store = try c.open()
        for i in 0..<50 {
            store.enqueueWrite { w in try w.insert(["key": .string("a\(i)")], into: "Keyed") }
            try store.writeSync { w in try w.insert(["key": .string("s\(i)")], into: "Keyed") }
        }
        try store.waitForPendingWrites()
        c.expectEqual(try store.read { try $0.count(FetchRequest("Keyed")) }, 100)
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("Async writes", "writeAsyncBlocksRunInFIFOOrder", writeAsyncBlocksRunInFIFOOrder),
        ConformanceCase(
            "Async writes", "writeAsyncReportsAnErrorAndRollsBack", writeAsyncReportsAnErrorAndRollsBack),
        ConformanceCase("Async writes", "awaitedWriteAsyncReturnsItsValue", awaitedWriteAsyncReturnsItsValue),
        ConformanceCase(
            "Async writes", "waitForPendingWritesWaitsForEveryEnqueuedWrite",
            waitForPendingWritesWaitsForEveryEnqueuedWrite),
        ConformanceCase(
            "Async writes", "closeDrainsPendingWritesAndNothingIsLost",
            closeDrainsPendingWritesAndNothingIsLost),
        ConformanceCase(
            "Async writes", "writeSyncAndWriteAsyncInterleaveWithoutLoss",
            writeSyncAndWriteAsyncInterleaveWithoutLoss),
    ]
}
