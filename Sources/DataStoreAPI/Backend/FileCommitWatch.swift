#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization

/// Commit notifications for stores kept in files (SQLite, LMDB), from the kernel's `inotify`:
/// a commit of any process writes the store's file with `write` (LMDB's meta page, SQLite's
/// write-ahead log), and the kernel reports each write to whoever watches the file. Writers pay
/// nothing for it; an observer's thread sleeps in `poll` until a write happens.
///
/// A write is reported when it has happened, which for LMDB is the commit itself (the meta page
/// is written last). SQLite publishes a commit in its shared-memory index a moment after the
/// log's last write, which the kernel does not report, so every burst of writes wakes the
/// observers again after 1, 10 and 100 ms: an observer that looked too early looks again.
///
/// Where `inotify` cannot be had (another system, a file system that does not report writes,
/// no watch left), ``watch(_:wake:)`` returns `nil` and observers poll. Writes made on another
/// machine (a network file system) are not reported; such stores must poll
/// (``Store/usesCommitNotifications``).
@_spi(Backend) public final class FileCommitWatch: CommitSubscription {
    private let active = Atomic<Bool>(true)
    private let cancelled = Atomic<Bool>(false)
    #if canImport(Glibc)
    private let inotify: Int32
    private let stopPipe: (read: Int32, write: Int32)
    #endif

    /// Watches `path` for writes; `wake` is called on a thread of the watch's own.
    public static func watch(_ path: String, wake: @escaping @Sendable () -> Void) -> FileCommitWatch? {
        #if canImport(Glibc)
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        let events = UInt32(IN_MODIFY | IN_DELETE_SELF | IN_MOVE_SELF)
        guard inotify_add_watch(fd, path, events) >= 0 else {
            Glibc.close(fd)
            return nil
        }
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else {
            Glibc.close(fd)
            return nil
        }
        for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        let watch = FileCommitWatch(inotify: fd, stopPipe: (pipeEnds[0], pipeEnds[1]))
        StoreThreads(label: "DataStore.commit-watch").submit { watch.run(wake) }
        return watch
        #else
        return nil
        #endif
    }

    #if canImport(Glibc)
    private init(inotify: Int32, stopPipe: (read: Int32, write: Int32)) {
        self.inotify = inotify
        self.stopPipe = stopPipe
    }

    /// Sleeps until the file is written or the watch is cancelled; after each burst of writes,
    /// wakes the observers at once and again after 1, 10 and 100 ms without writes.
    private func run(_ wake: @Sendable () -> Void) {
        defer {
            active.store(false, ordering: .releasing)
            Glibc.close(inotify)
        }
        let followUps: [Int32] = [1, 9, 90]
        var pending = followUps.endIndex
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            var fds = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: stopPipe.read, events: Int16(POLLIN), revents: 0)]
            let timeout = pending < followUps.endIndex ? followUps[pending] : -1
            let ready = poll(&fds, 2, timeout)
            if ready < 0 {
                if errno == EINTR { continue }
                return
            }
            if fds[1].revents != 0 { return }
            if ready == 0 {
                pending += 1
                wake()
                continue
            }
            let count = buffer.withUnsafeMutableBytes { read(inotify, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EAGAIN || errno == EINTR { continue }
                wake()
                return
            }
            if Self.fileWentAway(buffer, count: count) {
                wake()
                return
            }
            pending = 0
            wake()
        }
    }

    /// Whether the events in `buffer` say the watched file was deleted or moved (the watch ends:
    /// observers poll from then on).
    private static func fileWentAway(_ buffer: [UInt8], count: Int) -> Bool {
        var offset = 0
        let header = MemoryLayout<inotify_event>.size
        while offset + header <= count {
            let (mask, nameLength) = buffer.withUnsafeBytes { bytes in
                (bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self),
                 Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)))
            }
            if mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) != 0 { return true }
            offset += header + nameLength
        }
        return false
    }

    deinit {
        cancel()
        // Closed here, not by the thread: a cancel after the thread ended must not write to a
        // pipe without a reader.
        Glibc.close(stopPipe.read)
    }
    #endif

    public var isActive: Bool { active.load(ordering: .acquiring) }

    public func cancel() {
        #if canImport(Glibc)
        guard !cancelled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        active.store(false, ordering: .releasing)
        var byte: UInt8 = 1
        _ = Glibc.write(stopPipe.write, &byte, 1)
        Glibc.close(stopPipe.write)
        #endif
    }
}
