#if Postgres
@_spi(Backend) import DataStoreAPI
import Foundation

/// A store in a PostgreSQL schema: `PostgresStore(url: "postgres://app@db.internal/app?schema=app", schema:)`.
public final class PostgresStore: Store, @unchecked Sendable {
    let postgres: PostgresEngine

    /// Opens (or creates) the store that `url` names (`postgres://USER@HOST:PORT/DB?schema=NAME`).
    public convenience init(url: String, schema: Schema?, upgrades: SchemaUpgrades = SchemaUpgrades(),
                            durability: Durability = .full, readConnections: Int = 16, writeConnections: Int? = nil,
                            key: StoreKey? = nil, instrumentation: Instrumentation = .none) throws {
        try self.init(location: PostgresLocation(parsing: url), schema: schema, upgrades: upgrades,
                      durability: durability, readConnections: readConnections, writeConnections: writeConnections,
                      key: key, instrumentation: instrumentation)
    }

    /// Opens (or creates) the store at `location`, migrating a store of an older schema version
    /// with `upgrades` (as the other backends do).
    ///
    /// - Parameter readConnections: the size of the read pool: how many reads run at once, each
    ///   on a connection of its own (made when first needed and kept); more reads wait for one,
    ///   at most 30 s, then fail with `busy`. Observers have a connection of their own.
    /// - Parameter writeConnections: the size of the writer pool: how many write transactions run
    ///   at once (when `nil`, the location's `write_connections`, else
    ///   ``PostgresLocation/defaultWriteConnections``: twice the cores, at least 4).
    /// - Parameter key: the key of an encrypted store (see ``StoreKey``): the client seals every
    ///   value before it is sent, so the server never sees one (a new store is created encrypted,
    ///   an existing one must have been).
    /// - Parameter instrumentation: where the store logs and counts what it does (nothing by
    ///   default).
    public init(location: PostgresLocation, schema: Schema?, upgrades: SchemaUpgrades = SchemaUpgrades(),
                durability: Durability = .full, readConnections: Int = 16, writeConnections: Int? = nil,
                key: StoreKey? = nil, instrumentation: Instrumentation = .none) throws {
        // The engine opened with the app's schema first: a new store is created by the same
        // connection that found it missing. Not for an encrypted store, whose engine is opened
        // with the stored (physical) schema first to read its key record either way.
        let (engine, postgres) = try SealedEngine.open(key: key, requested: schema, upgrades: upgrades,
                                                       location: location.description, requestedFirst: key == nil) {
            // An app's open (with a schema) upgrades the store's format, whatever schema its
            // engines are opened with (the stored one first); a source's or a check's never does.
            try PostgresEngine(location: location, schema: $0, durability: durability,
                               readConnections: readConnections, writeConnections: writeConnections,
                               upgradesFormat: schema != nil)
        }
        self.postgres = postgres
        try super.init(engine: engine, instrumentation: instrumentation)
        logOpened(location.description)
    }

    public var location: PostgresLocation { postgres.location }

    /// Reads as ``DataStore/read(_:)`` does, from `target`: the primary, or a standby of the
    /// location's ``PostgresLocation/readHosts`` with or without waiting for this store's last
    /// commit. What the block calls (other stores' reads included) reads from `target` too.
    public func read<T>(on target: PostgresReadTarget, _ body: (ReadAccessor) throws -> T) throws -> T {
        try PostgresEngine.$readTarget.withValue(target) { try read(body) }
    }

    /// The reads the primary and the standbys served so far, for tests and the benchmark harness.
    @_spi(Backend) public var readsServed: (primary: Int, standbys: Int) { postgres.readsServed }

    /// The round trips the writer connections made so far (its sync points), for tests and
    /// the benchmark harness.
    @_spi(Backend) public var writerRoundTrips: Int { postgres.writerRoundTrips }

    /// Drops the store's schema with everything in it.
    public static func destroy(_ location: PostgresLocation) throws { try PostgresEngine.destroy(location) }
}

/// The `postgres` kind: `postgres://USER@HOST:PORT/DB?schema=NAME` names a store in a schema of
/// a PostgreSQL database.
@_spi(Backend) public struct PostgresBackend: StoreBackend {
    /// A copy into PostgreSQL writes up to 10,000 items a transaction: each is round trips to
    /// the server (its `BEGIN`, `COPY`, checkpoint and `COMMIT`), which at 1,000 took 0.52 of
    /// `psql \copy`'s rate in the benchmark harness, and at 10,000 0.77 to 0.81.
    public var copyBatchSize: Int { 10_000 }

    public init() {}

    public var kind: StoreKind { "postgres" }
    public var fileExtension: String? { nil }

    public func exists(at path: String) -> Bool {
        guard let location = try? PostgresLocation(parsing: path) else { return false }
        return (try? PostgresEngine.exists(location)) ?? false
    }

    public func recognizes(_ path: String) -> Bool { false }

    public func open(at path: String, schema: Schema?, upgrades: SchemaUpgrades, durability: Durability) throws
        -> any DataStore
    {
        try open(at: path, schema: schema, upgrades: upgrades, durability: durability, key: nil)
    }

    public func open(at path: String, schema: Schema?, upgrades: SchemaUpgrades, durability: Durability,
                     key: StoreKey?) throws -> any DataStore {
        try PostgresStore(location: PostgresLocation(parsing: path), schema: schema, upgrades: upgrades,
                          durability: durability, key: key)
    }

    public func openSource(at path: String, alreadyChecked: Bool) throws -> any DataStore {
        try openSource(at: path, alreadyChecked: alreadyChecked, key: nil)
    }

