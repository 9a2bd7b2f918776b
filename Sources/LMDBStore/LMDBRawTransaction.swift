internal import CLMDB
@_spi(Backend) import DataStoreAPI

/// A raw LMDB transaction over byte keys and values.
///
/// A write transaction keeps a journal of its changes. When a put hits `MDB_MAP_FULL`, it
/// aborts, grows the map, begins again, replays the journal and retries the put, so the
/// caller's block carries on and the user never sees a full map while the disk has room.
/// Nothing else can have written in between: the store serializes the writers of a process,
/// and the writers' lock (``LMDBEnvironment/lockWriters()``), held across the abort, those of
/// every process using this toolkit. A writer that does not take it (`mdb_load`) and commits in
/// between is detected by the transaction id, and the write fails with `conflict` rather than
/// replaying changes read from a state that is gone.
///
/// The journal is needed only while the map could fill before the disk does. Once a
/// transaction's changes pass ``journalCheckpoint`` bytes, it compares the map with the disk
/// (``LMDBOptions/mapCoversDisk``): if the map is smaller than the file and the disk's free
/// space, it grows it now to cover them twice over (replaying the changes so far, 64 KiB), and
/// then gives up its journal. Every page it adds past the file's end must be written to the disk
/// at the commit, so a map it can no longer fill means a full disk first, which the commit
/// reports; the transaction writes on without copying each change. Should the map still fill
/// (another process freed more than 64 MiB of the disk meanwhile), the write fails with
/// `storeFull` and nothing of the transaction is written.
///
/// A transaction begun without a journal (``init(environment:write:journaled:)``) keeps
/// nothing: on `MDB_MAP_FULL` it throws ``isMapFull(_:)`` and its caller starts over in a
/// larger map, so a transaction of any size runs in bounded memory.
final class LMDBRawTransaction {
    private typealias Change = LMDBJournal.Change

    let environment: LMDBEnvironment
    let isWrite: Bool
    private(set) var txn: OpaquePointer
    /// Bounded in memory: past 16 MiB it goes to a temporary file (``LMDBJournal``).
    private var journal: LMDBJournal
    private let journaled: Bool
    /// Set when the map covers the disk and the journal was given up.
    private var journalGivenUp = false
    /// Set once the map was compared with the disk.
    private var diskCompared = false
    /// The disk's free bytes when the journal was given up, for the error should the map fill.
    private var givenUpWithFree = 0
    private var isFinished = false
    private var holdsWritersLock = false
    /// The id LMDB gave the write transaction; a replay must get the same one.
    private var writeID = 0

    init(environment: LMDBEnvironment, write: Bool, journaled: Bool = true) throws(StoreError) {
        self.environment = environment
        isWrite = write
        self.journaled = journaled
        journal = LMDBJournal(directory: environment.path)
        if write {
            try environment.lockWriters()
            holdsWritersLock = true
        }
        do {
            txn = try environment.begin(write: write)
        } catch {
            if write { environment.unlockWriters() }
            throw error
        }
        if write { writeID = mdb_txn_id(txn) }
    }

    /// For a write transaction, the id of the last transaction committed before it began (its
    /// own id is one more: liblmdb numbers write transactions in commit order, and one that
    /// commits nothing leaves its number to the next); with `afterWrites`, its own id, which the
    /// next write transaction finds as the last committed one when no other commit comes between.
    func commitVersion(afterWrites: Bool) -> UInt64 {
        let id = UInt64(mdb_txn_id(txn))
        return afterWrites ? id : id &- 1
    }

    /// Whether `error` is the map-full signal of a transaction without a journal.
    static func isMapFull(_ error: any Error) -> Bool {
        (error as? StoreError)?.cause == StoreError.Cause(library: "lmdb", code: MDB_MAP_FULL, message: mapFullMessage)
    }

    private static let mapFullMessage = "the map is full; the transaction starts over in a larger map"

    deinit {
        finish()
    }

    private var path: String { environment.path }

    /// Calls `body` with the value stored under `key`, valid only during the call.
    func withValue<T>(_ dbi: MDB_dbi, _ key: [UInt8], _ body: (UnsafeRawBufferPointer) throws -> T) throws -> T? {
        try key.withUnsafeBytes { raw in try withValue(dbi, raw, body) }
    }

    /// `prefix` followed by `key`, on the stack.
    @inline(__always)
    static func withPrefixed<R>(_ prefix: UInt8, _ key: UnsafeRawBufferPointer,
                                _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeTemporaryAllocation(byteCount: key.count + 1, alignment: 1) { buffer in
            buffer[0] = prefix
            UnsafeMutableRawBufferPointer(rebasing: buffer[1...]).copyMemory(from: key)
            return try body(UnsafeRawBufferPointer(buffer))
        }
    }

