#if Postgres
@_spi(Backend) import DataStoreAPI
import Foundation
import Synchronization

/// Where a read goes, for a store whose location names standbys (``PostgresLocation/readHosts``).
public enum PostgresReadTarget: Sendable, Hashable {
    /// The primary (every read of a store without standbys).
    case primary
    /// A standby, spread over those the location names; with `readYourWrites`, one that has
    /// replayed this store's last commit (waiting up to ``PostgresLocation/standbyWait``, then
    /// the primary). The primary when no standby answers.
    case standbys(readYourWrites: Bool)
}

/// A WAL position (`pg_lsn`) as a number: `X/Y` is `X << 32 | Y`.
enum WALPosition {
    /// The end of the records before an insert position (`pg_current_wal_insert_lsn()`): at a
    /// page boundary the insert position is past the next page's header (24 bytes, or 40 at the
    /// start of a segment), where no record can end, while a standby that replayed every
    /// record reports the boundary itself.
    static func recordsEnd(_ insertPosition: UInt64, pageSize: UInt64) -> UInt64 {
        guard pageSize > 0 else { return insertPosition }
        let offset = insertPosition % pageSize
        return offset == 24 || offset == 40 ? insertPosition - offset : insertPosition
    }

    static func parse(_ text: String) -> UInt64? {
        let parts = text.split(separator: "/")
        guard parts.count == 2, let high = UInt64(parts[0], radix: 16), let low = UInt64(parts[1], radix: 16),
              high <= UInt64(UInt32.max), low <= UInt64(UInt32.max) else { return nil }
        return high << 32 | low
    }
}

/// Nanoseconds of the system's monotonic clock: what the read path compares with the times it
/// keeps in atomics, so that a read takes no lock but its pool's.
@inline(__always) func monotonicNanoseconds() -> Int64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec)
}

extension Duration {
    /// The duration in whole nanoseconds (saturating).
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? (seconds < 0 ? .min : .max) : whole.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue
    }
}

extension Atomic where Value == UInt64 {
    /// Raises the value to `value` unless it is already as high.
    func raise(to value: UInt64) {
        var current = load(ordering: .relaxed)
        while current < value {
            let (exchanged, original) = compareExchange(expected: current, desired: value, ordering: .acquiringAndReleasing)
            if exchanged { return }
            current = original
        }
    }
}

/// One standby of the location: its idle read connections and what the store learned of it.
///
/// What a read consults (the position it replayed, when it was last checked, whether it is left
/// alone) is kept in atomics: with many readers on few cores, a lock that every read takes keeps
/// threads waiting on one another whenever its holder is descheduled.
final class StandbyPool: @unchecked Sendable {
    let server: PostgresServer
    let location: PostgresLocation
    private let idle = Mutex<[PostgresSession]>([])
    /// The highest WAL position it was seen to have replayed.
    private let replayed = Atomic<UInt64>(0)
    /// When it was last seen in recovery (a standby; one promoted is not read from), in
    /// ``monotonicNanoseconds()``; 0: never.
    private let checkedAt = Atomic<Int64>(0)
    /// Until when it is not tried (it could not be reached, or was promoted, or was lost, or was
    /// behind), in ``monotonicNanoseconds()``; 0: it is tried.
    private let avoidUntil = Atomic<Int64>(0)

    /// How long a standby that failed is left alone before it is tried again.
    static let retryAfter = Duration.seconds(2)
    /// How often a standby in use is asked again whether it is still one.
    static let recheckAfter = Duration.seconds(1)

    init(server: PostgresServer, of location: PostgresLocation) {
        self.server = server
        self.location = location.standby(server)
    }

    var isAvoided: Bool {
        let until = avoidUntil.load(ordering: .acquiring)
        return until != 0 && monotonicNanoseconds() < until
    }

