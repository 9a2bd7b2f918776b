import Foundation

/// One thread of its own that runs the jobs it is given, one at a time and in order, for as long
/// as the worker is alive; the thread ends once the worker is released and its jobs are done.
///
/// A migration's second thread (the copy's writes, a verify's read-ahead, the checksum's
/// destination pass) runs here rather than on dispatch's pool. glibc attaches a malloc arena to
/// each thread at its first allocation (a new one while there are fewer than eight per core) and
/// keeps it attached for as long as the thread lives: jobs sent to a dispatch queue one after
/// the other land on whichever pool thread is free, and over a long copy several pool threads
/// each kept an arena's worth of freed memory (a
/// 10,000,000-item copy peaked at RssAnon 15 MiB on dispatch's threads, 13 MiB with one arena
/// in all). One thread per worker, ended with it, holds one arena at a time: glibc hands an
/// ended thread's arena to the next thread that starts.
final class WorkerThread: Sendable {
    /// The jobs not started yet, and whether the worker was released; guarded by `condition`.
    private final class Jobs: @unchecked Sendable {
        // @unchecked: every field is read and written with `condition` locked.
        let condition = NSCondition()
        var waiting: [@Sendable () -> Void] = []
        var released = false
    }

    private let jobs = Jobs()

    /// Starts the thread.
    init() {
        let jobs = self.jobs
        let thread = Thread {
            while true {
                jobs.condition.lock()
                while jobs.waiting.isEmpty && !jobs.released { jobs.condition.wait() }
                if jobs.waiting.isEmpty {
                    jobs.condition.unlock()
                    return
                }
                let job = jobs.waiting.removeFirst()
                jobs.condition.unlock()
                job()
            }
        }
        thread.start()
    }

    /// Runs `job` on the thread after the jobs given before it.
    func async(_ job: @escaping @Sendable () -> Void) {
        jobs.condition.lock()
        jobs.waiting.append(job)
        jobs.condition.signal()
        jobs.condition.unlock()
    }

    /// The thread runs the jobs it was given, then ends.
    deinit {
        jobs.condition.lock()
        jobs.released = true
        jobs.condition.signal()
        jobs.condition.unlock()
    }
}
