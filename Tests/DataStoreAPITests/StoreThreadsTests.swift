import Foundation
@_spi(Backend) import DataStoreAPI
import Testing

/// Blocking work runs on ``StoreThreads``: with one thread, all of an owner's jobs on it, in order
/// (so that glibc attaches one malloc arena to it, not one per pool thread a job lands on), and
/// a thread that ends once its owner is released (so that the next one takes its arena over
/// instead of adding one).
struct StoreThreadsTests {
    /// What the jobs saw: the order they ran in and the thread each ran on.
    ///
    /// `@unchecked Sendable`: both arrays are read and written with `lock` held.
    private final class Seen: @unchecked Sendable {
        private let lock = NSLock()
        private var order: [Int] = []
        private var threads: [Thread] = []

        func note(_ job: Int) {
            lock.withLock {
                order.append(job)
                threads.append(Thread.current)
            }
        }

        var jobs: [Int] { lock.withLock { order } }
        var seenThreads: [Thread] { lock.withLock { threads } }
    }

    @Test func jobsRunInOrderOnOneThreadThatEndsWithTheWorker() async throws {
        let seen = Seen()
        let allRan = DispatchSemaphore(value: 0)
        do {
            let worker = StoreThreads(label: "test.worker")
            for job in 0..<200 {
                worker.submit {
                    seen.note(job)
                    if job == 199 { allRan.signal() }
                }
            }
        }
        // The worker is released with jobs still queued: they run all the same.
        allRan.wait()
        #expect(seen.jobs == Array(0..<200))
        let threads = seen.seenThreads
        let first = try #require(threads.first)
        #expect(threads.allSatisfy { $0 === first })
        // It ends after its last job, once released.
        let deadline = ContinuousClock.now + .seconds(10)
        while !first.isFinished && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(first.isFinished)
    }

    @Test func aWorkerAliveKeepsItsThreadWaitingForJobs() async throws {
        let seen = Seen()
        let worker = StoreThreads(label: "test.worker")
        let ran = DispatchSemaphore(value: 0)
        worker.submit {
            seen.note(0)
            ran.signal()
        }
        ran.wait()
        try await Task.sleep(for: .milliseconds(50))
        let thread = try #require(seen.seenThreads.first)
        #expect(!thread.isFinished)
        // A job given after a pause runs on the same thread.
        worker.submit {
            seen.note(0)
            ran.signal()
        }
        ran.wait()
        let threads = seen.seenThreads
        #expect(threads.count == 2 && threads[1] === thread)
        withExtendedLifetime(worker) {}
    }

    @Test func waitingForSubmittedJobsWaitsForEachOfThemOnEveryThread() async throws {
        let threads = StoreThreads(label: "test.pool", count: 3)
        let seen = Seen()
        for job in 0..<30 {
            threads.submit {
                Thread.sleep(forTimeInterval: 0.001)
                seen.note(job)
            }
        }
        threads.waitForSubmittedJobs()
        // With several threads, the wait's own job may start before the last ones end; what it
        // promises is that every job given before it has started. Each of them ends soon after.
        let deadline = ContinuousClock.now + .seconds(10)
        while seen.jobs.count < 30 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
        #expect(Set(seen.jobs) == Set(0..<30))
        #expect(Set(seen.seenThreads.map(ObjectIdentifier.init)).count <= 3)
        let answer = try await threads.run { 6 * 7 }
        #expect(answer == 42)
    }

    /// What a job captured is let go once the job has run, also while jobs are still queued
    /// behind it (a queue that never empties must not hold every job it ran: several stores'
    /// bulk inserts share one thread for their batches checked ahead).
    @Test func aJobThatRanLetsGoOfWhatItCapturedWhileOthersWait() {
        final class Captured: Sendable {}
        weak var captured: Captured?
        let worker = StoreThreads(label: "test.worker")
        let secondRunning = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        do {
            let object = Captured()
            captured = object
            worker.submit { _ = object }
        }
        worker.submit {
            secondRunning.signal()
            release.wait()
        }
        // A third job waits behind the second, so the queue is not empty.
        worker.submit {}
        secondRunning.wait()
        #expect(captured == nil, "the first job's closure is still held by the queue")
        release.signal()
        worker.waitForSubmittedJobs()
    }
}
