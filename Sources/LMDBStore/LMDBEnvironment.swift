internal import CLMDB
@_spi(Backend) import DataStoreAPI
import Foundation
import Logging
import Synchronization

/// An open LMDB environment: the `MDB_env` handle, its named databases, the lock that keeps
/// read transactions out while the map grows, and the lock that keeps writers of other
/// processes out while this one grows it.
///
/// `@unchecked Sendable`: `env` is thread-safe for what we do with it (LMDB environments are
/// shared by threads; with `MDB_NOTLS` read transactions are not tied to a thread); the
/// database handles are written only while opening, before the environment is shared; every
/// transaction holds `resizeLock` for reading, and the map size is changed only with it held for
/// writing, so no transaction of this process is active (the contract of `mdb_env_set_mapsize`).
final class LMDBEnvironment: @unchecked Sendable {
    let env: OpaquePointer
    let path: String
    private let resizeLock: UnsafeMutablePointer<pthread_rwlock_t>
    /// `data.mdb` opened once more, for ``lockWriters()`` (`flock`); -1 when read-only.
    private var writersFile: Int32 = -1
    private(set) var mapSize: Int
    private var isClosed = false
    /// ``LMDBOptions/mapCoversDisk``.
    let mapCoversDisk: Bool
    /// The size of `data.mdb` and the bytes its file system has free, or `nil` when either
    /// cannot be read; replaceable by tests, which cannot fill a real disk.
    var diskSpace: () -> DiskSpace?
    /// ``canMap(_:)``; replaceable by tests, which cannot limit their process's address space.
    var mapFits: (Int) -> Bool = LMDBEnvironment.canMap

    /// Whether the environment was opened with `MDB_RDONLY`.
    let isReadOnly: Bool

    /// Read transactions that ended, reset (`mdb_txn_reset`) rather than freed, which the next
    /// reads renew (`mdb_txn_renew`) rather than begin anew: `mdb_txn_begin` allocates and
    /// zeroes a read transaction's table of `maxdbs` databases (about 100 KiB for 2,048). In C, a
    /// read transaction of one `mdb_get` took 2.1 to 2.5 µs begun and aborted, 0.32 µs renewed
    /// and reset (0.41 to 0.45 µs begun with `maxdbs` 8). With `MDB_NOTLS` a reset transaction
    /// keeps its reader slot, whose snapshot it has let go (it pins no page); the process never
    /// holds more slots than it has had reads at once. At most ``idleReadsKept`` are kept, as
    /// addresses (one taken from here is used by one thread at a time); they are freed when the
    /// map is remapped and when the environment closes.
    private let idleReads = Mutex<[UInt]>([])
    private static let idleReadsKept = 8

