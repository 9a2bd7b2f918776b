@_spi(Backend) import DataStoreAPI
/// Options of a migration.
public struct MigrationOptions: Sendable {
    /// The entities to copy (all when `nil`).
    public var entities: [String]?
    /// Items per write transaction (and per checkpoint) of a copy, and per page that a
    /// comparison (verify, a resume's diff) reads: the size given (``chosenBatchSize``), else
    /// 1,000. A copy given none takes its destination's.
    public var batchSize: PositiveInt {
        get { chosenBatchSize ?? 1_000 }
        set { chosenBatchSize = newValue }
    }
    /// The batch size given, if any: without one, a copy writes transactions of its
    /// destination's size (into PostgreSQL, whose every transaction is round trips to a server,
    /// 1,000 items first, then up to 10,000, as many as fit in 32 MiB; 1,000 into the others).
    public var chosenBatchSize: PositiveInt?
    /// Finish an interrupted migration into the destination.
    public var resume: Bool
    /// Replace a destination that exists.
    public var overwrite: Bool
    /// Compare every item after copying (on by default).
    public var verify: Bool
    /// Read and count the source and check the destination, but write nothing.
    public var dryRun: Bool
    /// Check the source (``StoreLocation/check()``) first; on by default (`migrate-store` turns
    /// it off for `sync` and `verify` unless `--check` is given).
    public var checkSource: Bool
    /// Verify by range checksums (``Migrator/verify(from:to:options:shouldStop:progress:)``):
    /// each side hashed once in key ranges, only the ranges whose digests differ compared item
    /// by item.
    public var checksum: Bool

    /// Options; the defaults copy every entity in batches of the destination's size, check the
    /// source first and verify the copy.
    /// Where the engine logs its phases and counts the items it copies (nothing by default).
    public var instrumentation: Instrumentation

    /// Items per write transaction of a copy into `backend`: the size given, else the backend's.
    func copyBatchSize(into backend: (any StoreBackend)?) -> PositiveInt {
        chosenBatchSize ?? (try? PositiveInt(backend?.copyBatchSize ?? 1_000)) ?? 1_000
    }

    public init(entities: [String]? = nil, batchSize: PositiveInt? = nil, resume: Bool = false, overwrite: Bool = false,
                verify: Bool = true, dryRun: Bool = false, checkSource: Bool = true, checksum: Bool = false,
                instrumentation: Instrumentation = .none) {
        self.instrumentation = instrumentation
        self.entities = entities
        chosenBatchSize = batchSize
        self.resume = resume
        self.overwrite = overwrite
        self.verify = verify
        self.dryRun = dryRun
        self.checkSource = checkSource
        self.checksum = checksum
    }
}
