import Foundation
import Synchronization

/// The one way the toolkit runs blocking work off the caller's thread: threads of its own that
/// take jobs from one queue, in order, each as soon as it is free.
///
/// Every store call blocks (SQLite's and LMDB's calls, a PostgreSQL round trip), so none of it
/// runs on Swift's cooperative pool, which has one thread per core: an async read waiting in
/// SQLite never holds one of the pool's threads. Who runs on which threads is written down
/// once, in the Concurrency article:
/// - a store's async reads: its reader threads (one per core, or per PostgreSQL read
///   connection), at nice 5 so that the app's tasks get the CPU first;
/// - a store's `writeAsync` blocks: its writer thread, one, in submission order;
/// - the checking of a bulk insert's next batch while the backend stores one: one thread for the
///   process;
/// - a migration's second thread (the copy's writes, a verify's read-ahead, the checksum's
///   destination pass): one thread per worker.
///
/// The threads start at the first job and end once the object is released and the jobs given
/// before are done. One thread per long-lived job stream matters on glibc: it attaches a malloc
/// arena to each thread at its first allocation and keeps it for as long as the thread lives, so
/// jobs that landed on whichever pool thread was free kept several arenas' worth of freed memory
/// (a 10,000,000-item copy peaked at RssAnon 15 MiB on dispatch's threads, 13 MiB with one
/// thread).
package final class StoreThreads: Sendable {
    /// The jobs not started yet, and whether the owner was released; guarded by `condition`.
    private final class Jobs: @unchecked Sendable {
        // @unchecked: every field is read and written with `condition` locked.
        let condition = NSCondition()
        var waiting: [@Sendable () -> Void] = []
        var head = 0
        var released = false
    }

    private let jobs = Jobs()
    private let count: Int
    private let label: String
    private let niceness: Int32
    private let started = Atomic<Bool>(false)

    /// Threads named `label.n`, `count` of them, at `niceness` (0: the process's priority).
    package init(label: String, count: PositiveInt = 1, niceness: Int32 = 0) {
        self.label = label
        self.count = count.value
        self.niceness = niceness
    }

    deinit {
        jobs.condition.lock()
        jobs.released = true
        jobs.condition.broadcast()
        jobs.condition.unlock()
    }

    /// For stores that do not bring their own reader threads: shared by the process.
    package static let sharedReaders = StoreThreads(label: "DataStore.async-read", count: perCore, niceness: 5)

    /// One thread per core, and at least two.
    package static var perCore: PositiveInt {
        (try? PositiveInt(max(2, ProcessInfo.processInfo.activeProcessorCount))) ?? 2
    }

    /// Runs `job` on one of the threads after the jobs given before it.
    package func submit(_ job: @escaping @Sendable () -> Void) {
        startThreads()
        jobs.condition.lock()
        jobs.waiting.append(job)
        jobs.condition.signal()
        jobs.condition.unlock()
    }

    /// Runs `work` on one of the threads and suspends until it returns.
    package func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            submit { continuation.resume(with: Result { try work() }) }
        }
    }

    /// Waits until every job given before has run (with one thread: has returned), then
    /// `last` on one of the threads.
    package func waitForSubmittedJobs(then last: @escaping @Sendable () -> Void = {}) {
        let done = DispatchSemaphore(value: 0)
        submit {
            last()
            done.signal()
        }
        done.wait()
    }

    private func startThreads() {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return }
        for n in 0..<count {
            let thread = Thread { [jobs, niceness] in Self.work(jobs, niceness: niceness) }
            thread.name = count == 1 ? label : "\(label).\(n)"
            thread.start()
        }
    }

    private static func work(_ jobs: Jobs, niceness: Int32) {
        #if os(Linux)
        // On Linux the nice value is per thread, and 0 names the calling one.
        if niceness != 0 { _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, niceness) }
        #endif
        while true {
            jobs.condition.lock()
            while jobs.head == jobs.waiting.count && !jobs.released { jobs.condition.wait() }
            if jobs.head == jobs.waiting.count {
                jobs.condition.unlock()
                return
            }
            let job = jobs.waiting[jobs.head]
            // The slot lets go of the job (and what it captured) now, not when the queue next
            // empties: a queue that never empties (several streams of jobs) would hold them all.
            jobs.waiting[jobs.head] = {}
            jobs.head += 1
            if jobs.head == jobs.waiting.count {
                jobs.waiting.removeAll(keepingCapacity: true)
                jobs.head = 0
            }
            jobs.condition.unlock()
            job()
        }
    }
}

extension DataStore {
    /// Runs `body` against one consistent snapshot, as ``read(_:)`` does, on threads shared by
    /// the process (a ``Store`` has its own), and suspends until it returns.
    public func readAsync<T: Sendable>(_ body: @escaping @Sendable (ReadAccessor) throws -> T) async throws -> T {
        try await StoreThreads.sharedReaders.run { try self.read(body) }
    }
}