    /// Opens the environment. Read-only, it is opened with `MDB_RDONLY`, so nothing is ever
    /// written to it; where the lock file cannot be opened or created (read-only media, a
    /// directory without write permission) it is opened with `MDB_NOLOCK` as well, which is
    /// safe only because no process can write there either.
    init(path: String, mapSize: Int, maxReaders: UInt32, durability: Durability,
         readOnly: Bool = false, mapCoversDisk: Bool = true) throws(StoreError) {
        self.path = path
        isReadOnly = readOnly
        self.mapCoversDisk = mapCoversDisk && !readOnly
        diskSpace = { nil }
        // MDB_NOTLS: read transactions belong to the transaction object, not the thread, so
        // Swift concurrency may run a read block on any thread.
        var flags = UInt32(MDB_NOTLS)
        // .normal: MDB_NOMETASYNC keeps every commit atomic and the environment consistent after an OS
        // crash (only the last commits may be lost); MDB_NOSYNC could damage it.
        if durability == .normal { flags |= UInt32(MDB_NOMETASYNC) }
        if readOnly { flags |= UInt32(MDB_RDONLY) }
        var opened = Self.open(path, flags: flags, mapSize: mapSize, maxReaders: maxReaders)
        if readOnly, case .failure(let error) = opened, error.code == .readOnly {
            // mdb_env_open failing leaves the handle unusable: a new one tries without the lock file.
            opened = Self.open(path, flags: flags | UInt32(MDB_NOLOCK), mapSize: mapSize, maxReaders: maxReaders)
        }
        env = try opened.get()
        resizeLock = .allocate(capacity: 1)
        // Writer-preferring: a thread that reads without pause must not keep the map from ever
        // growing (glibc prefers readers by default). No thread takes it twice for reading:
        // reads nested in a block join its transaction.
        var attributes = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attributes)
        pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        pthread_rwlock_init(resizeLock, &attributes)
        pthread_rwlockattr_destroy(&attributes)
        self.mapSize = mapSize
        // Every stored property is set, so if anything below throws, deinit closes the
        // environment exactly once.
        var info = MDB_envinfo()
        try LMDBError.check(mdb_env_info(env, &info), "\(path): mdb_env_info")
        self.mapSize = info.me_mapsize
        // Clear reader slots left by processes that crashed while reading.
        var dead: Int32 = 0
        try LMDBError.check(mdb_reader_check(env, &dead), "\(path): mdb_reader_check")
        if !readOnly {
            writersFile = Foundation.open(path + "/data.mdb", O_RDONLY | O_CLOEXEC)
            guard writersFile >= 0 else {
                throw StoreError(.io, "\(path)/data.mdb: cannot open it for the writers' lock: "
                    + String(cString: strerror(errno)))
            }
            let file = writersFile
            diskSpace = { DiskSpace.of(file) }
        }
    }

    /// A new handle opened on `path`; on failure it is closed again (mdb_env_close is required
    /// even after mdb_env_open fails, and the handle cannot be opened twice).
    private static func open(_ path: String, flags: UInt32, mapSize: Int,
                             maxReaders: UInt32) -> Result<OpaquePointer, StoreError> {
        var handle: OpaquePointer?
        let created = mdb_env_create(&handle)
        guard created == MDB_SUCCESS, let handle else {
            return .failure(LMDBError.error(created, "\(path): cannot create an LMDB environment"))
        }
        var rc = mdb_env_set_maxdbs(handle, 2048)
        if rc == MDB_SUCCESS { rc = mdb_env_set_maxreaders(handle, maxReaders) }
        if rc == MDB_SUCCESS { rc = mdb_env_set_mapsize(handle, mapSize) }
        if rc == MDB_SUCCESS { rc = mdb_env_open(handle, path, flags, 0o644) }
        guard rc == MDB_SUCCESS else {
            mdb_env_close(handle)
            return .failure(LMDBError.error(rc, "\(path): cannot open the environment"))
        }
        return .success(handle)
    }

    deinit {
        try? close()
        pthread_rwlock_destroy(resizeLock)
        resizeLock.deallocate()
    }

    /// Flushes (unless read-only) and closes the environment.
    /// - Throws: the error of `mdb_env_sync` (a full disk, an I/O error); the environment is
    ///   closed either way.
    func close() throws(StoreError) {
        guard !isClosed else { return }
        isClosed = true
        freeIdleReads()
        if writersFile >= 0 { Foundation.close(writersFile) }
        let rc = isReadOnly ? MDB_SUCCESS : mdb_env_sync(env, 1)
        mdb_env_close(env)
        try LMDBError.check(rc, "\(path): cannot flush the environment to disk on close")
    }

    /// Begins a transaction, which holds the resize lock for reading until ``end(_:commit:write:)``.
    ///
    /// When another process has grown the map (`MDB_MAP_RESIZED`), this process adopts the new
    /// size first: `mdb_env_set_mapsize(env, 0)` needs every transaction of this process ended,
    /// which taking the resize lock for writing waits for. Reads nested in a block join its
    /// transaction and never begin one, so they cannot wait for themselves here.
    func begin(write: Bool) throws(StoreError) -> OpaquePointer {
        var adopted = 0
        while true {
            pthread_rwlock_rdlock(resizeLock)
            let rc: Int32
            if !write, let idle = idleReads.withLock({ $0.popLast() }).flatMap(OpaquePointer.init(bitPattern:)) {
                rc = mdb_txn_renew(idle)
                if rc == MDB_SUCCESS { return idle }
                if rc == MDB_BAD_RSLOT {
                    // Its reader slot is no longer this process's: another process's
                    // `mdb_reader_check` found it dead (this process lost its lock on lock.mdb,
                    // which closing another descriptor of that file does), and the slot may be
                    // another reader's now. Freeing the transaction would clear the slot, so it
                    // is let go without; the read begins a transaction of its own.
                    pthread_rwlock_unlock(resizeLock)
                    continue
                }
                // Any other failure leaves the transaction ended with its slot: freed here.
                mdb_txn_abort(idle)
            } else {
                var txn: OpaquePointer?
                rc = mdb_txn_begin(env, nil, write ? 0 : UInt32(MDB_RDONLY), &txn)
                if rc == MDB_SUCCESS, let txn { return txn }
            }
            pthread_rwlock_unlock(resizeLock)
            guard rc == MDB_MAP_RESIZED, adopted < 8 else {
                throw LMDBError.error(rc, "\(path): cannot begin a \(write ? "write" : "read") transaction")
            }
            adopted += 1
            try adoptLargerMap(0)
        }
    }

    /// The id of the last committed write transaction of any process (`mdb_env_info`), read
    /// under the resize lock so that no remapping runs meanwhile.
    func lastCommittedTransaction() throws(StoreError) -> UInt64 {
        pthread_rwlock_rdlock(resizeLock)
        defer { pthread_rwlock_unlock(resizeLock) }
        var info = MDB_envinfo()
        try LMDBError.check(mdb_env_info(env, &info), "\(path): mdb_env_info")
        return UInt64(info.me_last_txnid)
    }

    /// Takes the writers' lock, an exclusive `flock` on `data.mdb` that every write transaction
    /// of this toolkit holds from before it begins until it ends, waiting for the writer of
    /// another process to finish. LMDB's own writer mutex is released when a transaction aborts
    /// to grow the map; this lock is not, so no writer of another process commits between the
    /// abort and the replay of the journal in the larger map. The kernel releases it when a
    /// process dies.
    func lockWriters() throws(StoreError) {
        while flock(writersFile, LOCK_EX) != 0 {
            guard errno == EINTR else {
                throw StoreError(.io, "\(path)/data.mdb: cannot take the writers' lock: " + String(cString: strerror(errno)))
            }
        }
    }

    func unlockWriters() {
        _ = flock(writersFile, LOCK_UN)
    }

    /// Commits (or aborts) a transaction from ``begin(write:)`` and releases the resize lock.
    /// `mdb_txn_commit` frees the transaction whether it succeeds or not. A read transaction that
    /// is not committed is reset and kept for the next read (``idleReads``) while fewer than
    /// ``idleReadsKept`` are; resetting closes the database handles it opened, as aborting does.
    @discardableResult
    func end(_ txn: OpaquePointer, commit: Bool, write: Bool) -> Int32 {
        var rc = MDB_SUCCESS
        if commit {
            rc = mdb_txn_commit(txn)
        } else if write {
            mdb_txn_abort(txn)
        } else {
            mdb_txn_reset(txn)
            let kept = idleReads.withLock { idle in
                guard idle.count < Self.idleReadsKept else { return false }
                idle.append(UInt(bitPattern: txn))
                return true
            }
            if !kept { mdb_txn_abort(txn) }
        }
        pthread_rwlock_unlock(resizeLock)
        return rc
    }

    /// Frees the reset read transactions kept for later reads.
    private func freeIdleReads() {
        let idle = idleReads.withLock { idle in
            defer { idle.removeAll() }
            return idle
        }
        for address in idle { if let txn = OpaquePointer(bitPattern: address) { mdb_txn_abort(txn) } }
    }

    /// Doubles the map, or makes it `size` bytes. Called by the writer with its transaction
    /// ended; waits for the other transactions of this process to end.
    func grow(to size: Int? = nil) throws(StoreError) {
        let before = mapSize
        try adoptLargerMap(size ?? mapSize * 2)
        logger.withLock { $0 }?.notice("LMDB map grown", metadata: [
            "path": "\(path)", "fromBytes": "\(before)", "toBytes": "\(mapSize)",
        ])
    }

    /// The store's logger, when the app configured one.
    let logger = Mutex<Logger?>(nil)

    /// Whether the process has the address space to map `size` bytes more, tried with a
    /// mapping that reserves nothing. liblmdb unmaps the old map before it maps the new one and
    /// is left without any map when that fails (`mdb_env_set_mapsize`), so a size the process
    /// cannot map (`ulimit -v`, valgrind) must be refused before liblmdb sees it.
    static func canMap(_ size: Int) -> Bool {
        guard let probe = mmap(nil, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0),
              probe != MAP_FAILED else { return false }
        munmap(probe, size)
        return true
    }

    private func adoptLargerMap(_ size: Int) throws(StoreError) {
        if size > 0 && !mapFits(size) {
            throw StoreError(.storeFull, "\(path): cannot grow the map to \(size) bytes: the process has no address "
                + "space left to map it")
        }
        var deadline = timespec()
        clock_gettime(CLOCK_REALTIME, &deadline)
        deadline.tv_sec += 60
        guard pthread_rwlock_timedwrlock(resizeLock, &deadline) == 0 else {
            throw StoreError(.busy, "\(path): the map must grow but transactions of this process stayed open "
                + "for 60 s")
        }
        defer { pthread_rwlock_unlock(resizeLock) }
        // liblmdb remaps with reset read transactions about (it refuses only an active write
        // transaction); they are freed first all the same, so that no transaction of this
        // process outlives the map it was begun in.
        freeIdleReads()
        try LMDBError.check(mdb_env_set_mapsize(env, size), "\(path): cannot grow the map to \(size) bytes")
        var info = MDB_envinfo()
        try LMDBError.check(mdb_env_info(env, &info), "\(path): mdb_env_info")
        mapSize = info.me_mapsize
    }

    /// The unnamed main database, which lists the named ones.
    func mainDatabase(in txn: OpaquePointer) throws(StoreError) -> MDB_dbi {
        var dbi: MDB_dbi = 0
        try LMDBError.check(mdb_dbi_open(txn, nil, 0, &dbi), "\(path): cannot open the main database")
        return dbi
    }
}

