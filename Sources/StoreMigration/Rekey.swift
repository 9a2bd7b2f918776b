@_spi(Backend) import DataStoreAPI
import Foundation

/// Gives a store a new key (or encrypts a store, or decrypts one) as a verified copy and a swap:
/// the store is copied, with a new data key under the new key, beside itself (`PATH.rekeyed`), the
/// copy is verified item by item against the store, and the two then trade places in one
/// `renameat2(RENAME_EXCHANGE)`, so that the path names either the whole old store or the whole
/// new one, never a store half rekeyed. The old store is deleted last.
///
/// A run stopped anywhere (Ctrl-C, SIGKILL, a full disk) is finished by running it again: an
/// unfinished copy is resumed, a finished one not yet swapped is brought up to date and swapped,
/// an old store left after the swap is deleted. A marker (a reserved record) in the new store,
/// from just before the swap until the old store is gone, tells which of the two is which.
///
/// The store must not be open in another process while it is rekeyed (that process would keep
/// writing to the old store); to move a running app, use a ``SwitchingStore`` onto an encrypted
/// store instead.
public enum Rekey {
    /// The reserved record the rekeyed copy holds until it has taken the store's place: it tells
    /// the new store from the old one when a run stopped between the swap and the deletion.
    static let stagedKey = "datastore.rekey.staged"

    /// Where the copy under the new key is made.
    public static func stagingLocation(of location: StoreLocation, newKey: StoreKey?) -> StoreLocation {
        StoreLocation(kind: location.kind, path: location.path + ".rekeyed", key: newKey)
    }

    /// Rekeys the store at `location` (opened with its current key, `location.key`) to `newKey`
    /// (`nil` decrypts it).
    /// - Returns: the copy's report, or `nil` when a run stopped after the swap was only
    ///   finished (the old store deleted).
    /// - Throws: `invalidArgument` for a kind whose stores are not files, or a store in use;
    ///   what the copy throws; ``MigrationInterrupted`` when `shouldStop` returned true.
    @discardableResult
    public static func rekey(_ location: StoreLocation, to newKey: StoreKey?, options: MigrationOptions = MigrationOptions(),
                             shouldStop: @escaping () -> Bool = { false },
                             progress: @escaping (MigrationProgress) -> Void = { _ in }) throws -> MigrationReport? {
        let backend = try location.backend
        if backend is any StreamedStoreBackend {
            throw StoreError(.invalidArgument, "\(location.kind) stores are written whole, never changed in place: copy it "
                + "to a new file with the new key (migrate-store copy --to-key-file)")
        }
        guard let file = backend.fileSystemPath(of: location.path) else {
            throw StoreError(.invalidArgument, "rekey swaps a store's files, and \(location.kind) stores are not files: "
                + "copy it to a new location with the new key (migrate-store copy --to-key-file), then point the app "
                + "at it")
        }
        let staged = stagingLocation(of: location, newKey: newKey)
        var options = options
        options.verify = true
        options.overwrite = false
        // After the swap the path holds the new store, marked until the old one, now beside it
        // under the old key, is deleted: a run stopped there only has that left to do.
        if try holdsMarker(location.with(key: newKey)) {
            try finish(location, staged)
            return nil
        }
        switch try Migrator.copyState(of: staged) {
        case .missing:
            options.resume = false
        case .unfinished:
            options.resume = true
        case .complete:
            // A verified copy not yet swapped: brought up to date with what the store gained
            // since (a sync), verified again, then swapped.
            try settle(location, file: file)
            _ = try Migrator.sync(from: location, to: staged, options: options, shouldStop: shouldStop, progress: progress)
            let report = try Migrator.verify(from: location, to: staged, options: options, shouldStop: shouldStop,
                                             progress: progress)
            return try swapIn(staged, for: location, file: file, verified: report, after: " after a sync")
        }
        guard location.exists else {
            throw StoreError(.notFound, "\(location) does not exist")
        }
        try settle(location, file: file)
        let report = try Migrator.copy(from: location, to: staged, options: options, shouldStop: shouldStop,
                                       progress: progress)
        return try swapIn(staged, for: location, file: file, verified: report, after: "")
    }

