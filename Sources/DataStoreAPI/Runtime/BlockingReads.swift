import Foundation
import Synchronization

/// Threads of their own for reads that block (SQLite's and LMDB's calls, a PostgreSQL round
/// trip), outside Swift's cooperative pool, which has one thread per core: an async read
/// waiting in SQLite never holds one of the pool's threads. The threads take reads from one
/// queue in order, each as soon as it is free; reads beyond their number wait in the queue.
/// The threads start at the first read and end with the object.
final class BlockingReads: Sendable {
    private final class Jobs: @unchecked Sendable {
        // Guarded by `condition`.
        let condition = NSCondition()
        var waiting: [@Sendable () -> Void] = []
        var head = 0
        var closed = false
    }

    private let jobs = Jobs()
    private let threads: Int
    private let label: String
    private let started = Atomic<Bool>(false)

    init(label: String, threads: Int) {
        self.label = label
        self.threads = max(1, threads)
    }

    deinit {
        jobs.condition.lock()
        jobs.closed = true
        jobs.condition.broadcast()
        jobs.condition.unlock()
    }

    /// For stores that do not bring their own: shared by the process.
    static let shared = BlockingReads(label: "DataStore.async-read",
                                      threads: max(2, ProcessInfo.processInfo.activeProcessorCount))

    private func startThreads() {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return }
        for n in 0..<threads {
            let thread = Thread { [jobs] in Self.work(jobs) }
            thread.name = "\(label).\(n)"
            thread.start()
        }
    }

    private static func work(_ jobs: Jobs) {
        #if os(Linux)
        // A lower priority than the cooperative pool's threads (nice 5): when the reads keep
        // every core busy (decoding large results on as many threads as the store has read
        // connections), the app's tasks still get the CPU first and wake on time.
        // (On Linux the nice value is per thread, and 0 names the calling one.)
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 5)
        #endif
        while true {
            jobs.condition.lock()
            while jobs.head == jobs.waiting.count && !jobs.closed { jobs.condition.wait() }
            if jobs.head == jobs.waiting.count {
                jobs.condition.unlock()
                return
            }
            let job = jobs.waiting[jobs.head]
            jobs.head += 1
            if jobs.head == jobs.waiting.count {
                jobs.waiting.removeAll(keepingCapacity: true)
                jobs.head = 0
            }
            jobs.condition.unlock()
            job()
        }
    }

    /// Runs `work` on one of the threads and suspends until it returns.
    func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        startThreads()
        return try await withCheckedThrowingContinuation { continuation in
            jobs.condition.lock()
            jobs.waiting.append { continuation.resume(with: Result { try work() }) }
            jobs.condition.signal()
            jobs.condition.unlock()
        }
    }
}

extension DataStore {
    /// Runs `body` against one consistent snapshot, as ``read(_:)`` does, on threads shared by
    /// the process (a ``Store`` has its own), and suspends until it returns.
    public func readAsync<T: Sendable>(_ body: @escaping @Sendable (ReadAccessor) throws -> T) async throws -> T {
        try await BlockingReads.shared.run { try self.read(body) }
    }
}
