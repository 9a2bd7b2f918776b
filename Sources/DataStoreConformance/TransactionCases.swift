import DataStoreAPI
import Synchronization
import Foundation

struct DeliberateFailure: Error {}

enum TransactionCases {
    static func writeCommitsWhenTheBlockReturns(_ c: ConformanceContext) throws {
        let store = try c.open()
        let n = try store.writeSync { w -> Int in
            try w.insert(["key": "a"], into: "Keyed")
            try w.insert(["key": "b"], into: "Keyed")
            return 2
        }
        c.expectEqual(n, 2)
        c.expectEqual(try store.read { try $0.count(FetchRequest("Keyed")) }, 2)
    }

    static func writeRollsBackEverythingWhenTheBlockThrows(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { try $0.insert(["key": "keep", "value": 1], into: "Keyed") }
        do {
            try store.writeSync { w in
                try w.insert(["key": "a"], into: "Keyed")
                try w.update("Keyed", key: "keep", set: ["value": 2])
                _ = try w.delete("Keyed", key: "keep")
                throw DeliberateFailure()
            }
            c.expect(false, "the error should propagate")
        } catch is DeliberateFailure {}
        c.expectEqual(
            try store.read { try $0.fetch(FetchRequest("Keyed")) },
            [["key": "keep", "value": 1, "note": .null]])
    }

    static func aCaughtErrorInsideTheBlockKeepsTheRestOfTheTransaction(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { w in
            try w.insert(["key": "a"], into: "Keyed")
            do { try w.insert(["key": "a"], into: "Keyed") } catch let error as StoreError {
                c.expectEqual(error.code, .keyExists)
            }
            try w.insert(["key": "b"], into: "Keyed")
        }
        c.expectEqual(try store.read { try $0.count(FetchRequest("Keyed")) }, 2)
    }

    static func writeReadsItsOwnUncommittedWrites(_ c: ConformanceContext) throws {
        let store = try c.open()
        try Fixtures.load(Fixtures.items(30), into: store)
        try store.writeSync { w in
            try w.insert(["id": 1000, "name": "zzz", "score": 99], into: "Item")
            _ = try w.delete("Item", key: 0)
            c.expect(try w.get("Item", key: 1000) != nil)
            c.expect(try w.get("Item", key: 0) == nil)
            c.expectEqual(try w.count(FetchRequest("Item")), 30)
            c.expectEqual(try w.first(FetchRequest("Item", sort: [.descending("score")]))?["id"], 1000)
            c.expectEqual(try w.scan("Item", after: 999, limit: 5).map(\.["id"]), [1000])
        }
    }

    static func aReadSeesOneSnapshotWhileAWriterCommits(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { try $0.insert(["key": "a", "value": 1], into: "Keyed") }
        let (before, after) = try store.read { r -> (Int, Value) in
            let before = try r.count(FetchRequest("Keyed"))
            let writer = Thread.detachNewThreadAndWait {
                try store.writeSync { w in
                    try w.insert(["key": "b"], into: "Keyed")
                    try w.update("Keyed", key: "a", set: ["value": 2])
                }
            }
            c.expect(writer == nil, "the concurrent write failed: \(String(describing: writer))")
            c.expectEqual(try r.count(FetchRequest("Keyed")), before, "count inside the same read")
            return (before, try r.get("Keyed", key: "a")?["value"] ?? .null)
        }
        c.expectEqual(before, 1)
        c.expectEqual(after, 1, "the read still sees the old value")
        c.expectEqual(try store.read { try $0.get("Keyed", key: "a")?["value"] }, 2)
    }

    static func writeSyncInsideAReadThrowsReentrantCall(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.read { _ in
            c.expectError(.reentrantCall, naming: "writeSync") {
                try store.writeSync { try $0.insert(["key": "a"], into: "Keyed") }
            }
        }
        c.expectEqual(try store.read { try $0.count(FetchRequest("Keyed")) }, 0)
    }

    static func writeSyncInsideAWriteThrowsReentrantCall(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.writeSync { _ in
            c.expectError(.reentrantCall) { try store.writeSync { _ in } }
            c.expectError(.reentrantCall) { try store.close() }
            c.expectError(.reentrantCall) { try store.waitForPendingWrites() }
        }
    }