    private func withValue<T>(_ dbi: MDB_dbi, _ raw: UnsafeRawBufferPointer,
                              _ body: (UnsafeRawBufferPointer) throws -> T) throws -> T? {
        guard let value = try value(dbi, raw) else { return nil }
        return try body(value)
    }

    /// The value under `prefix` followed by `key` (the key built on the stack), where it lies
    /// in the map: valid until this transaction's next write, or its end (LMDB's rule for what
    /// `mdb_get` returns). A point read decodes it at once, with no closure around it: a
    /// closure's captures were retained and released per read.
    func value(_ dbi: MDB_dbi, prefix: UInt8, _ key: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        try Self.withPrefixed(prefix, key) { try value(dbi, $0) }
    }

    /// The value under `raw`, where it lies in the map (see ``value(_:prefix:_:)``).
    private func value(_ dbi: MDB_dbi, _ raw: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        var data = MDB_val()
        var k = MDB_val(mv_size: raw.count, mv_data: UnsafeMutableRawPointer(mutating: raw.baseAddress))
        let rc = mdb_get(txn, dbi, &k, &data)
        if rc == MDB_NOTFOUND { return nil }
        try LMDBError.check(rc, "\(path): mdb_get")
        return UnsafeRawBufferPointer(start: data.mv_data, count: data.mv_size)
    }

