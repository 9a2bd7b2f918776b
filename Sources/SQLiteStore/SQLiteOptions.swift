internal import CSQLite
@_spi(Backend) import DataStoreAPI
import Foundation
import Synchronization

/// Options of a SQLite store.
public struct SQLiteOptions: Sendable, Hashable {
    /// How durable a commit is when `writeSync` returns.
    public var durability: Durability
    /// How many reader connections may run reads at once, opened on demand. A read beyond that
    /// waits for one to be free, at most ``readerTimeout``, then fails with `busy`. Reads
    /// nested in a block of the same store join its transaction and need no connection.
    public var maxReaders: PositiveInt
    /// How long a read waits for a free reader connection before it fails with `busy`.
    public var readerTimeout: Duration

    /// Open with `SQLITE_OPEN_READONLY`: nothing in the file changes, not even its journal mode
    /// on open, and writes throw `readOnly`. A store on read-only media opens this way too.
    public var readOnly: Bool

    /// The key of an encrypted store (see ``StoreKey``): a new store is created encrypted with
    /// it, an existing one must have been (`nil`, the default, opens stores without encryption).
    public var key: StoreKey?

    public init(durability: Durability = .full, maxReaders: PositiveInt = 64, readerTimeout: Duration = .seconds(5),
                readOnly: Bool = false, key: StoreKey? = nil) {
        self.key = key
        self.durability = durability
        self.maxReaders = maxReaders
        self.readerTimeout = readerTimeout
        self.readOnly = readOnly
    }
}
