import Foundation

/// One pointer that each thread keeps for itself (a POSIX thread-specific key, one for the
/// process per slot), set for the length of a call and put back after it: what a write's retry
/// flag (``WriteRun``) and the blocks a thread is inside (``ActiveBlocks``) are kept in. Cheaper
/// than a task-local value, which allocates twice to be pushed on a thread without a task.
struct ThreadSlot {
    private let key: pthread_key_t

    /// A new key. Fails only when the process has used up its thread-specific keys
    /// (`PTHREAD_KEYS_MAX`, 1,024 on Linux); the package makes two.
    init() {
        var key = pthread_key_t()
        let status = pthread_key_create(&key, nil)
        precondition(status == 0, "pthread_key_create failed (\(status)): no thread-specific key is left")
        self.key = key
    }

    /// The calling thread's value; `nil` until a ``with(_:_:)`` of this thread sets one.
    var value: UnsafeMutableRawPointer? { pthread_getspecific(key) }

    /// Runs `body` with the calling thread's value set to `value`, then puts back what it was.
    /// Inlined: a call with a tuple's type (a write's result and its commit in flight) made the
    /// runtime look that type's metadata up at every write.
    @inline(__always)
    func with<T>(_ value: UnsafeRawPointer?, _ body: () throws -> T) rethrows -> T {
        let outer = pthread_getspecific(key)
        pthread_setspecific(key, value)
        defer { pthread_setspecific(key, outer) }
        return try body()
    }
}
