import DataStoreAPI
import Foundation
import Synchronization

/// Keeps a switch's background work (the copy, the follow, the cutover, a rollback) to one
/// `SwitchingStore` at a time: within a process by the old store's location, across processes by
/// an exclusive `flock` on a file beside a file store (`app.sqlite.switch-lock`), which the
/// kernel releases when the process ends, however it ends.
///
/// A second instance of an app launched while the first one switches is refused with `busy`,
/// naming the other process, instead of running a second copy into the same new store (it
/// died with `keyExists`). Once the switch has cut over, the lock is released and any number of
/// processes open the switched store.
final class SwitchLock: @unchecked Sendable {
    // `@unchecked Sendable`: `descriptor` and `key` are set once in `init`; `release` runs under
    // `released`'s lock.
    private let descriptor: Int32
    private let key: String
    private let released = Mutex(false)

    private static let heldInThisProcess = Mutex<Set<String>>([])

    private init(descriptor: Int32, key: String) {
        self.descriptor = descriptor
        self.key = key
    }

    /// Takes the lock of a switch from `old` to `new`.
    /// - Throws: `busy` naming the process that holds it; `io` when the lock file cannot be made.
    static func acquire(old: StoreLocation, new: StoreLocation) throws -> SwitchLock {
        let key = old.description
        let inserted = heldInThisProcess.withLock { $0.insert(key).inserted }
        guard inserted else {
            throw StoreError(.busy, "another SwitchingStore of this process is switching \(old) to \(new); open one "
                + "per process, and close it before opening another")
        }
        guard StoreBackends.isFileKind(old.kind) else { return SwitchLock(descriptor: -1, key: key) }
        let path = old.path + ".switch-lock"
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            heldInThisProcess.withLock { _ = $0.remove(key) }
            throw StoreError(.io, "the switch's lock file \(path) cannot be opened: \(String(cString: strerror(errno)))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let holder = (try? String(contentsOfFile: path, encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            close(descriptor)
            heldInThisProcess.withLock { _ = $0.remove(key) }
            throw StoreError(.busy, "another process\(holder.isEmpty ? "" : " (pid \(holder))") is switching \(old) "
                + "to \(new); run one instance of the app until the switch has cut over (its lock is \(path))")
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = pid.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        return SwitchLock(descriptor: descriptor, key: key)
    }

    /// Removes the lock file of a store that is gone (the old store, dropped after a switch).
    static func removeFile(of old: StoreLocation) {
        guard StoreBackends.isFileKind(old.kind) else { return }
        unlink(old.path + ".switch-lock")
    }

    /// Gives the lock up (once; later calls do nothing).
    func release() {
        released.withLock { released in
            guard !released else { return }
            released = true
            if descriptor >= 0 {
                _ = ftruncate(descriptor, 0)
                close(descriptor)
            }
            Self.heldInThisProcess.withLock { _ = $0.remove(key) }
        }
    }

    deinit { release() }
}
