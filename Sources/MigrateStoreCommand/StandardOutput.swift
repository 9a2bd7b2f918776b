// C's `stdout` is a global variable, which Swift 6 refuses to read outside a preconcurrency
// import: this file reads it once a command is over, on the main thread, when nothing else runs.
#if canImport(Glibc)
@preconcurrency import Glibc
#elseif canImport(Darwin)
@preconcurrency import Darwin
#endif

/// What a command printed (`print`, through C's buffered `stdout`) and whether it reached its
/// destination.
enum StandardOutput {
    /// Writes out what is still buffered. Returns `nil` when everything printed was written, or
    /// why not (a full disk, `/dev/full`): a failed write of a file's output, which is written in
    /// blocks, shows only here.
    static func flushFailure() -> String? {
        errno = 0
        let flushed = fflush(stdout) == 0
        let code = errno
        guard !flushed || ferror(stdout) != 0 else { return nil }
        return !flushed && code != 0 ? String(cString: strerror(code)) : "a write failed"
    }
}
