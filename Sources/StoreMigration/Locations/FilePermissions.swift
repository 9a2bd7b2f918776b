import DataStoreAPI
import Foundation

/// The permission bits a migration gives the files it creates: those of the source's files, as
/// `cp -p` and `rsync -p` keep them (with the owner's read and write, which the copy needs), so
/// that a store only its owner can read is not copied into files every local user can read. A source without files of its own (PostgreSQL, in-memory)
/// leaves the destination's files as the umask makes them.
struct FilePermissions: Equatable {
    /// The permission bits of a file (a directory adds search where it has read).
    let fileMode: mode_t

    /// The permission bits of `location`'s files: its file, or for a directory (an LMDB
    /// environment) its data file; `nil` when it has no file.
    init?(of location: StoreLocation) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: location.path, isDirectory: &isDirectory) else { return nil }
        var info = stat()
        let file = isDirectory.boolValue ? location.path + "/data.mdb" : location.path
        guard stat(file, &info) == 0 || stat(location.path, &info) == 0 else { return nil }
        // Who may read and write as on the source, and the owner always both: the copy writes
        // its destination, and the source may sit on read-only media with 0444.
        fileMode = info.st_mode & 0o666 | 0o600
    }

    var directoryMode: mode_t { fileMode | ((fileMode & 0o444) >> 2) }

    /// Gives `path` these permission bits, and every file of it when it is a directory, and the
    /// files kept beside it that exist: SQLite's `-wal` and `-shm`, a staging copy and its
    /// checkpoint.
    func apply(to path: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            try change(path, to: directoryMode)
            for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
                try apply(to: path + "/" + name)
            }
            return
        }
        for file in [path, path + "-wal", path + "-shm", path + "-journal", path + ".migrating",
                     path + ".migrating.checkpoint"] where FileManager.default.fileExists(atPath: file) {
            try change(file, to: fileMode)
        }
    }

    private func change(_ path: String, to mode: mode_t) throws {
        guard chmod(path, mode) == 0 else {
            throw StoreError(.io, "cannot set the permissions of \(path) to \(String(mode, radix: 8)): "
                + String(cString: strerror(errno)))
        }
    }
}
