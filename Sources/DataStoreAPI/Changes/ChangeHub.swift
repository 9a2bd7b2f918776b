import Dispatch
import Synchronization

/// Wakes the store's feed readers and live observers when a write may have committed: at once
/// for this process's commits, and by polling the engine's commit counter
/// (``CommitCounting``) for other processes' commits, while anyone waits.
///
/// A wake-up only says "look again": readers compare the feed's head with their token and
/// observers the counter with the one they last saw, so a spurious wake-up costs one read and
/// a missed one is impossible (waiters read the generation before they look).
final class ChangeHub: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
        var lastCounter: UInt64?
        var polling = false
        var closed = false
        var interval: Duration = .milliseconds(5)
    }

    private let state = Mutex(State())
    private let counter: @Sendable () -> UInt64?
    private let queue = DispatchQueue(label: "DataStore.changes.poll")

    /// - Parameter counter: the engine's commit counter, or `nil` when it cannot be read now.
    init(counter: @escaping @Sendable () -> UInt64?) {
        self.counter = counter
    }

    /// Bumped at every possible change.
    var generation: UInt64 { state.withLock { $0.generation } }

    /// The engine's commit counter now.
    func currentCounter() -> UInt64? { counter() }

    var pollInterval: Duration {
        get { state.withLock { $0.interval } }
        set { state.withLock { $0.interval = newValue } }
    }

    /// Something may have committed: wake every waiter.
    func signal() {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.generation &+= 1
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in woken { waiter.resume() }
    }

    /// Waits until the generation moves past `generation`, the store closes, or the task is
    /// cancelled.
    func wait(after generation: UInt64) async {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let (ready, startPolling) = state.withLock { state -> (Bool, Bool) in
                    if state.generation != generation || state.closed || Task.isCancelled { return (true, false) }
                    state.waiters[id] = continuation
                    defer { state.polling = true }
                    return (false, !state.polling)
                }
                if ready { continuation.resume() }
                if startPolling { schedulePoll() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }

    /// Polls the commit counter while anyone waits.
    private func schedulePoll() {
        let interval = state.withLock { $0.interval }
        let nanoseconds = max(100_000, Int(interval.components.seconds) * 1_000_000_000
            + Int(interval.components.attoseconds / 1_000_000_000))
        queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [self] in
            let value = counter()
            let (changed, keepPolling) = state.withLock { state -> (Bool, Bool) in
                let changed = value != nil && value != state.lastCounter
                if changed { state.lastCounter = value }
                state.polling = !state.waiters.isEmpty && !state.closed
                return (changed, state.polling)
            }
            if changed { signal() }
            if keepPolling { schedulePoll() }
        }
    }

    /// The store is closing: wake everyone for good.
    func close() {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.closed = true
            state.generation &+= 1
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in woken { waiter.resume() }
    }
}
