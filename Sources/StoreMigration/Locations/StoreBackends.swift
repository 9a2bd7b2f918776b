@_spi(Backend) import DataStoreAPI
@_spi(Backend) import ForeignStores
@_spi(Backend) import InMemoryStore
@_spi(Backend) import JSONLStore
@_spi(Backend) import LMDBStore
@_spi(Backend) import SQLiteStore
#if Postgres
@_spi(Backend) import PostgresStore
#endif
import Synchronization

extension StoreKind {
    /// A SQLite file (`NAME.sqlite`).
    public static let sqlite: StoreKind = "sqlite"
    /// An LMDB environment directory (`NAME.lmdb`).
    public static let lmdb: StoreKind = "lmdb"
    /// An in-memory database of this process.
    public static let memory: StoreKind = "memory"
    /// A JSON Lines file (`NAME.jsonl`, or `.jsonl.gz` compressed): read as a store, written
    /// whole by copy and sync.
    public static let jsonl: StoreKind = "jsonl"
    /// A Core Data or SwiftData store, read as a source (``CoreDataStore``).
    public static let coreData: StoreKind = "coredata"
    /// A plain SQLite database of tables, read as a source (``PlainSQLiteStore``).
    public static let plainSQLite: StoreKind = "plain-sqlite"
    /// A Realm file, read as a source without realm-core (``RealmStore``).
    public static let realm: StoreKind = "realm"
}

/// The kinds of store the migration engine and `migrate-store` know: the four built in, and
/// any a backend registers.
public enum StoreBackends {
    private static let registry = Mutex<[StoreKind: any StoreBackend]>(
        Dictionary(uniqueKeysWithValues: builtIn.map { ($0.kind, $0) }))

    private static var builtIn: [any StoreBackend] {
        var backends: [any StoreBackend] = [SQLiteBackend(), LMDBBackend(), InMemoryBackend(), JSONLBackend(),
                                           CoreDataBackend(), PlainSQLiteBackend(), RealmBackend()]
        #if Postgres
        backends.append(PostgresBackend())
        #endif
        return backends
    }

    /// Makes a kind of store known (replacing a registration of the same name).
    @_spi(Backend) public static func register(_ backend: any StoreBackend) {
        registry.withLock { $0[backend.kind] = backend }
    }

    /// The registered kinds, by name.
    public static var kinds: [StoreKind] {
        registry.withLock { Array($0.keys) }.sorted { $0.rawValue < $1.rawValue }
    }

    /// The backend of `kind`.
    /// - Throws: `invalidArgument` naming the kind and the known ones.
    @_spi(Backend) public static func backend(_ kind: StoreKind) throws(StoreError) -> any StoreBackend {
        guard let backend = registry.withLock({ $0[kind] }) else { throw unknownKind(kind) }
        return backend
    }

    /// Whether stores of `kind` are files of this machine (they have a file extension).
    static func isFileKind(_ kind: StoreKind) -> Bool {
        ((try? backend(kind))?.fileExtension) != nil
    }

    /// The error for a kind no backend registered; `postgres` names the trait that builds it.
    static func unknownKind(_ kind: StoreKind) -> StoreError {
        if kind.rawValue == "postgresql", registry.withLock({ $0["postgres"] }) != nil {
            return StoreError(.invalidArgument, "unknown store kind 'postgresql': the PostgreSQL kind is 'postgres' "
                + "(postgres://HOST/DB or postgres:NAME)")
        }
        if kind.rawValue == "postgres" || kind.rawValue == "postgresql" {
            return StoreError(.invalidArgument, "the store kind '\(kind)' is in builds with the package trait "
                + "Postgres, and this one was built without it: build with `swift build --traits Postgres` "
                + "(known kinds here: " + kinds.map(\.rawValue).joined(separator: ", ") + ")")
        }
        return StoreError(.invalidArgument, "unknown store kind '\(kind)'; known kinds: "
            + kinds.map(\.rawValue).joined(separator: ", "))
    }

    static var all: [any StoreBackend] {
        registry.withLock { Array($0.values) }.sorted { $0.kind.rawValue < $1.kind.rawValue }
    }
}