    /// A task started inside a block is not inside it: its write is the store's like any other,
    /// made once the block's transaction lets it (a write on the block's own thread is refused).
    static func aTaskStartedInsideABlockWritesLikeAnyOther(_ c: ConformanceContext) async throws {
        let store = try c.open()
        // Started once: a block that runs again (after a conflict, on PostgreSQL) starts no second
        // task.
        let started = Mutex<Task<Void, any Error>?>(nil)
        try store.writeSync { w in
            try w.insert(["key": "inside"], into: "Keyed")
            started.withLock { task in
                guard task == nil else { return }
                task = Task { try store.writeSync { try $0.insert(["key": "task"], into: "Keyed") } }
            }
        }
        do {
            try await started.withLock { $0 }?.value
        } catch {
            c.expect(false, "the task's write failed: \(error)")
        }
        c.expectEqual(try store.read { try $0.fetch(FetchRequest("Keyed")).compactMap { $0["key"] } },
                      ["inside", "task"])
    }

    static func anAccessorUsedAfterItsBlockThrowsExpired(_ c: ConformanceContext) throws {
        let store = try c.open()
        let reader = try store.read { $0 }
        let writer = try store.writeSync { $0 }
        c.expectError(.accessorExpired) { _ = try reader.get("Keyed", key: "a") }
        c.expectError(.accessorExpired) { try writer.insert(["key": "a"], into: "Keyed") }
        c.expectEqual(try store.read { try $0.count(FetchRequest("Keyed")) }, 0)
    }

    static func operationsOnAClosedStoreThrowClosed(_ c: ConformanceContext) throws {
        let store = try c.open()
        try store.close()
        try store.close()
        c.expect(store.isClosed)
        c.expectError(.closed) { _ = try store.read { _ in 1 } }
        c.expectError(.closed) { try store.writeSync { _ in } }
        let result = Mutex<Result<Void, any Error>?>(nil)
        store.writeAsync({ _ in }, completion: { r in result.withLock { $0 = r } })
        if case .failure(let error as StoreError)? = result.withLock({ $0 }) {
            c.expectEqual(error.code, .closed)
        } else {
            c.expect(false, "writeAsync on a closed store should fail at once")
        }
    }

    static let all: [ConformanceCase] = [
        ConformanceCase("Transactions", "writeCommitsWhenTheBlockReturns", writeCommitsWhenTheBlockReturns),
        ConformanceCase(
            "Transactions", "writeRollsBackEverythingWhenTheBlockThrows",
            writeRollsBackEverythingWhenTheBlockThrows),
        ConformanceCase(
            "Transactions", "aCaughtErrorInsideTheBlockKeepsTheRestOfTheTransaction",
            aCaughtErrorInsideTheBlockKeepsTheRestOfTheTransaction),
        ConformanceCase(
            "Transactions", "writeReadsItsOwnUncommittedWrites", writeReadsItsOwnUncommittedWrites),
        ConformanceCase(
            "Transactions", "aReadSeesOneSnapshotWhileAWriterCommits", aReadSeesOneSnapshotWhileAWriterCommits
        ),
        ConformanceCase(
            "Transactions", "writeSyncInsideAReadThrowsReentrantCall", writeSyncInsideAReadThrowsReentrantCall
        ),
        ConformanceCase(
            "Transactions", "writeSyncInsideAWriteThrowsReentrantCall",
            writeSyncInsideAWriteThrowsReentrantCall),
        ConformanceCase(
            "Transactions", "aTaskStartedInsideABlockWritesLikeAnyOther",
            aTaskStartedInsideABlockWritesLikeAnyOther),
        ConformanceCase(
            "Transactions", "anAccessorUsedAfterItsBlockThrowsExpired",
            anAccessorUsedAfterItsBlockThrowsExpired),
        ConformanceCase(
            "Transactions", "operationsOnAClosedStoreThrowClosed", operationsOnAClosedStoreThrowClosed),
    ]
}

extension Thread {
    /// Runs `body` on a new thread and waits for it; returns the error it threw, if any.
    static func detachNewThreadAndWait(_ body: @escaping @Sendable () throws -> Void) -> (any Error)? {
        let done = DispatchSemaphore(value: 0)
        let failure = Mutex<(any Error)?>(nil)
        Thread.detachNewThread {
            do { try body() } catch { failure.withLock { $0 = error } }
            done.signal()
        }
        done.wait()
        return failure.withLock { $0 }
    }
}
