import Foundation

/// A point in time with the one precision every backend stores: whole microseconds since
/// 1970-01-01 00:00:00 UTC.
///
/// Converting a `Date` rounds to the nearest microsecond, in this value layer, so that every
/// backend stores and returns the same thing.
public struct Timestamp: Sendable, Hashable, Comparable, Codable {
    /// Microseconds since the Unix epoch.
    public let microsecondsSinceEpoch: Int64

    /// Makes a timestamp from microseconds since the Unix epoch.
    public init(microsecondsSinceEpoch: Int64) {
        self.microsecondsSinceEpoch = microsecondsSinceEpoch
    }

    /// Makes a timestamp from a `Date`, rounded to the nearest microsecond.
    /// - Throws: ``StoreError/Code/invalidValue`` when the date is not finite or lies outside
    ///   the roughly ±292,000 years that 64-bit microseconds can hold.
    public init(_ date: Date) throws(StoreError) {
        let micros = (date.timeIntervalSince1970 * 1_000_000).rounded()
        guard let exact = Int64(exactly: micros) else {
            throw StoreError(.invalidValue, "date \(date.timeIntervalSince1970)s since 1970 cannot be stored "
                + "as 64-bit microseconds")
        }
        microsecondsSinceEpoch = exact
    }

    /// The system's clock now (`CLOCK_REALTIME`), rounded to the nearest microsecond, as
    /// `Timestamp(Date())` rounds it: what a change feed entry records as its commit's time, read
    /// without a `Date` (`Date()` and its conversion took about 100 instructions a commit).
    static func now() -> Timestamp {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Timestamp(microsecondsSinceEpoch: Int64(time.tv_sec) &* 1_000_000 &+ (Int64(time.tv_nsec) &+ 500) / 1_000)
    }

    /// The timestamp as a `Date`.
    public var date: Date {
        Date(timeIntervalSince1970: Double(microsecondsSinceEpoch) / 1_000_000)
    }

    /// Earlier than.
    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.microsecondsSinceEpoch < rhs.microsecondsSinceEpoch
    }
}
