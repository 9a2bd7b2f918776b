internal import CLMDB
import DataStoreAPI
import Foundation

/// An open LMDB environment: the `MDB_env` handle, its named databases, and the lock that
/// keeps read transactions out while the map grows.
///
/// `@unchecked Sendable`: `env` is thread-safe for what we do with it (LMDB environments are
/// shared by threads; with `MDB_NOTLS` read transactions are not tied to a thread); the
/// database handles are written only while opening, before the environment is shared; the map
/// size is changed only by the single writer, with `resizeLock` held for writing, so no
/// transaction of this process is active (the contract of `mdb_env_set_mapsize`).
final class LMDBEnvironment: @unchecked Sendable {
    let env: OpaquePointer
    let path: String
    private let resizeLock: UnsafeMutablePointer<pthread_rwlock_t>
    private(set) var mapSize: Int
    private var isClosed = false

    init(path: String, mapSize: Int, maxReaders: UInt32, durability: Durability) throws(StoreError) {
        self.path = path
        var handle: OpaquePointer?
        try LMDBError.check(mdb_env_create(&handle), "\(path): cannot create an LMDB environment")
        guard let handle else { throw StoreError(.io, "\(path): mdb_env_create returned no handle") }
        env = handle
        resizeLock = .allocate(capacity: 1)
        pthread_rwlock_init(resizeLock, nil)
        self.mapSize = mapSize
        // Every stored property is set, so if anything below throws, deinit closes the
        // environment (mdb_env_close is required even after mdb_env_open fails) exactly once.
        try LMDBError.check(mdb_env_set_maxdbs(env, 2048), "\(path): mdb_env_set_maxdbs")
        try LMDBError.check(mdb_env_set_maxreaders(env, maxReaders), "\(path): mdb_env_set_maxreaders")
        try LMDBError.check(mdb_env_set_mapsize(env, mapSize), "\(path): mdb_env_set_mapsize")
        // MDB_NOTLS: read transactions belong to the transaction object, not the thread, so
        // Swift concurrency may run a read block on any thread.
        var flags = UInt32(MDB_NOTLS)
        // .normal: MDB_NOMETASYNC keeps every commit atomic and the environment consistent after an OS
        // crash (only the last commits may be lost); MDB_NOSYNC could damage it.
        if durability == .normal { flags |= UInt32(MDB_NOMETASYNC) }
        try LMDBError.check(mdb_env_open(env, path, flags, 0o644), path)
        var info = MDB_envinfo()
        try LMDBError.check(mdb_env_info(env, &info), "\(path): mdb_env_info")
        self.mapSize = info.me_mapsize
        // Clear reader slots left by processes that crashed while reading.
        var dead: Int32 = 0
        try LMDBError.check(mdb_reader_check(env, &dead), "\(path): mdb_reader_check")
    }

    deinit {
        close()
        pthread_rwlock_destroy(resizeLock)
        resizeLock.deallocate()
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        mdb_env_sync(env, 1)
        mdb_env_close(env)
    }

    /// Begins a transaction. A read transaction holds the resize lock for reading until
    /// ``end(_:isWrite:)``.
    func begin(write: Bool) throws(StoreError) -> OpaquePointer {
        if !write { pthread_rwlock_rdlock(resizeLock) }
        var txn: OpaquePointer?
        var rc = mdb_txn_begin(env, nil, write ? 0 : UInt32(MDB_RDONLY), &txn)
        if rc == MDB_MAP_RESIZED, write {
            // Another process grew the map: adopt its size, then begin again.
            try adoptLargerMap(0)
            rc = mdb_txn_begin(env, nil, 0, &txn)
        }
        guard rc == MDB_SUCCESS, let txn else {
            if !write { pthread_rwlock_unlock(resizeLock) }
            throw LMDBError.error(rc, "\(path): cannot begin a \(write ? "write" : "read") transaction")
        }
        return txn
    }

    /// Ends a read transaction and releases the resize lock.
    func endRead(_ txn: OpaquePointer) {
        mdb_txn_abort(txn)
        pthread_rwlock_unlock(resizeLock)
    }

    /// Doubles the map. Called by the writer with no write transaction open; waits for the
    /// running reads of this process to end.
    func grow() throws(StoreError) {
        try adoptLargerMap(mapSize * 2)
    }

    private func adoptLargerMap(_ size: Int) throws(StoreError) {
        var deadline = timespec()
        clock_gettime(CLOCK_REALTIME, &deadline)
        deadline.tv_sec += 60
        guard pthread_rwlock_timedwrlock(resizeLock, &deadline) == 0 else {
            throw StoreError(.busy, "\(path): the map must grow but reads stayed open for 60 s (a read inside a "
                + "write block of the same store holds it)")
        }
        defer { pthread_rwlock_unlock(resizeLock) }
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

    /// Opens (optionally creating) a named database inside `txn`.
    func openDatabase(_ name: String, in txn: OpaquePointer, create: Bool) throws(StoreError) -> MDB_dbi? {
        var dbi: MDB_dbi = 0
        let rc = mdb_dbi_open(txn, name, create ? UInt32(MDB_CREATE) : 0, &dbi)
        if rc == MDB_NOTFOUND { return nil }
        try LMDBError.check(rc, "\(path): cannot open database \(name)")
        return dbi
    }
}