/// The room a write transaction can take on the disk of an environment.
struct DiskSpace {
    /// The bytes of `data.mdb`: pages a transaction writes below this end reuse the file's room.
    var fileSize: Int
    /// The bytes free on its file system (counting those reserved for root: a conservative
    /// guess, since a larger guess only makes the map larger).
    var free: Int

    static func of(_ file: Int32) -> DiskSpace? {
        var status = stat()
        var system = statvfs()
        guard fstat(file, &status) == 0, fstatvfs(file, &system) == 0 else { return nil }
        let (free, overflow) = Int(clamping: system.f_bfree).multipliedReportingOverflow(by: Int(clamping: system.f_frsize))
        return overflow ? nil : DiskSpace(fileSize: Int(status.st_size), free: free)
    }

    /// The map size past which a transaction cannot fill the map before it fills the disk:
    /// every page it adds beyond the file's end must be written to the disk at the commit.
    /// 64 MiB more allow for space that other processes free meanwhile.
    var coveringMapSize: Int { fileSize + free + Self.slack }

    /// The size to grow a map to when it does not cover the disk: the free space twice, so that
    /// later transactions find it covered while the disk's free space changes a little.
    var grownMapSize: Int { (fileSize + 2 * free + Self.slack + (1 << 20) - 1) & ~((1 << 20) - 1) }

    private static let slack = 64 << 20
    /// No map beyond 16 TiB of address space: a file system with more free than that keeps
    /// the journal.
    static let largestMap = 1 << 44
}
