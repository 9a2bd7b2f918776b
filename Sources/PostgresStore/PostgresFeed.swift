#if Postgres
@_spi(Backend) import DataStoreAPI
import Synchronization

/// The change feed on PostgreSQL without a row that every writer updates.
///
/// A write transaction's last statement, just before `COMMIT`, takes its transaction id, a
/// shared advisory lock of the store (``PostgresFeedSQL/writerLock``), and the next value of
/// the store's sequence `_ds_feed_seq` as its entry's number. A sequence is outside
/// transactions: writers never wait for each other there. Since the number is taken after
/// every other statement, a transaction that waited for another's row (and, at SERIALIZABLE,
/// failed and ran again) takes a higher number than the one it waited for: the numbers follow
/// every write conflict. A transaction that took a number and rolled back leaves a gap.
///
/// Numbers are taken before their transactions commit, so a reader must not hand out entry
/// `n` while a transaction holding a number below `n` may still commit. Before a feed read
/// begins its snapshot, it reads (in two statements of their own) the highest number taken,
/// `issued`, and then the transaction ids holding the writers' lock, `holders`. Every
/// transaction with a number up to `issued` took the lock before its number, so it had finished
/// when `holders` was read or is among them. In a snapshot taken after that read, every entry up
/// to `issued` is therefore final when none of `holders` is still running: the snapshot's own
/// list of running transactions (`pg_current_snapshot()`) says so. A probe whose holders still
/// run is kept (``FeedWatermark``) and released by a later snapshot in which they have all
/// ended; observers poll while one is kept, since a rollback sends no notification.
///
/// After a connection is made again (a restart, a failover to a standby, which may not have
/// received the last values the old primary handed out), the sequence is moved ahead by
/// ``PostgresFeedSQL/failoverJump``, so that no number a reader may have seen is taken twice.
final class FeedWatermark: Sendable {
    /// What one probe read before its snapshot.
    struct Probe {
        var issued: UInt64
        /// The low 32 bits of the holders' transaction ids (as `pg_locks` shows them).
        var holders: [UInt32]
        /// When this process had its answer (``FeedWatermark/epoch``), set when it is kept.
        var epoch: UInt64 = 0
    }

    private struct Probes {
        /// Probes whose holders some snapshot still saw running.
        var waiting: [Probe] = []
        /// The highest probe a snapshot released: a later snapshot releases it too (its holders
        /// had ended), so that what one read handed out the next one does too.
        var released: Probe?
        var epoch: UInt64 = 0
    }

    private let probes = Mutex(Probes())
    /// At most this many probes are kept waiting (dropping one only delays entries).
    private static let kept = 64

    /// How many probes this process has had answers to: a snapshot begun after the count was
    /// `n` was taken after every probe counted, so those probes' holders tell it what is final.
    var epoch: UInt64 { probes.withLock { $0.epoch } }

    /// The highest number whose entries, and every lower one's, are final in a snapshot in
    /// `snapshot`, begun when ``epoch`` was `begun`; `probe` is this
    /// snapshot's own (read before it). A probe counts for a snapshot only if the snapshot was
    /// taken after the probe's holders were read: an older snapshot may miss a transaction that
    /// ended between the two.
    func released(in snapshot: Snapshot, begun: UInt64, probe: Probe?) -> UInt64 {
        probes.withLock { probes in
            var own = probe
            if own != nil {
                probes.epoch += 1
                own?.epoch = probes.epoch
            }
            var best: Probe?
            let earlier = (probes.waiting + [probes.released].compactMap { $0 }).filter { $0.epoch <= begun }
            for kept in earlier + [own].compactMap({ $0 })
            where kept.holders.allSatisfy({ !snapshot.isRunning($0) }) && kept.issued > (best?.issued ?? 0) {
                best = kept
            }
            if let own, own.issued > (best?.issued ?? 0) { probes.waiting.append(own) }
            if let best, best.issued > (probes.released?.issued ?? 0) { probes.released = best }
            let done = probes.released?.issued ?? 0
            probes.waiting.removeAll { $0.issued <= done }
            if probes.waiting.count > Self.kept { probes.waiting.removeFirst(probes.waiting.count - Self.kept) }
            return best?.issued ?? 0
        }
    }

