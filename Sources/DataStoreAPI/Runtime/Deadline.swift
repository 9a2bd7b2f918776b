import Foundation

extension Date {
    /// The date `duration` from now, for a condition's `wait(until:)`: never before now, and at
    /// most a hundred years ahead, so that a timeout meant as "for ever" (`.seconds(Int64.max)`)
    /// waits as long as anyone will, where Foundation's wait, which counts the nanoseconds since
    /// 1970 in 64 bits, trapped on any date past 2262.
    @_spi(Backend) public static func deadline(after duration: Duration) -> Date {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return Date(timeIntervalSinceNow: min(max(seconds, 0), 100 * 365.25 * 86_400))
    }
}
