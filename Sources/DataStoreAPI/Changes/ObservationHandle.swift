import Foundation

/// A running callback observation; ``cancel()`` stops it.
public final class ObservationHandle: Sendable {
    private let task: Task<Void, Never>

    init(_ task: Task<Void, Never>) { self.task = task }

    /// Stops the observation: no callback starts after this returns... except one already
    /// running. Waits for nothing.
    public func cancel() { task.cancel() }

    /// Waits until the observation has ended (cancelled, store closed, or failed).
    public func wait() async { await task.value }
}