    /// The highest number a snapshot of this process found final (0: none yet).
    var highestReleased: UInt64 { probes.withLock { $0.released?.issued ?? 0 } }

    /// Whether a probe still waits for its holders.
    var isWaiting: Bool { probes.withLock { !$0.waiting.isEmpty } }

    /// Forgets the probes (they were read from a server this process may no longer reach).
    /// The epoch keeps rising: a read begun before the reset must not count a probe answered
    /// after it.
    func reset() { probes.withLock { $0 = Probes(epoch: $0.epoch) } }

    /// What a snapshot says of transactions, by the low 32 bits of their ids (as `pg_locks`
    /// shows them): those listed as running, and `xmax`, from which on no transaction had ended
    /// when the snapshot was taken. PostgreSQL's `xmax` is one past the last transaction that
    /// ended, so a transaction with a later id may still run although the list does not name it.
    struct Snapshot {
        var xmax: UInt32
        var listed: Set<UInt32>

        /// Whether transaction `id` (which had begun before the snapshot) had not ended when it
        /// was taken.
        func isRunning(_ id: UInt32) -> Bool {
            listed.contains(id) || Int32(bitPattern: id &- xmax) >= 0
        }

        /// From `pg_current_snapshot()`'s text (`xmin:xmax:xip,…`).
        init(_ text: String) throws {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 3, let xmax = UInt64(parts[1]) else {
                throw StoreError(.corrupt, "the server's snapshot '\(text)' cannot be read")
            }
            self.xmax = UInt32(truncatingIfNeeded: xmax)
            listed = []
            for id in parts[2].split(separator: ",") {
                guard let value = UInt64(id) else {
                    throw StoreError(.corrupt, "the server's snapshot '\(text)' cannot be read")
                }
                listed.insert(UInt32(truncatingIfNeeded: value))
            }
        }
    }

    /// The holders' ids from `string_agg`'s text (empty: none).
    static func holders(_ text: String) -> [UInt32] {
        text.split(separator: ",").compactMap { UInt64($0).map { UInt32(truncatingIfNeeded: $0) } }
    }
}

/// The SQL of the feed's statements for one store (its quoted schema).
///
/// Its statements are made once, when it is made (an engine keeps one): a write sends them
/// thousands of times a second. A class: a write takes it from its engine several times, and a
/// struct of seven strings was copied each time (seven retains and releases, about 300
/// instructions a write).
final class PostgresFeedSQL: Sendable {
    let s: String
    let lockKey: Int64

    init(s: String, lockKey: Int64) {
        self.s = s
        self.lockKey = lockKey
        let sequenceLiteral = "'" + "\(s)._ds_feed_seq".replacingOccurrences(of: "'", with: "''") + "'"
        self.sequenceLiteral = sequenceLiteral
        issued = "SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM \(s)._ds_feed_seq"
        window = "SELECT pg_current_snapshot()::text, (SELECT value FROM \(s)._ds_meta WHERE key = '\(Self.floorKey)')"
        let entry = "WITH added AS (INSERT INTO \(s)._ds_feed (seq, entry) SELECT nextval(\(sequenceLiteral)), $1 FROM "
            + "(SELECT pg_advisory_xact_lock_shared($2) FROM (SELECT pg_current_xact_id() AS id OFFSET 0) x "
            + "WHERE x.id IS NOT NULL OFFSET 0) y "
            + "RETURNING seq) SELECT seq"
        appendEntry = entry + " FROM added"
        appendEntryNotifying = entry + ", pg_notify($3, '') FROM added"
        channel = "ds_" + String(UInt64(bitPattern: lockKey), radix: 16)
    }

    /// The channel every write transaction of the store notifies at commit: `ds_` and the
    /// hash of the schema's name, within PostgreSQL's 63 bytes whatever the name.
    let channel: String

    /// The sequence's name as a string literal (for `nextval`, which takes a `regclass`).
    let sequenceLiteral: String

    /// The key of the writers' shared advisory lock: the store's lock key with its low bit
    /// flipped (the key itself is what creating and opening the store lock exclusively).
    var writerLock: Int64 { lockKey ^ 1 }

