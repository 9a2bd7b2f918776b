import Foundation
import Synchronization

/// Wakes the store's feed readers and live observers when a write may have committed: at once
/// for this process's commits; for other processes' commits, by the engine's notifications
/// (``CommitNotifying``) where it has them, and otherwise by polling the engine's commit
/// counter (``CommitCounting``) while anyone waits. Polling is also the fallback when the
/// notifications stop (a lost connection).
///
/// A wake-up only says "look again": readers compare the feed's head with their token and
/// observers the counter with the one they last saw, so a spurious wake-up costs one read and
/// a missed one is impossible (waiters read the generation before they look).
final class ChangeHub: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        /// Threads blocked in ``wait(after:timeout:)`` (a migration's follower).
        var blockedWaiters = 0
        var nextWaiter: UInt64 = 0
        var lastCounter: UInt64?
        var polling = false
        var closed = false
        var interval: Duration = .milliseconds(5)
        var subscription: (any CommitSubscription)?
        var subscribed = false
        var notificationsAllowed = true
    }

    private let state = Mutex(State())
    private let counter: @Sendable () -> UInt64?
    /// Whether the engine saw commits that its feed does not hand out yet.
    private let unreleased: @Sendable () -> Bool
    private let subscribe: (@Sendable (@escaping @Sendable () -> Void) -> (any CommitSubscription)?)?
    /// The thread that polls (and starts the notifications, which opens a connection): one of
    /// the hub's own, never the caller's or a pool's.
    private let poller = StoreThreads(label: "DataStore.changes.poll")
    /// Signalled at every wake-up, for the poller's pause and the blocked waiters.
    private let changed = NSCondition()

    /// - Parameters:
    ///   - counter: the engine's commit counter, or `nil` when it cannot be read now.
    ///   - subscribe: starts the engine's commit notifications, when it has them.
    init(counter: @escaping @Sendable () -> UInt64?,
         unreleased: @escaping @Sendable () -> Bool = { false },
         subscribe: (@Sendable (@escaping @Sendable () -> Void) -> (any CommitSubscription)?)? = nil) {
        self.counter = counter
        self.unreleased = unreleased
        self.subscribe = subscribe
    }

    /// Whether other processes' commits arrive as notifications (no polling while idle).
    var isNotified: Bool { state.withLock { $0.subscription?.isActive ?? false } }

    /// Starts the notifications at the first wait; returns whether they are active.
    private func notificationsActive() -> Bool {
        guard let subscribe else { return false }
        let start = state.withLock { state -> Bool in
            guard state.notificationsAllowed else { return false }
            defer { state.subscribed = true }
            return !state.subscribed && !state.closed
        }
        if start {
            let subscription = subscribe { [weak self] in self?.signal() }
            let closed = state.withLock { state -> Bool in
                state.subscription = subscription
                return state.closed
            }
            if closed { subscription?.cancel() }
        }
        return state.withLock { $0.subscription?.isActive ?? false }
    }

    /// Bumped at every possible change.
    var generation: UInt64 { state.withLock { $0.generation } }

    /// The engine's commit counter now.
    func currentCounter() -> UInt64? { counter() }

    /// Whether the engine's notifications may be used (when it has them); off, observers poll.
    var notificationsAllowed: Bool {
        get { state.withLock { $0.notificationsAllowed } }
        set {
            let stopped = state.withLock { state -> (any CommitSubscription)? in
                state.notificationsAllowed = newValue
                guard !newValue else { return nil }
                state.subscribed = false
                defer { state.subscription = nil }
                return state.subscription
            }
            stopped?.cancel()
        }
    }

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
        changed.lock()
        changed.broadcast()
        changed.unlock()
    }

    /// Blocks the calling thread (one of its own, as a migration's follower runs on) until the
    /// generation moves past `generation`, the store closes, or `timeout` passes; the hub polls
    /// or listens for other processes' commits meanwhile. Returns whether the generation moved.
    func wait(after generation: UInt64, timeout: Duration) -> Bool {
        let (ready, startPolling) = state.withLock { state -> (Bool, Bool) in
            if state.generation != generation || state.closed { return (true, false) }
            state.blockedWaiters += 1
            defer { state.polling = true }
            return (false, !state.polling)
        }
        if ready { return true }
        defer { state.withLock { $0.blockedWaiters -= 1 } }
        if startPolling { schedulePoll() }
        let deadline = Date.deadline(after: timeout)
        changed.lock()
        defer { changed.unlock() }
        while true {
            let moved = state.withLock { $0.generation != generation || $0.closed }
            if moved { return true }
            if !changed.wait(until: deadline) { return state.withLock { $0.generation != generation } }
        }
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

    /// Polls the commit counter while anyone waits, unless notifications arrive instead; then
    /// it looks only every second whether they still do. On the hub's own thread: starting the
    /// notifications opens a connection, which must not block the caller's thread (a waiter's,
    /// on the cooperative pool), and the pauses between polls are waits on a condition that a
    /// wake-up or the store's close ends.
    private func schedulePoll() {
        poller.submit { [self] in pollWhileWaited() }
    }

    private func pollWhileWaited() {
        while true {
            // Entries that wait for lower numbers are released without a notification: poll.
            let notified = notificationsActive() && !unreleased()
            let interval = notified ? Duration.seconds(1) : state.withLock { $0.interval }
            changed.lock()
            if !state.withLock({ $0.closed }) { _ = changed.wait(until: Date.deadline(after: max(interval, .microseconds(100)))) }
            changed.unlock()
            if notified, isNotified, !unreleased() {
                let keepWaiting = state.withLock { state -> Bool in
                    state.polling = Self.isWaitedFor(state)
                    return state.polling
                }
                if keepWaiting { continue }
                return
            }
            // While commits wait for release, every poll wakes the readers: one may have read
            // before the release that this poll's counter already includes.
            let waitingBefore = unreleased()
            let value = counter()
            let (isChanged, keepPolling) = state.withLock { state -> (Bool, Bool) in
                let isChanged = value != nil && (value != state.lastCounter || waitingBefore)
                if isChanged { state.lastCounter = value }
                state.polling = Self.isWaitedFor(state)
                return (isChanged, state.polling)
            }
            if isChanged { signal() }
            if !keepPolling { return }
        }
    }

    /// Whether anyone waits for a change of an open store.
    private static func isWaitedFor(_ state: State) -> Bool {
        (!state.waiters.isEmpty || state.blockedWaiters > 0) && !state.closed
    }

    /// The store is closing: wake everyone for good.
    func close() {
        let subscription = state.withLock { $0.subscription }
        subscription?.cancel()
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.closed = true
            state.generation &+= 1
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in woken { waiter.resume() }
        changed.lock()
        changed.broadcast()
        changed.unlock()
    }
}