    public func openSource(at path: String, alreadyChecked: Bool, key: StoreKey?) throws -> any DataStore {
        try PostgresStore(location: PostgresLocation(parsing: path), schema: nil, key: key)
    }

    /// Opens the store (its header and stored schema are checked), compares the tables of its
    /// PostgreSQL schema with the stored schema, then reads every row of every entity against its
    /// checksum: a table the stored schema does not name, one it names that is missing, or a
    /// damaged row, is damage.
    public func check(at path: String) throws -> EngineCheck {
        let location = try PostgresLocation(parsing: path)
        let store = try PostgresStore(location: location, schema: nil)
        let rows: (rows: Int, unsealed: Int, damage: [String], sealed: Bool)
        do {
            // A table the stored schema does not name is damage (the stored schema may be what was
            // damaged, as when it lost an entity): a store's schema holds the store only.
            let found = try PostgresEngine.objectsNotOfStore(location, schema: store.schema)
                .map { "\($0), which the stored schema does not name" }
                + PostgresEngine.missingTables(location, schema: store.schema)
                    .map { "no table \($0) although the stored schema names it" }
            guard found.isEmpty else {
                throw StoreError(.corrupt, "\(location) is damaged: it holds " + found.prefix(3).joined(separator: "; ")
                    + (found.count > 3 ? "; and \(found.count - 3) more" : ""))
            }
            rows = try store.postgres.checkRows()
            try store.close()
        } catch {
            try? store.close()
            throw error
        }
        if !rows.damage.isEmpty { throw StoreError.damagedRecords(location.description, rows.damage, checked: rows.rows) }
        let unsealed = rows.unsealed == 0 ? ""
            : "; \(rows.unsealed) row\(rows.unsealed == 1 ? "" : "s") written by another program, without a checksum"
        guard rows.sealed else {
            return EngineCheck("the schema's tables, header and rows read (PostgreSQL checks its own pages); the store's "
                + "format has no row checksums yet: an app's next open adds them", itemsChecked: rows.rows)
        }
        return EngineCheck("the schema's tables, header and rows read, each row against its checksum (PostgreSQL "
            + "checks its own pages)\(unsealed)", itemsChecked: rows.rows)
    }

    public func destroy(at path: String) throws { try PostgresStore.destroy(PostgresLocation(parsing: path)) }

    /// What the store's PostgreSQL schema holds that is not the store's own (a user's table,
    /// view, type or function), for the store that opened with `schema`: dropping the schema
    /// would drop it, so `--overwrite` refuses.
    public func objectsBeside(storeAt path: String, schema: Schema) throws -> [String] {
        try PostgresEngine.objectsNotOfStore(PostgresLocation(parsing: path), schema: schema)
    }

    /// Two locations name one store when they name the same schema of the same database on a
    /// host and port they share, whatever their spelling (`postgres://` or `postgresql://`,
    /// the order of the parameters, a list of hosts).
    public func isSameStore(_ path: String, as other: String) -> Bool {
        guard let a = try? PostgresLocation(parsing: path), let b = try? PostgresLocation(parsing: other) else {
            return path == other
        }
        guard a.database == b.database, a.schema == b.schema else { return false }
        /// Host and port of each server, as libpq pairs them: one port given serves every host.
        func servers(_ location: PostgresLocation) -> Set<String> {
            let hosts = location.hosts.isEmpty ? [""] : location.hosts
            return Set(hosts.indices.map { index in
                let port = location.ports.count == hosts.count ? location.ports[index] : location.port
                return "\(hosts[index]):\(port)"
            })
        }
        if !servers(a).isDisjoint(with: servers(b)) { return true }
        // Other spellings of one server (the default socket and localhost, an address and a
        // name, a service file): asked. Two servers that both answer are one when they started
        // at the same instant and the database is the same object; one that cannot be asked is
        // taken for the same store, so that nothing is overwritten on a guess.
        func identity(_ location: PostgresLocation) -> String? {
            guard let session = try? PostgresSession(location) else { return nil }
            defer { session.close() }
            let row = try? session.query("SELECT pg_postmaster_start_time()::text || ' ' || (SELECT oid FROM pg_database "
                + "WHERE datname = current_database())::text").first
            return row.flatMap { try? $0[0].string() }
        }
        guard let mine = identity(a), let theirs = identity(b) else { return true }
        return mine == theirs
    }

    public func move(from path: String, to other: String) throws {
        let from = try PostgresLocation(parsing: path)
        let to = try PostgresLocation(parsing: other)
        guard from.host == to.host, from.port == to.port, from.database == to.database else {
            throw StoreError(.invalidArgument, "a PostgreSQL store moves only within its database")
        }
        let session = try PostgresSession(from)
        defer { session.close() }
        try session.query("ALTER SCHEMA \(PostgresSQL.quote(from.schema)) RENAME TO \(PostgresSQL.quote(to.schema))")
    }

    public func stagingPath(for path: String) -> String {
        // A location that does not parse stays as it is, so that opening it names what is wrong
        // with the user's own text.
        guard var location = try? PostgresLocation(parsing: path) else { return path }
        location.schema = String(location.schema.prefix(50)) + "__migrating"
        return String(location.description.dropFirst("postgres:".count))
    }

    public func sizeOnDisk(at path: String) -> Int64 {
        guard let location = try? PostgresLocation(parsing: path), let session = try? PostgresSession(location) else {
            return 0
        }
        defer { session.close() }
        var name = LibpqParameters()
        name.append(location.schema)
        let row = try? session.query("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c "
            + "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'", name).first
        return (try? row?[0].int64()) ?? 0
    }
}
#endif