    /// The metadata key of the feed's floor (8 bytes, big-endian, so that `greatest` on the
    /// bytes is `greatest` on the numbers).
    static let floorKey = "datastore.feed-floor"

    /// The highest number taken, as one value.
    let issued: String

    /// The transaction ids holding the writers' lock now, as text (`,`-separated): the lock's
    /// rows in `pg_locks` joined with the transaction id locks of the same transactions.
    var holders: String {
        "SELECT coalesce(string_agg(x.transactionid::text, ','), '') FROM pg_locks l JOIN pg_locks x ON "
            + "x.virtualtransaction = l.virtualtransaction AND x.locktype = 'transactionid' AND x.granted "
            + "WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = "
            + "current_database()) AND l.classid::int8 = $1 AND l.objid::int8 = $2 AND l.objsubid = 1"
    }

    /// The binds of ``holders``: the lock key's two 32-bit halves as `pg_locks` shows them.
    var holderBinds: LibpqParameters {
        var binds = LibpqParameters()
        let key = UInt64(bitPattern: writerLock)
        binds.append(Int64(key >> 32))
        binds.append(Int64(key & 0xFFFF_FFFF))
        return binds
    }

    /// The snapshot's running transactions and the floor.
    let window: String

    /// How far the sequence moves after a connection is made again: more numbers than a server
    /// hands out between its last replicated value and its death.
    static let failoverJump: Int64 = 1 << 20

    /// Moves the sequence ahead (by ``failoverJump``), under an exclusive advisory lock so that
    /// two jumps never move it back.
    func jump(_ session: PostgresSession) throws {
        var key = LibpqParameters()
        key.append(lockKey)
        try session.query("BEGIN")
        do {
            try session.query("SELECT pg_advisory_xact_lock($1)", key)
            try session.query("SELECT setval(\(sequenceLiteral), nextval(\(sequenceLiteral)) + \(Self.failoverJump - 1))")
            try session.query("COMMIT")
        } catch {
            _ = try? session.query("ROLLBACK")
            throw error
        }
    }

    /// The entry's statement (binds: the entry, ``writerLock``), answering its number: a
    /// data-modifying CTE (at the statement's top level, as PostgreSQL requires) that takes the
    /// transaction's id first (so that it is among the lock's holders), then the lock, then the
    /// number, nested so that they run in that order (the id is used by the query around it, so
    /// the planner cannot drop it).
    let appendEntry: String
    /// ``appendEntry`` with the commit's notification on the channel of the third bind.
    let appendEntryNotifying: String

    /// The statements of a write transaction that assumed the feed's state
    /// (``FeedStateCache``) rather than reading it first: each checks, in the transaction's
    /// snapshot, that the stored state is the assumed one, and fails with a null number
    /// (`23502` on `_ds_feed.seq`, which nothing else the store sends can meet) when it is not,
    /// which rolls the transaction back; each also sets the commit's durability when the store
    /// sets one (`set_config(…, true)`, which the read of the state carries otherwise).
    struct Checked: Sendable {
        /// The entry's statement (binds: the entry, ``PostgresFeedSQL/writerLock``, the assumed
        /// state), answering its number: ``PostgresFeedSQL/appendEntry`` with the check first.
        let appendEntry: String
        /// ``appendEntry`` with the commit's notification on the channel of the fourth bind.
        let appendEntryNotifying: String
        /// The check alone (binds: the assumed state), for a transaction that records no entry,
        /// and before a transaction writes the state, which must follow the stored one.
        let check: String
    }

