import Dispatch
import Synchronization

/// Serial dispatch queues for reads that block (SQLite's and LMDB's calls, a PostgreSQL round
/// trip), each served by a thread of its own outside Swift's cooperative pool, which has one
/// thread per core: an async read waiting in SQLite never holds one of the pool's threads.
/// Reads beyond their number wait in the queues.
final class BlockingReads: Sendable {
    private let queues: [DispatchQueue]
    private let next = Mutex(0)

    init(label: String, threads: Int = 4) {
        queues = (0..<threads).map { DispatchQueue(label: "\(label).\($0)") }
    }

    /// For stores that do not bring their own: shared by the process.
    static let shared = BlockingReads(label: "DataStore.async-read")

    /// Runs `work` on one of the queues, in turn, and suspends until it returns.
    func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        let queue = queues[next.withLock { n in
            defer { n = (n + 1) % queues.count }
            return n
        }]
        return try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try work() }) }
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