    /// Visits entries in key order from the first key `>= start` (from the first key when `nil`)
    /// while `body` returns true.
    func forEach(_ dbi: MDB_dbi, from start: [UInt8]?,
                 _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool) throws {
        var cursor: OpaquePointer?
        try LMDBError.check(mdb_cursor_open(txn, dbi, &cursor), "\(path): mdb_cursor_open")
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val()
        var data = MDB_val()
        var rc: Int32
        if let start {
            rc = start.withUnsafeBytes { raw -> Int32 in
                key = MDB_val(mv_size: raw.count, mv_data: UnsafeMutableRawPointer(mutating: raw.baseAddress))
                return mdb_cursor_get(cursor, &key, &data, MDB_SET_RANGE)
            }
        } else {
            rc = mdb_cursor_get(cursor, &key, &data, MDB_FIRST)
        }
        while rc == MDB_SUCCESS {
            let goOn = try body(UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size),
                                UnsafeRawBufferPointer(start: data.mv_data, count: data.mv_size))
            if !goOn { return }
            rc = mdb_cursor_get(cursor, &key, &data, MDB_NEXT)
        }
        if rc != MDB_NOTFOUND { try LMDBError.check(rc, "\(path): mdb_cursor_get") }
    }

    /// The last key below `bound`, or `nil` when there is none.
    func lastKey(_ dbi: MDB_dbi, before bound: [UInt8]) throws -> [UInt8]? {
        var cursor: OpaquePointer?
        try LMDBError.check(mdb_cursor_open(txn, dbi, &cursor), "\(path): mdb_cursor_open")
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val()
        var data = MDB_val()
        var rc = bound.withUnsafeBytes { raw -> Int32 in
            key = MDB_val(mv_size: raw.count, mv_data: UnsafeMutableRawPointer(mutating: raw.baseAddress))
            return mdb_cursor_get(cursor, &key, &data, MDB_SET_RANGE)
        }
        rc = rc == MDB_NOTFOUND ? mdb_cursor_get(cursor, &key, &data, MDB_LAST)
            : rc == MDB_SUCCESS ? mdb_cursor_get(cursor, &key, &data, MDB_PREV) : rc
        if rc == MDB_NOTFOUND { return nil }
        try LMDBError.check(rc, "\(path): mdb_cursor_get")
        return Array(UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size))
    }

    /// The number of entries of a database.
    func count(_ dbi: MDB_dbi) throws(StoreError) -> Int {
        var stat = MDB_stat()
        try LMDBError.check(mdb_stat(txn, dbi, &stat), "\(path): mdb_stat")
        // The count is the file's, not counted: one no map of this machine could hold is damage.
        guard stat.ms_entries >= 0, stat.ms_entries <= Int(UInt32.max) * 64 else {
            throw StoreError(.corrupt, "\(path): a database says it holds \(stat.ms_entries) entries")
        }
        return stat.ms_entries
    }

    func put(_ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8]) throws(StoreError) {
        try key.withUnsafeBytes { k in
            value.withUnsafeBytes { v in Result { () throws(StoreError) in try put(dbi, k, v) } }
        }.get()
    }

    /// Puts `value` under `key`, both copied by LMDB (and by the journal) during the call.
    func put(_ dbi: MDB_dbi, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws(StoreError) {
        try perform(.put(dbi, key, value))
    }

    /// Puts `value` under `key`, which must sort after every key of the database (`MDB_APPEND`:
    /// no descent of the tree, and pages filled before a new one starts); a key that does not
    /// is a write error, nothing written. For copying a database in its own order.
    func append(_ dbi: MDB_dbi, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws(StoreError) {
        try perform(.put(dbi, key, value), flags: UInt32(MDB_APPEND))
    }

    /// Puts `value` under `key` unless the key is there (`MDB_NOOVERWRITE`: one descent of the
    /// tree finds out and writes); returns false, writing nothing, when it is.
    func insert(_ dbi: MDB_dbi, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws(StoreError) -> Bool {
        try perform(.put(dbi, key, value), flags: UInt32(MDB_NOOVERWRITE))
    }

    /// Deletes a key; returns whether it existed. Grows the map when needed: LMDB deletes
    /// write fresh pages too.
    @discardableResult
    func delete(_ dbi: MDB_dbi, _ key: [UInt8]) throws(StoreError) -> Bool {
        try key.withUnsafeBytes { k in Result { () throws(StoreError) in try delete(dbi, k) } }.get()
    }

    @discardableResult
    func delete(_ dbi: MDB_dbi, _ key: UnsafeRawBufferPointer) throws(StoreError) -> Bool {
        try perform(.delete(dbi, key))
    }

    /// Empties a database.
    func drop(_ dbi: MDB_dbi) throws(StoreError) {
        try perform(.drop(dbi))
    }

    /// Deletes a database and closes its handle, which liblmdb does at once, even if the
    /// transaction aborts later: only for a transaction without a journal, whose caller opens
    /// every handle again when it starts over.
    func dropDatabase(_ dbi: MDB_dbi) throws(StoreError) {
        precondition(!journaled, "dropDatabase needs a transaction without a journal")
        try perform(.dropDatabase(dbi))
    }

    /// Opens (with `create`, creating) the named database `name` in this transaction; `nil`
    /// when it does not exist. A write transaction journals the open: liblmdb closes the handles
    /// that an aborted transaction opened, so a replay after the map grows must open them again.
    func openDatabase(_ name: String, create: Bool) throws(StoreError) -> MDB_dbi? {
        var dbi: MDB_dbi = 0
        let rc = try growingTheMap { Self.open(txn, name, create: create, &dbi) }
        if rc == MDB_NOTFOUND && !create { return nil }
        try LMDBError.check(rc, "\(path): cannot open database \(name)")
        if isWrite && journaled && !journalGivenUp {
            let bytes = Array(name.utf8)
            var failure: StoreError?
            bytes.withUnsafeBytes { name in
                do throws(StoreError) {
                    try journal.append(.open(dbi, name: name, create: create))
                } catch {
                    failure = error
                }
            }
            if let failure { throw failure }
        }
        return dbi
    }

    private static func open(_ txn: OpaquePointer, _ name: String, create: Bool, _ dbi: inout MDB_dbi) -> Int32 {
        mdb_dbi_open(txn, name, create ? UInt32(MDB_CREATE) : 0, &dbi)
    }

    /// Applies a change, growing the map and replaying the journal on `MDB_MAP_FULL`.
    /// - Returns: false when a deleted key did not exist.
    @discardableResult
    private func perform(_ change: Change, flags: UInt32 = 0) throws(StoreError) -> Bool {
        // The first attempt made here, not in a closure: a closure around it retained and
        // released the transaction per write, even inlined. A full map is the rare case.
        var rc = apply(change, flags: flags)
        if rc == MDB_MAP_FULL { rc = try grown(after: rc) { apply(change, flags: flags) } }
        if rc == MDB_NOTFOUND, case .delete = change { return false }
        if rc == MDB_KEYEXIST && flags & UInt32(MDB_NOOVERWRITE) != 0 { return false }
        guard rc == MDB_SUCCESS else { throw LMDBError.writeError(rc, "\(path): cannot write", path: path) }
        if journaled && !journalGivenUp {
            try journal.append(change)
            if !diskCompared && journal.byteCount >= Self.journalCheckpoint { try compareTheMapWithTheDisk() }
        }
        return true
    }

    /// The journal's size at which a transaction compares the map with the disk: small
    /// transactions never pay for it, a large one replays at most this much (and the change that
    /// passed it) when the map grows to cover the disk.
    static let journalCheckpoint = 64 << 10

    /// Gives up the journal when the map covers the disk (``DiskSpace/coveringMapSize``),
    /// growing it first when it does not; keeps it when the disk cannot be measured or the map
    /// would be larger than 16 TiB or than the process can map.
    private func compareTheMapWithTheDisk() throws(StoreError) {
        diskCompared = true
        guard environment.mapCoversDisk, let space = environment.diskSpace() else { return }
        if environment.mapSize < space.coveringMapSize {
            let size = space.grownMapSize
            guard size <= DiskSpace.largestMap, environment.mapFits(size) else { return }
            let rc = try restart(growingTo: size)
            guard rc == MDB_SUCCESS else {
                throw LMDBError.writeError(rc, "\(path): cannot replay the transaction after growing the map to "
                    + "\(size) bytes", path: path)
            }
        }
        journal.discard()
        journalGivenUp = true
        givenUpWithFree = space.free
    }

    /// The one map-growth retry, for writes and commits: runs `attempt` until it does not find
    /// the map full. Each time it does, the transaction ends (if `attempt` left it open), the map
    /// doubles, and a new write transaction replays the journal before `attempt` runs again.
    private func growingTheMap(_ attempt: () -> Int32) throws(StoreError) -> Int32 {
        let rc = attempt()
        return rc == MDB_MAP_FULL ? try grown(after: rc, attempt) : rc
    }

    /// ``growingTheMap(_:)`` once the map was full: grows it (or says why not) and attempts again.
    private func grown(after full: Int32, _ attempt: () -> Int32) throws(StoreError) -> Int32 {
        var rc = full
        if rc == MDB_MAP_FULL && !journaled {
            throw StoreError(.storeFull, "\(path): \(Self.mapFullMessage)",
                             cause: StoreError.Cause(library: "lmdb", code: MDB_MAP_FULL, message: Self.mapFullMessage))
        }
        if rc == MDB_MAP_FULL && journalGivenUp {
            throw StoreError(.storeFull, "\(path): the map of \(environment.mapSize) bytes is full: this transaction "
                + "writes more than the \(givenUpWithFree) bytes its disk had free when the map was sized to cover "
                + "them; nothing of it was written")
        }
        var growths = 0
        while rc == MDB_MAP_FULL && growths < 40 {
            growths += 1
            rc = try restart(growingTo: nil)
            if rc == MDB_MAP_FULL { continue }
            guard rc == MDB_SUCCESS else {
                throw LMDBError.error(rc, "\(path): cannot replay the transaction after growing the map")
            }
            rc = attempt()
        }
        return rc
    }

    /// Ends the transaction (if it is open), grows the map (doubles it, or to `size`), begins a
    /// new write transaction and replays the journal in it; returns the replay's result.
    private func restart(growingTo size: Int?) throws(StoreError) -> Int32 {
        if !isFinished {
            environment.end(txn, commit: false, write: true)
            isFinished = true
        }
        try environment.grow(to: size)
        txn = try environment.begin(write: true)
        isFinished = false
        guard mdb_txn_id(txn) == writeID else {
            throw StoreError(.conflict, "\(path): another process wrote to the environment without the writers' lock "
                + "while this transaction grew the map; nothing of it was written")
        }
        return try journal.replay { apply($0) }
    }

    /// `flags` for a put; a replay puts without them (what succeeded then succeeds again).
    private func apply(_ change: Change, flags: UInt32 = 0) -> Int32 {
        switch change {
        case let .put(dbi, key, value):
            var kv = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
            var vv = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
            return mdb_put(txn, dbi, &kv, &vv, flags)
        case let .delete(dbi, key):
            var kv = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
            return mdb_del(txn, dbi, &kv, nil)
        case .drop(let dbi):
            return mdb_drop(txn, dbi, 0)
        case .dropDatabase(let dbi):
            return mdb_drop(txn, dbi, 1)
        case let .open(dbi, name, create):
            var opened: MDB_dbi = 0
            let rc = Self.open(txn, String(decoding: name, as: UTF8.self), create: create, &opened)
            return rc == MDB_SUCCESS && opened != dbi ? MDB_BAD_DBI : rc
        }
    }

    /// Commits; growing the map and committing again if the commit itself finds it full. A read
    /// transaction commits to keep the database handles it opened.
    func commit() throws(StoreError) {
        let commit = { () -> Int32 in
            defer { self.isFinished = true }
            return self.environment.end(self.txn, commit: true, write: self.isWrite)
        }
        defer { releaseWritersLock() }
        let rc = isWrite ? try growingTheMap(commit) : commit()
        guard rc == MDB_SUCCESS else { throw LMDBError.writeError(rc, "\(path): cannot commit", path: path) }
    }

    /// Aborts (or for a read, ends) the transaction if it is still open.
    func finish() {
        if !isFinished {
            isFinished = true
            environment.end(txn, commit: false, write: isWrite)
        }
        releaseWritersLock()
    }

    private func releaseWritersLock() {
        guard holdsWritersLock else { return }
        holdsWritersLock = false
        environment.unlockWriters()
    }
}