    /// The checked statements; `commitSetting` is the `synchronous_commit` every write sets, if any.
    func checked(commitSetting: String?) -> Checked {
        func same(_ bind: Int) -> String {
            "(SELECT value FROM \(s)._ds_meta WHERE key = '\(PostgresTransaction.feedStateKey)') "
                + "IS NOT DISTINCT FROM $\(bind)::bytea"
        }
        let setting = commitSetting.map { ", set_config('synchronous_commit', '\($0)', true) AS setting" } ?? ""
        let setSetting = commitSetting == nil ? "" : " AND x.setting IS NOT NULL"
        // The id first, then the check and the setting, in the innermost query (a volatile
        // function's column is never dropped, and each is used by the query around it); the
        // number only when the check held.
        let entry = "WITH added AS (INSERT INTO \(s)._ds_feed (seq, entry) SELECT CASE WHEN y.same THEN "
            + "nextval(\(sequenceLiteral)) END, $1 FROM "
            + "(SELECT pg_advisory_xact_lock_shared($2), x.same FROM (SELECT pg_current_xact_id() AS id, "
            + same(3) + " AS same\(setting) OFFSET 0) x "
            + "WHERE x.id IS NOT NULL\(setSetting) OFFSET 0) y "
            + "RETURNING seq) SELECT seq"
        let check = "INSERT INTO \(s)._ds_feed (seq, entry) SELECT NULL::int8, ''::bytea FROM (SELECT "
            + same(1) + " AS same\(setting) OFFSET 0) x WHERE NOT x.same\(setSetting)"
        return Checked(appendEntry: entry + " FROM added", appendEntryNotifying: entry + ", pg_notify($4, '') FROM added",
                       check: check)
    }

    /// Sets the floor to the bind `operand` unless it is higher already.
    func raiseFloor(_ operand: String, from source: String = "", greatest: Bool = true) -> String {
        "INSERT INTO \(s)._ds_meta (key, value) SELECT '\(Self.floorKey)', int8send(\(operand)) \(source) "
            + "ON CONFLICT (key) DO UPDATE SET value = "
            + (greatest ? "greatest(\(s)._ds_meta.value, EXCLUDED.value)" : "EXCLUDED.value")
    }

    /// Raises the floor to the oldest of the newest `$2 + 1` entries, at most `$1` (one past the
    /// highest number known final), removing none.
    var expire: String {
        let cut = "cut AS (SELECT (SELECT least($1::int8, k.seq) FROM (SELECT seq FROM \(s)._ds_feed ORDER BY seq DESC "
            + "OFFSET $2 LIMIT 1) k) AS c)"
        return "WITH \(cut) " + raiseFloor("c", from: "FROM cut WHERE c IS NOT NULL")
    }

    /// The binds of ``expire``.
    static func expireBinds(released: UInt64, keeping: UInt64) -> LibpqParameters {
        var binds = LibpqParameters()
        binds.append(Int64(clamping: released) + 1)
        binds.append(Int64(clamping: keeping) - 1)
        return binds
    }

    /// The metadata key of the feed's count (text: `c t k`): the entries numbered from `c` to
    /// `t` are `k`, and `c` is the lowest stored. What ``trim`` wrote last.
    static let countKey = "datastore.feed-count"

    /// Removes all but the newest `$2` entries numbered up to `$1` (the highest number known
    /// final) and raises the floor to the oldest kept; entries above `$1` are never removed.
    ///
    /// Finding the newest `$2` by counting down from the top reads every kept entry (10,000 by
    /// default, about 3 ms of the server's time, once in 256 commits). The count (``countKey``)
    /// says how many entries there were from the last cut up to the number it was made at: the
    /// entries numbered above that, which came since, are counted, and as many as there are now
    /// too many are skipped from the bottom, so that a trim reads about the entries it removes.
    /// The count holds while its lowest entry is stored: entries are only ever removed from the
    /// bottom (a trim, an expiry by another version of the package, a restart of the feed, which
    /// removes every entry), so an entry `c` still stored means no entry from `c` up was removed,
    /// and no entry at or below `t` is added after it was found final. When it does not hold (a
    /// new store, another version trimmed), the trim counts down from `$1`, as a first one does.
    var trim: String {
        // (A count that is not three numbers, which only another program could write, is taken
        // for none: the trim counts from the top and writes it again.)
        let counted = "a AS (SELECT split_part(v, ' ', 1)::int8 AS c, split_part(v, ' ', 2)::int8 AS t, "
            + "split_part(v, ' ', 3)::int8 AS k FROM (SELECT encode(value, 'escape') AS v FROM \(s)._ds_meta "
            + "WHERE key = '\(Self.countKey)') x WHERE x.v ~ '^[0-9]{1,18} [0-9]{1,18} [0-9]{1,18}$'), "
            + "v AS (SELECT a.c, a.t, a.k + (SELECT count(*) FROM \(s)._ds_feed WHERE seq > a.t AND seq <= $1) AS n "
            + "FROM a WHERE EXISTS (SELECT 1 FROM \(s)._ds_feed WHERE seq = a.c))"
        // Either way the cut is an entry numbered at most $1, with $2 entries from it up to $1.
        let cut = "cut AS (SELECT CASE WHEN EXISTS (SELECT 1 FROM v) "
            + "THEN (SELECT (SELECT seq FROM \(s)._ds_feed WHERE seq >= v.c ORDER BY seq OFFSET v.n - $2 LIMIT 1) "
            + "FROM v WHERE v.n > $2) "
            + "ELSE (SELECT seq FROM \(s)._ds_feed WHERE seq <= $1 ORDER BY seq DESC OFFSET $2 - 1 LIMIT 1) END AS c, "
            + "greatest((SELECT t FROM v), $1) AS t)"
        // (A range with both ends, so that the planner takes the index for the few entries removed.)
        let gone = "gone AS (DELETE FROM \(s)._ds_feed WHERE seq >= coalesce((SELECT c FROM v), -9223372036854775808) "
            + "AND seq < (SELECT c FROM cut) RETURNING 1)"
        let store = "stored AS (INSERT INTO \(s)._ds_meta (key, value) SELECT '\(Self.countKey)', "
            + "convert_to(c::text || ' ' || t::text || ' ' || $2::text, 'UTF8') FROM cut WHERE c IS NOT NULL "
            + "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value RETURNING 1)"
        return "WITH \(counted), \(cut), \(gone), \(store) " + raiseFloor("c", from: "FROM cut WHERE c IS NOT NULL")
    }

