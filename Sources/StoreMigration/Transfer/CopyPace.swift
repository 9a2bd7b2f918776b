import DataStoreAPI
import Foundation

/// How fast a background copy goes (``SwitchingStore/Policy/pace``).
public enum CopyPace: Sendable, Hashable {
    /// As fast as the two stores allow.
    case unlimited
    /// At most this many items per second.
    case itemsPerSecond(PositiveInt)
    /// Only once the app has written nothing for this long (each batch of the copy, and the
    /// cutover, wait for such a moment).
    case whenIdle(Duration)
}
