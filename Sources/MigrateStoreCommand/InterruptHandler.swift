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
/// A command with nothing to finish (`check`, `inspect`, `export`) ends at the first Ctrl-C
/// (``endAtOnce()``). An upgrade holds the ending (``holdEnding()``): a Ctrl-C ends it from
/// inside its transaction (``endIfInterrupted()``, where nothing is committed yet), and one that
/// comes after the last place it looks ends the process once the upgrade is over, with a line that
/// says what it did, never with a line that calls a committed upgrade undone.
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
        /// Whether the first Ctrl-C ends the process (a command with nothing to finish).
        var atOnce = false
        /// Whether the process may be ended only by ``endIfInterrupted()`` (an upgrade at work).
        var held = false
        /// Whether a thread is ending the process (it prints the message once).
        var ending = false
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

    /// The first Ctrl-C ends the process at once from now on: the command has nothing to finish
    /// (it only reads, or writes a temporary file that is removed).
    func endAtOnce() { state.withLock { $0.atOnce = true } }

    /// From now on, Ctrl-C ends the process only where the operation calls ``endIfInterrupted()``,
    /// until ``releaseEnding()``.
    func holdEnding() { state.withLock { $0.held = true } }

    /// Ctrl-C ends the process again as before ``holdEnding()``; if one came meanwhile, now, with
    /// the message set then.
    func releaseEnding() {
        let interrupted = state.withLock { state in
            state.held = false
            return state.interrupted
        }
        if interrupted { end(evenIfHeld: true) }
    }

    /// Ends the process if Ctrl-C was pressed: called where stopping is safe.
    func endIfInterrupted() {
        if isSet { end(evenIfHeld: true) }
    }

    /// A file to remove if Ctrl-C ends the process (a temporary file the operation renames).
    func removeOnInterrupt(_ path: String) { _ = state.withLock { $0.temporaryFiles.insert(path) } }

    private func received() {
        let (second, atOnce) = state.withLock { state in
            defer { state.interrupted = true }
            return (state.interrupted, state.atOnce)
        }
        if second || atOnce { end() }
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.grace) { self.end() }
    }

    /// Ends the process with exit 130, as a kill would but with a message: `_exit`, so that no
    /// destructor or atexit handler runs while other threads are still working. While the ending
    /// is held, only the operation itself ends it (`evenIfHeld`).
    private func end(evenIfHeld: Bool = false) {
        let (ending, message, files) = state.withLock { state in
            guard !state.held || evenIfHeld else { return (false, state.message, state.temporaryFiles) }
            defer { state.ending = true }
            return (!state.ending, state.message, state.temporaryFiles)
        }
        guard ending else {
            // Held, or another thread is ending the process: this one goes no further.
            if state.withLock({ $0.ending }) { while true { pause() } }
            return
        }
        for file in files { unlink(file) }
        FileHandle.standardError.write(Data((message() + "\n").utf8))
        _exit(130)
    }
}