    /// Leaves the standby alone for a while (its idle connections closed unless it is only
    /// behind, and answered).
    func avoid(behind: Bool = false) {
        avoidUntil.store(monotonicNanoseconds() &+ Self.retryAfter.nanoseconds, ordering: .releasing)
        if !behind { close() }
    }

    /// A connection to the standby ready for a read that must see `position` (0: any), or `nil`
    /// when the standby cannot serve it: it cannot be reached, or it is no longer a standby
    /// (both leave it alone for a while), or it has not replayed `position` by `deadline`.
    func session(replayed position: UInt64, until deadline: ContinuousClock.Instant) -> PostgresSession? {
        // (The check's time first: the position it found is stored before it.)
        let checked = checkedAt.load(ordering: .acquiring)
        let known = replayed.load(ordering: .acquiring)
        var session: PostgresSession?
        while let pooled = idle.withLock({ $0.popLast() }) {
            if (try? pooled.settle()) != nil, !pooled.isClosed {
                session = pooled
                break
            }
            pooled.close()
        }
        if session == nil {
            do {
                session = try PostgresSession(location)
            } catch {
                avoid()
                return nil
            }
        }
        guard let session else { return nil }
        let fresh = checked != 0 && monotonicNanoseconds() &- checked < Self.recheckAfter.nanoseconds
        if fresh && known >= position { return session }
        // Asked until it has replayed the position, waiting a little longer each time.
        var pause = Duration.milliseconds(1)
        while true {
            guard let row = try? session.query("SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text, "
                                                   + "current_setting('transaction_read_only')").first,
                  let inRecovery = try? row[0].bool()
            else {
                session.close()
                avoid()
                return nil
            }
            // A standby, or one promoted that does not take writes yet (a failover manager fences
            // a node it promotes until it is sure the old primary is gone): what it replayed is
            // the primary's. One that takes writes of its own is another primary: not read from.
            let fenced = (try? row[2].string()) == "on"
            guard inRecovery || fenced, !row[1].isNull, let replayedNow = (try? row[1].string()).flatMap(WALPosition.parse) else {
                give(session)
                avoid()
                return nil
            }
            replayed.raise(to: replayedNow)
            checkedAt.store(monotonicNanoseconds(), ordering: .releasing)
            if replayedNow >= position { return session }
            guard ContinuousClock.now + pause < deadline else {
                // Behind: the next reads go elsewhere for a while rather than wait here again.
                give(session)
                avoid(behind: true)
                return nil
            }
            Thread.sleep(forTimeInterval: Double(pause.components.attoseconds) / 1e18 + Double(pause.components.seconds))
            pause = min(pause * 2, .milliseconds(20))
        }
    }

    /// Returns a connection to the idle ones (or closes it when it is gone).
    func give(_ session: PostgresSession) {
        if session.isClosed { session.close() } else { idle.withLock { $0.append(session) } }
    }

    func close() {
        for session in idle.withLock({ pool in defer { pool = [] }; return pool }) { session.close() }
    }
}

/// Positions of the primary's WAL and when the store saw them, newest last: what tells how far
/// behind the primary a standby is (``PostgresLocation/maxStandbyLag``). Times are
/// ``monotonicNanoseconds()``.
struct PrimaryPositions {
    /// At most one sample per ``spacing``, oldest first; of those older than the lag bound only
    /// the newest is kept.
    private var seen: [(position: UInt64, at: Int64)] = []
    /// When a position was last noted (the same one again included).
    private(set) var newest: Int64?
    /// The least time between two samples kept: a store that commits often keeps about ten a
    /// second, so that a read finds the floor in a step or two.
    static let spacing = Duration.milliseconds(100).nanoseconds

    /// Notes `position`, seen at `now`. A position seen within ``spacing`` of the last sample kept
    /// is not kept: the floor then lags by that much more, never less.
    mutating func note(_ position: UInt64, keeping lag: Int64, now: Int64) {
        newest = now
        if let last = seen.last, last.position >= position || now &- last.at < Self.spacing { return }
        seen.append((position, now))
        // Of the samples older than the lag, only the newest is needed.
        var old = 0
        while old + 1 < seen.count, now &- seen[old + 1].at >= lag { old += 1 }
        if old > 0 { seen.removeFirst(old) }
    }

