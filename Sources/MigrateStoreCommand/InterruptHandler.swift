import Foundation
import Synchronization

/// Set by Ctrl-C (SIGINT): the migration stops after the batch in progress.
final class InterruptFlag: Sendable {
    private let flag = Mutex(false)

    func set() { flag.withLock { $0 = true } }
    var isSet: Bool { flag.withLock { $0 } }
}

/// Catches SIGINT for as long as it lives and sets `flag`.
final class InterruptHandler {
    let flag = InterruptFlag()
    private let source: any DispatchSourceSignal

    init() {
        signal(SIGINT, SIG_IGN)
        source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler { [flag] in flag.set() }
        source.resume()
    }

    var isSet: Bool { flag.isSet }
}
