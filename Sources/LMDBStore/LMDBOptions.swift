internal import CLMDB
@_spi(Backend) import DataStoreAPI
import Foundation
import Logging

/// Options of an LMDB store.
public struct LMDBOptions: Sendable, Hashable {
    /// How durable a commit is when `writeSync` returns.
    public var durability: Durability
    /// The map size to start with; the map grows by itself whenever a write needs more.
    public var initialMapSize: Int
    /// Let a large write transaction size the map to cover the disk, then write without a
    /// journal. A write keeps a journal of its changes so that, when the map fills, it can grow
    /// the map and replay them; once its changes pass 64 KiB, it grows the map at once to the
    /// size of `data.mdb` plus twice the disk's free space (address space, not disk: the file
    /// grows only with the pages written), where the map cannot fill before the disk does, and
    /// stops journaling. A process that cannot map that much (`ulimit -v`) keeps the journal.
    /// Off, the map doubles each time it fills and the journal is kept to the end of the
    /// transaction (in memory up to 16 MiB, then in a temporary file).
    public var mapCoversDisk: Bool
    /// Reader slots: how many read transactions may be open at once across processes (at most
    /// `UInt32.max`, what LMDB counts; more is refused with `invalidArgument`). A process keeps
    /// the slots of up to 8 ended reads for its next reads (their transactions reset, pinning no
    /// snapshot), and never holds more than it had reads at once.
    public var maxReaders: PositiveInt
    /// Open with `MDB_RDONLY`: nothing is written to the environment, not even on open, and
    /// writes throw `readOnly`. A store on read-only media opens this way too.
    public var readOnly: Bool
    /// Walk every page of the environment with bounds checks before liblmdb reads any (see
    /// ``LMDBEngine/check(path:)``): a damaged file fails with `corrupt` instead of crashing the
    /// process. Costs one read of the file; `migrate-store` does it for every source.
    public var checkPages: Bool

    /// The key of an encrypted store (see ``StoreKey``): a new store is created encrypted with
    /// it, an existing one must have been (`nil`, the default, opens stores without encryption).
    public var key: StoreKey?

    public init(durability: Durability = .full, initialMapSize: Int = 64 << 20, maxReaders: PositiveInt = 1024,
                readOnly: Bool = false, checkPages: Bool = false, mapCoversDisk: Bool = true, key: StoreKey? = nil) {
        self.key = key
        self.durability = durability
        self.mapCoversDisk = mapCoversDisk
        self.initialMapSize = max(initialMapSize, 64 << 10)
        self.maxReaders = maxReaders
        self.readOnly = readOnly
        self.checkPages = checkPages
    }
}
