import DataStoreAPI
import Foundation

/// Sleeps between a copy's pages as its pace asks.
final class Pacer {
    let pace: CopyPace
    let started = ContinuousClock.now
    var itemsAtStart: Int?

    init(pace: CopyPace) { self.pace = pace }

    /// Waits until the next page may be read: `items` were copied so far; `lastAppWrite` says
    /// when the app last wrote; `stop` ends the wait early.
    func pause(items: Int, lastAppWrite: () -> ContinuousClock.Instant, stop: () -> Bool) {
        switch pace {
        case .unlimited:
            return
        case .itemsPerSecond(let rate):
            let first = itemsAtStart ?? items
            itemsAtStart = first
            let due = started + .seconds(Double(items - first) / Double(rate.value))
            while ContinuousClock.now < due && !stop() {
                Thread.sleep(forTimeInterval: min(0.05, (due - ContinuousClock.now).seconds))
            }
        case .whenIdle(let quiet):
            while ContinuousClock.now - lastAppWrite() < quiet && !stop() {
                Thread.sleep(forTimeInterval: min(0.05, quiet.seconds))
            }
        }
    }
}

extension Duration {
    /// The duration in seconds.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
