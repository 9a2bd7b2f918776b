/// A path's directory, worked out on its characters: what `NSString.deletingLastPathComponent`
/// gives, which Foundation on Linux traps on for a path of one character after its trailing
/// slashes (`a`, `.`, `x/`, `é`): a store, report or export named so crashed the process.
@_spi(Backend) public enum PathNames {
    /// The directory part of `path`: `""` when it names no directory (`name`, `name/`), `"/"` for
    /// a name at the root (`/name`), otherwise what comes before the last name, without the
    /// slashes that end it (`a/b//c` gives `a/b`).
    public static func directory(of path: String) -> String {
        var rest = Substring(path)
        while rest.count > 1, rest.hasSuffix("/") { rest.removeLast() }
        guard let slash = rest.lastIndex(of: "/") else { return "" }
        var directory = rest[..<slash]
        while directory.hasSuffix("/") { directory.removeLast() }
        return directory.isEmpty ? "/" : String(directory)
    }

    /// ``directory(of:)``, with `.` for a path that names no directory: where a file at `path`
    /// is, to open or check.
    public static func containingDirectory(of path: String) -> String {
        let directory = directory(of: path)
        return directory.isEmpty ? "." : directory
    }
}
