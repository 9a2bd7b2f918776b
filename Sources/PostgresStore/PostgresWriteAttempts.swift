#if Postgres
import Foundation

/// What a thread's write blocks on PostgreSQL stores left behind, per store: whether the last
/// transaction conflicted with another connection's (what ``PostgresEngine/isRetryableConflict(_:)``
/// asks), how many runs of the block conflicted in a row (from
/// ``PostgresEngine/runsAloneAfter`` on the next runs alone), and the connection of the
/// transaction running now.
///
/// Per thread, because a store's write blocks run at once on their callers' threads, and a
/// block's runs (``Store`` runs one again on the thread that ran it) are what count: the
/// engine keeps no state of a write between runs.
final class WriteAttempts {
    private struct Entry {
        var lastConflicted = false
        var conflictsInARow = 0
        /// When the last run conflicted: a count older than a second is another block's (the
        /// store gave up on this one, or ran out of retries), not this one's.
        var at = ContinuousClock.now
    }

    /// By the engine's identity; a thread writes to few stores.
    private var entries: [ObjectIdentifier: Entry] = [:]
    private var running: (engine: ObjectIdentifier, session: PostgresSession)?

    /// The calling thread's.
    static var current: WriteAttempts {
        if let stored = pthread_getspecific(key) {
            return Unmanaged<WriteAttempts>.fromOpaque(stored).takeUnretainedValue()
        }
        let made = WriteAttempts()
        pthread_setspecific(key, Unmanaged.passRetained(made).toOpaque())
        return made
    }

    /// One key for the process (keys are few: 1,024 on glibc), released with each thread.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { stored in
            guard let stored else { return }
            Unmanaged<WriteAttempts>.fromOpaque(stored).release()
        }
        return key
    }()

    /// A transaction of `engine` begins on `session`; returns what ran before (a write of another
    /// store whose block this one runs in), for ``end(restoring:)``.
    func begin(_ engine: PostgresEngine, on session: PostgresSession) -> (engine: ObjectIdentifier, session: PostgresSession)? {
        defer { running = (ObjectIdentifier(engine), session) }
        if entries[ObjectIdentifier(engine)] != nil { entries[ObjectIdentifier(engine)]?.lastConflicted = false }
        return running
    }

    func end(restoring outer: (engine: ObjectIdentifier, session: PostgresSession)?) { running = outer }

    /// The connection of the transaction of `engine` running on this thread.
    func session(of engine: PostgresEngine) -> PostgresSession? {
        guard let running, running.engine == ObjectIdentifier(engine) else { return nil }
        return running.session
    }

    func conflictsInARow(of engine: PostgresEngine) -> Int {
        guard let entry = entries[ObjectIdentifier(engine)], ContinuousClock.now - entry.at < .seconds(1) else { return 0 }
        return entry.conflictsInARow
    }

    func lastConflicted(_ engine: PostgresEngine) -> Bool { entries[ObjectIdentifier(engine)]?.lastConflicted ?? false }

    func succeeded(_ engine: PostgresEngine) {
        if !entries.isEmpty { entries[ObjectIdentifier(engine)] = nil }
    }

    /// A run failed: counted when it conflicted, below `limit` (a run alone that still
    /// conflicted starts the count again).
    func failed(_ engine: PostgresEngine, conflicted: Bool, limit: Int) {
        var entry = entries[ObjectIdentifier(engine), default: Entry()]
        entry.lastConflicted = conflicted
        entry.conflictsInARow = conflicted && entry.conflictsInARow < limit ? entry.conflictsInARow + 1 : 0
        entry.at = ContinuousClock.now
        entries[ObjectIdentifier(engine)] = conflicted ? entry : nil
    }
}
#endif
