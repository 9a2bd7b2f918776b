import Foundation
import Synchronization

/// Ctrl-C (SIGINT) for the whole process, caught once, from the start of every command.
///
/// The first Ctrl-C sets ``isSet``: an operation that polls it (a copy, sync, verify, follow or
/// import) stops after the batch in progress, prints its summary and exits 130. Whatever has not
/// ended 0.75 s later, and any second Ctrl-C, ends the process at once with exit 130 and the
/// line set by ``setMessage(_:)``: every operation of the command is safe to stop anywhere (a
/// copy and an import resume from their last checkpoint, an upgrade is one transaction, the
/// other commands only read, an export writes a temporary file that is removed).
///
/// One handler for the process, because the disposition of a signal is the process's: a second
/// handler that set SIGINT to `SIG_IGN` again replaced the one Dispatch had installed for the
/// first, and `copy --follow` then ignored Ctrl-C once it was following.
final class InterruptHandler: Sendable {
    static let shared = InterruptHandler()

    /// How long an operation has after the first Ctrl-C to end by itself.
    static let grace = DispatchTimeInterval.milliseconds(750)

    private struct State {
        var interrupted = false
        var message: @Sendable () -> String = { "migrate-store: interrupted" }
        var temporaryFiles: Set<String> = []
    }

    private let state = Mutex(State())
    // Created once in `init` and only resumed; Dispatch sources are thread-safe.
    private nonisolated(unsafe) let source: any DispatchSourceSignal

    private init() {
        signal(SIGINT, SIG_IGN)
        source = DispatchSource.makeSignalSource(signal: SIGINT, queue: DispatchQueue(label: "migrate-store.interrupt"))
        source.setEventHandler { [unowned self] in self.received() }
        source.resume()
    }

    /// Catches Ctrl-C from now on (the first use of ``shared`` installs the handler).
    static func install() { _ = shared }

    /// Whether Ctrl-C was pressed.
    var isSet: Bool { state.withLock { $0.interrupted } }

    /// The line printed when Ctrl-C ends the process before the operation stopped by itself.
    func setMessage(_ message: String) { state.withLock { $0.message = { message } } }

    /// The line printed when Ctrl-C ends the process, made when it does (what to do next may
    /// depend on how far the operation got).
    func setMessage(_ message: @escaping @Sendable () -> String) { state.withLock { $0.message = message } }

    /// A file to remove if Ctrl-C ends the process (a temporary file the operation renames).
    func removeOnInterrupt(_ path: String) { _ = state.withLock { $0.temporaryFiles.insert(path) } }

    private func received() {
        let second = state.withLock { state in
            defer { state.interrupted = true }
            return state.interrupted
        }
        if second { end() }
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.grace) { self.end() }
    }

    /// Ends the process with exit 130, as a kill would but with a message: `_exit`, so that no
    /// destructor or atexit handler runs while other threads are still working.
    private func end() -> Never {
        let (message, files) = state.withLock { ($0.message, $0.temporaryFiles) }
        for file in files { unlink(file) }
        FileHandle.standardError.write(Data((message() + "\n").utf8))
        _exit(130)
    }
}