    /// Notes that the primary was asked at `now` and did not answer: it is asked again a second
    /// later, not by every read.
    mutating func asked(now: Int64) { newest = now }

    /// The position the primary had reached `lag` before `now` (what a standby must have
    /// replayed not to be further behind), 0 when none was seen that long ago; and until when
    /// that stays the answer (unless a position is noted first): when the next sample is `lag`
    /// old.
    func floor(lag: Int64, now: Int64) -> (position: UInt64, until: Int64) {
        guard let first = seen.first else { return (0, .max) }
        guard now &- first.at >= lag else { return (0, first.at &+ lag) }
        var index = 0
        while index + 1 < seen.count, now &- seen[index + 1].at >= lag { index += 1 }
        return (seen[index].position, index + 1 < seen.count ? seen[index + 1].at &+ lag : .max)
    }
}

/// ``PrimaryPositions`` behind a lock, with what every read asks of it (the floor, and whether a
/// position is a second old) published in atomics: a read takes the lock only when the floor it
/// finds has run out.
final class PrimaryPositionLog: Sendable {
    private let positions = Mutex(PrimaryPositions())
    private let lag: Int64
    /// The floor (``PrimaryPositions/floor(lag:now:)``) and until when it holds; stored floor
    /// first, so that a read that sees a time sees its floor or a later (higher) one.
    private let floorPosition = Atomic<UInt64>(0)
    private let floorUntil = Atomic<Int64>(0)
    /// When a position was last noted or asked for; `Int64.min`: never.
    private let newest = Atomic<Int64>(.min)

    init(lag: Duration) { self.lag = lag.nanoseconds }

    func note(_ position: UInt64) {
        positions.withLock { positions in
            let now = monotonicNanoseconds()
            positions.note(position, keeping: lag, now: now)
            publish(positions, now: now)
        }
    }

    func asked() {
        positions.withLock { positions in
            let now = monotonicNanoseconds()
            positions.asked(now: now)
            publish(positions, now: now)
        }
    }

    /// Whether no position was noted (or asked for) in the last `interval`.
    func isOlder(than interval: Duration) -> Bool {
        let noted = newest.load(ordering: .acquiring)
        return noted == .min || monotonicNanoseconds() &- noted >= interval.nanoseconds
    }

    /// What a standby must have replayed not to be more than the lag bound behind.
    func floor() -> UInt64 {
        let now = monotonicNanoseconds()
        if now < floorUntil.load(ordering: .acquiring) { return floorPosition.load(ordering: .acquiring) }
        return positions.withLock { positions in publish(positions, now: monotonicNanoseconds()) }
    }

    @discardableResult
    private func publish(_ positions: PrimaryPositions, now: Int64) -> UInt64 {
        let (position, until) = positions.floor(lag: lag, now: now)
        floorUntil.store(.min, ordering: .releasing)
        floorPosition.store(position, ordering: .releasing)
        floorUntil.store(until, ordering: .releasing)
        if let noted = positions.newest { newest.store(noted, ordering: .releasing) }
        return position
    }
}

/// A read that cannot run on a standby (the change feed's reads need the primary's list of
/// running transactions): the read runs again on the primary.
struct ReadNeedsPrimary: Error {}

extension PostgresEngine {
    /// Where reads go unless ``PostgresStore/read(on:_:)`` says otherwise.
    var defaultReadTarget: PostgresReadTarget {
        location.readHosts.isEmpty ? .primary : .standbys(readYourWrites: location.readYourWrites)
    }

    /// The target of the reads of the current task or thread (``PostgresStore/read(on:_:)``).
    @TaskLocal static var readTarget: PostgresReadTarget?
}
#endif
