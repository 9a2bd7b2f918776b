@_spi(Backend) import DataStoreAPI
import Foundation

/// The store that serves a ``SwitchingStore``'s app, and the app's writes in flight to it.
///
/// A cutover ``hold()``s the gate: new writes wait (async ones are queued in order) and the
/// running ones finish. ``release(to:)`` then names the store that serves from now on and lets
/// the waiting writes through to it, the queued async writes first.
final class WriteGate: @unchecked Sendable {
    // @unchecked: every field is read and written with `condition` locked.
    private let condition = NSCondition()
    private var serving: any DataStore
    private var holding = false
    private var activeWrites = 0
    private var heldWrites: [(any DataStore) -> Void] = []
    private var lastWrite = ContinuousClock.now

    init(serving: any DataStore) {
        self.serving = serving
    }

    /// The store serving now.
    var store: any DataStore { condition.withLock { serving } }

    /// When the app last started a write.
    var lastAppWrite: ContinuousClock.Instant { condition.withLock { lastWrite } }

    /// Runs a synchronous write on the serving store, waiting while the gate is held.
    func writeSync<T>(_ body: (WriteAccessor) throws -> T) throws -> T {
        let current = store
        // A write inside a block of the serving store is refused by that store; waiting for a
        // cutover here would wait for this very block.
        if Store.hasOpenBlock(of: current) { return try current.writeSync(body) }
        let store = enter()
        defer { leave() }
        return try store.writeSync(body)
    }

    /// Sends an async write to the serving store, or queues it while the gate is held.
    func writeAsync<T: Sendable>(_ body: @escaping @Sendable (WriteAccessor) throws -> T,
                                 completion: @escaping @Sendable (Result<T, any Error>) -> Void) {
        condition.lock()
        lastWrite = .now
        if holding {
            // Held until the cutover ends, then sent, in order, to the store that serves.
            heldWrites.append { [self] store in self.submit(body, completion, to: store) }
            condition.unlock()
            return
        }
        activeWrites += 1
        let store = serving
        condition.unlock()
        submit(body, completion, to: store)
    }

    /// The serving store once the gate is not held.
    func storeWhenOpen() -> any DataStore {
        condition.lock()
        defer { condition.unlock() }
        while holding { condition.wait() }
        return serving
    }

    /// Holds new writes and waits until the running ones finished.
    func hold() {
        condition.lock()
        holding = true
        while activeWrites > 0 { condition.wait() }
        condition.unlock()
    }

    /// Lets writes go on, to `store` from now on (to the same store when `nil`), the held async
    /// writes first, in order.
    func release(to store: (any DataStore)?) {
        condition.lock()
        if let store { serving = store }
        let held = heldWrites
        heldWrites = []
        activeWrites += held.count
        let target = serving
        for write in held { write(target) }
        holding = false
        condition.broadcast()
        condition.unlock()
    }

    private func enter() -> any DataStore {
        condition.lock()
        defer { condition.unlock() }
        lastWrite = .now
        while holding { condition.wait() }
        activeWrites += 1
        return serving
    }

    private func leave() {
        condition.lock()
        activeWrites -= 1
        if activeWrites == 0 { condition.broadcast() }
        condition.unlock()
    }

    /// Sends an async write to `store`, counted in ``activeWrites`` until it completes.
    private func submit<T: Sendable>(_ body: @escaping @Sendable (WriteAccessor) throws -> T,
                                     _ completion: @escaping @Sendable (Result<T, any Error>) -> Void,
                                     to store: any DataStore) {
        store.writeAsync(body) { [self] result in
            self.leave()
            completion(result)
        }
    }
}

extension NSCondition {
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}