    /// Puts the verified copy in the store's place: refused unless the verification found no
    /// difference, then marked, swapped and finished (the old store deleted).
    private static func swapIn(_ staged: StoreLocation, for location: StoreLocation, file: String,
                               verified report: MigrationReport, after: String) throws -> MigrationReport {
        guard report.differences == 0 else {
            throw StoreError(.corrupt, "the copy of \(location) under the new key differs from it in "
                + "\(report.differences) items\(after); the store was left as it was")
        }
        try mark(staged)
        try swap(file, with: try stagedFile(staged), location)
        try finish(location, staged)
        return report
    }

    private static func stagedFile(_ staged: StoreLocation) throws -> String {
        guard let file = try staged.backend.fileSystemPath(of: staged.path) else {
            throw StoreError(.invalidArgument, "\(staged) is not a file")
        }
        return file
    }

    /// Whether the store at `location` opens with its key and holds the marker of a rekeyed copy.
    private static func holdsMarker(_ location: StoreLocation) throws -> Bool {
        guard let store = try? Migrator.acceptingUnfinished({ try location.open(schema: nil) }) else { return false }
        defer { try? store.close() }
        return try store.read { try $0.metadata(forKey: stagedKey) } != nil
    }

    /// Marks the verified copy as the new store, before it is swapped into place: once swapped,
    /// the marker at the store's path (until ``finish(_:_:)`` removes it) says that what is
    /// beside it is the old store.
    private static func mark(_ staged: StoreLocation) throws {
        let store = try staged.open(schema: nil)
        defer { try? store.close() }
        try store.writeSync { try $0.setReservedMetadata(Array(staged.description.utf8), forKey: stagedKey) }
    }

    /// Opens and closes the store once, so that a SQLite store's write-ahead log is folded into
    /// its file (the swap moves the file alone), and refuses a store another process holds open.
    private static func settle(_ location: StoreLocation, file: String) throws {
        let store = try location.open(schema: nil)
        try store.close()
        for suffix in ["-wal", "-shm"] {
            let side = file + suffix
            if let size = (try? FileManager.default.attributesOfItem(atPath: side))?[.size] as? Int, size > 0,
               suffix == "-wal" {
                throw StoreError(.invalidArgument, "\(location) is in use (its write-ahead log \(side) stays after it "
                    + "closed): close the app that has it open, then rekey it")
            }
        }
    }

    /// Deletes the old store (now at the staging path, if a stopped run left it) and the marker
    /// of the new one.
    private static func finish(_ location: StoreLocation, _ staged: StoreLocation) throws {
        let old = StoreLocation(kind: staged.kind, path: staged.path, key: location.key)
        if old.exists { try old.destroy() }
        let store = try location.with(key: staged.key).open(schema: nil)
        defer { try? store.close() }
        try store.writeSync { try $0.setReservedMetadata(nil, forKey: stagedKey) }
    }

    /// Exchanges two paths atomically (Linux's `renameat2` with `RENAME_EXCHANGE`).
    private static func swap(_ a: String, with b: String, _ location: StoreLocation) throws {
        // SQLite's side files belong to the file they sit beside: none may be left to pair with
        // the other store after the swap. Both stores were closed, which folds a log into its
        // file; a log that still holds anything is never deleted, the swap is refused.
        for file in [a, b] {
            if let size = (try? FileManager.default.attributesOfItem(atPath: file + "-wal"))?[.size] as? Int, size > 0 {
                throw StoreError(.invalidArgument, "\(file)-wal still holds transactions after its store closed: "
                    + "another process has \(location) open; close it, then run rekey again")
            }
        }
        for file in [a, b] {
            for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: file + suffix) {
                try FileManager.default.removeItem(atPath: file + suffix)
            }
        }
        typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "renameat2") else {
            throw StoreError(.io, "this system's C library has no renameat2, which rekey needs to swap \(location) "
                + "atomically")
        }
        let renameat2 = unsafeBitCast(symbol, to: RenameAt2.self)
        let exchange: UInt32 = 1 << 1  // RENAME_EXCHANGE
        guard renameat2(AT_FDCWD, a, AT_FDCWD, b, exchange) == 0 else {
            let reason = String(cString: strerror(errno))
            throw StoreError(.io, "cannot swap \(a) and \(b): \(reason); \(location) was left as it was")
        }
        // The swap is durable once the directory that holds both names is.
        let directory = open(PathNames.containingDirectory(of: a),
                             O_RDONLY | O_DIRECTORY)
        if directory >= 0 {
            _ = fsync(directory)
            close(directory)
        }
    }
}
