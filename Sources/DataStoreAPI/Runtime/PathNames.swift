/// A path's directory, worked out on its bytes: what `NSString.deletingLastPathComponent`
/// gives, which Foundation on Linux traps on for a path of one character after its trailing
/// slashes (`a`, `.`, `x/`, `é`): a store, report or export named so crashed the process.
@_spi(Backend) public enum PathNames {
    /// The directory part of `path`: `""` when it names no directory (`name`, `name/`), `"/"` for
    /// a name at the root (`/name`), otherwise what comes before the last name, without the
    /// slashes that end it (`a/b//c` gives `a/b`). Read as bytes: a slash followed by a combining
    /// mark is still a slash.
    public static func directory(of path: String) -> String {
        let slash = UInt8(ascii: "/")
        var bytes = Array(path.utf8)
        while bytes.count > 1, bytes.last == slash { bytes.removeLast() }
        guard let last = bytes.lastIndex(of: slash) else { return "" }
        var end = last
        while end > 0, bytes[end - 1] == slash { end -= 1 }
        return end == 0 ? "/" : String(decoding: bytes[..<end], as: UTF8.self)
    }

    /// ``directory(of:)``, with `.` for a path that names no directory: where a file at `path`
    /// is, to open or check.
    public static func containingDirectory(of path: String) -> String {
        let directory = directory(of: path)
        return directory.isEmpty ? "." : directory
    }

    /// The last name of `path`, without the slashes that end it (`a/b/` gives `b`).
    public static func lastName(of path: String) -> String {
        let slash = UInt8(ascii: "/")
        var bytes = Array(path.utf8)
        while bytes.count > 1, bytes.last == slash { bytes.removeLast() }
        guard let last = bytes.lastIndex(of: slash), bytes.count > 1 else { return String(decoding: bytes, as: UTF8.self) }
        return String(decoding: bytes[(last + 1)...], as: UTF8.self)
    }
}
