import Foundation

/// The checks before a command writes a file of its own (an export, a report, a change set,
/// rejected objects): such a file replaces what is at its path (a temporary file renamed over
/// it), so a path that names a store, a file the same command reads, or something that is not a
/// regular file is refused first, naming what is there, and nothing is replaced.
@_spi(Backend) public enum OutputFiles {
    /// Refuses `path` as the file `option` (`--report`, `-o`) writes: an empty path; a path
    /// that is a directory, a link, a device or a FIFO; a file that holds a SQLite database, an
    /// LMDB environment or a JSON Lines store; a file inside an LMDB store's directory; the same
    /// file as one of `inputs` (the command's stores, key files and input files, as given).
    /// - Throws: `invalidArgument`, naming the option, the path and what is there.
    public static func check(_ path: String, option: String, inputs: [String] = []) throws(StoreError) {
        guard !path.isEmpty else {
            throw StoreError(.invalidArgument, "\(option) is empty; name the file to write")
        }
        let directory = PathNames.containingDirectory(of: path)
        if FileManager.default.fileExists(atPath: (directory as NSString).appendingPathComponent("data.mdb")) {
            throw StoreError(.invalidArgument, "\(option) \(path) is inside the LMDB store \(directory); "
                + "name a file outside it")
        }
        // A store the command makes (the copy's destination, which does not exist yet), or a
        // file it writes besides (diff -o), named again: compared by where the names lead.
        let written = canonical(path)
        for input in inputs where !input.isEmpty && canonical(input) == written {
            throw StoreError(.invalidArgument, "\(option) \(path) is the file the command reads or writes as \(input); "
                + "name another file")
        }
        if let suffix = ["-wal", "-shm", "-journal"].first(where: { path.hasSuffix($0) }),
           heldStore(String(path.dropLast(suffix.count))) == "a SQLite database" {
            throw StoreError(.invalidArgument, "\(option) \(path) belongs to the SQLite database "
                + "\(path.dropLast(suffix.count)); name another file")
        }
        var status = stat()
        guard lstat(path, &status) == 0 else { return }  // Nothing there: the file is new.
        switch status.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR:
            throw StoreError(.invalidArgument, "\(option) \(path) is a directory; name a file (\(path)/out.json)")
        case S_IFLNK:
            throw StoreError(.invalidArgument, "\(option) \(path) is a symbolic link; the file written replaces "
                + "what is at its path, so name the file itself (\(resolved(path)))")
        default:
            throw StoreError(.invalidArgument, "\(option) \(path) is not a regular file (a device, FIFO or "
                + "socket); the file written replaces what is at its path, so name a regular file")
        }
        if let held = heldStore(path) {
            throw StoreError(.invalidArgument, "\(option) \(path) holds \(held); it is not replaced: "
                + "name another file, or remove it first")
        }
        for input in inputs where !input.isEmpty {
            var other = stat()
            if stat(input, &other) == 0, other.st_dev == status.st_dev, other.st_ino == status.st_ino {
                throw StoreError(.invalidArgument, "\(option) \(path) is the file the command reads or writes as \(input); "
                    + "name another file")
            }
        }
    }

    /// What kind of store the regular file at `path` holds, from its first bytes, or `nil`.
    static func heldStore(_ path: String) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let head = try? handle.read(upToCount: 64), !head.isEmpty else { return nil }
        let bytes = [UInt8](head)
        if bytes.starts(with: Array("SQLite format 3\u{0}".utf8)) { return "a SQLite database" }
        // An LMDB environment's first meta page: its magic number after the page header.
        if bytes.count >= 20, bytes[16..<20].elementsEqual([0xDE, 0xC0, 0xEF, 0xBE]) { return "an LMDB environment" }
        if bytes.starts(with: Array(#"{"datastore":"jsonl""#.utf8)) { return "a JSON Lines store" }
        // A SQLite write-ahead log's magic number (big-endian, either byte order of its sums).
        if bytes.starts(with: [0x37, 0x7F, 0x06, 0x82]) || bytes.starts(with: [0x37, 0x7F, 0x06, 0x83]) {
            return "a SQLite write-ahead log"
        }
        return nil
    }

    /// `path` as an absolute path with no link in it: the real path of what is there, or, for
    /// a path where nothing is yet, its directory's real path and its last name.
    static func canonical(_ path: String) -> String {
        if let real = realpath(path, nil) {
            defer { free(real) }
            return String(cString: real)
        }
        let directory = PathNames.containingDirectory(of: path)
        guard let real = realpath(directory, nil) else { return path }
        defer { free(real) }
        return (String(cString: real) as NSString).appendingPathComponent(PathNames.lastName(of: path))
    }

    /// Where the link at `path` leads, or `path` when that cannot be worked out.
    private static func resolved(_ path: String) -> String {
        guard let real = realpath(path, nil) else { return path }
        defer { free(real) }
        return String(cString: real)
    }
}
