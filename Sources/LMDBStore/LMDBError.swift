internal import CLMDB
@_spi(Backend) import DataStoreAPI
import Foundation

/// Turns an LMDB (or errno) return code into the package's error, with the code as the cause.
/// Every LMDB call goes through ``check(_:_:)``.
enum LMDBError {
    static func check(_ rc: Int32, _ context: @autoclosure () -> String) throws(StoreError) {
        guard rc == MDB_SUCCESS else { throw error(rc, context()) }
    }

    /// The error of a failed write or commit in the environment at `path`: LMDB reports a write
    /// that found no room as EIO when the page flush fails, so EIO on a file system with no free
    /// space left is `storeFull`.
    static func writeError(_ rc: Int32, _ context: String, path: String) -> StoreError {
        var space = statvfs()
        if rc == EIO, statvfs(path, &space) == 0, UInt64(space.f_bavail) * UInt64(space.f_frsize) < 1 << 20 {
            return error(ENOSPC, context)
        }
        return error(rc, context)
    }

    static func error(_ rc: Int32, _ context: String) -> StoreError {
        let cause = StoreError.Cause(library: "lmdb", code: rc, message: String(cString: mdb_strerror(rc)))
        switch rc {
        case MDB_MAP_FULL, ENOSPC, EDQUOT, EFBIG:
            return StoreError(.storeFull, "\(context): the disk is full (or a file size limit was reached)",
                              cause: cause)
        case MDB_CORRUPTED, MDB_PANIC, MDB_PAGE_NOTFOUND:
            return StoreError(.corrupt, "\(context): the environment is damaged", cause: cause)
        case MDB_INVALID:
            return StoreError(.notAStore, "\(context): not an LMDB environment", cause: cause)
        case MDB_VERSION_MISMATCH:
            return StoreError(.incompatibleFormat, "\(context): written by another LMDB version", cause: cause)
        case MDB_READERS_FULL, MDB_TXN_FULL, MDB_MAP_RESIZED:
            return StoreError(.busy, context, cause: cause)
        case MDB_BAD_VALSIZE:
            return StoreError(.limitExceeded, "\(context): key or value too large", cause: cause)
        case EACCES, EROFS, EPERM:
            return StoreError(.readOnly, "\(context): permission denied", cause: cause)
        case ENOENT:
            return StoreError(.notFound, "\(context): no such file or directory", cause: cause)
        default:
            return StoreError(.io, context, cause: cause)
        }
    }
}