    /// The binds of ``trim``.
    static func trimBinds(released: UInt64, keeping: UInt64) -> LibpqParameters {
        var binds = LibpqParameters()
        binds.append(Int64(clamping: released))
        binds.append(Int64(clamping: keeping))
        return binds
    }

    /// The floor's stored bytes as a number (0 when none is stored).
    static func floor(_ cell: LibpqCell) -> UInt64 {
        guard !cell.isNull else { return 0 }
        let bytes = cell.bytes()
        guard bytes.count == 8 else { return 0 }
        return bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }
}

/// The feed's state (`_ds_meta`'s `datastore.feed`: its identity and settings) as the store last
/// read it, which its write transactions assume instead of reading it first: one statement fewer
/// for the server in every write, and nothing for the next write to wait for before it sends
/// its entry and `COMMIT`. A transaction that assumed it checks it at commit, in its snapshot
/// (``PostgresFeedSQL/Checked``), and one that writes it checks it first; a check that fails
/// forgets the record and runs the block again, reading the state. The state changes when the
/// feed's settings do (`setChangeFeedSettings`, a switch's cutover), at a new store's first
/// recorded write and when an older version's state is written again in this one's form; a
/// write that assumed it is checked as it commits. A store that does not run conflicting blocks
/// again (`write_retries=0`) reads the state in every write instead, as a check that failed
/// would otherwise fail its write.
final class FeedStateCache: Sendable {
    /// The state, and how many times it was forgotten: a state read by a transaction that
    /// began before the last time is not kept (its snapshot may predate the change that made
    /// the store forget it).
    private let state = Mutex<(value: [UInt8]?, generation: UInt64)>((nil, 0))

    /// The state to assume, if one was read; and the generation a transaction that reads it
    /// instead gives back to ``note(_:readSince:)``.
    var assumed: (value: [UInt8]?, generation: UInt64) { state.withLock { $0 } }

    /// A state read in a transaction's snapshot, kept unless the store forgot the state since
    /// the transaction began (`generation`), or it is none (a new feed's).
    func note(_ value: [UInt8]?, readSince generation: UInt64) {
        guard let value else { return }
        state.withLock { if $0.generation == generation { $0.value = value } }
    }

    /// Forgets the state: the next write transaction reads it.
    func forget() { state.withLock { $0 = (nil, $0.generation &+ 1) } }

    /// Whether `error` is a check of ``PostgresFeedSQL/Checked`` that failed, in `schema`.
    static func isCheckFailure(_ error: LibpqError, schema: String) -> Bool {
        error.sqlState == PostgresSQLState.notNullViolation && error.table == "_ds_feed" && error.column == "seq"
            && error.schema == schema
    }
}
#endif
