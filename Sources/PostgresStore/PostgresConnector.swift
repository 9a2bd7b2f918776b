#if Postgres
@_spi(Backend) import DataStoreAPI
import Foundation
import Logging
import PostgresNIO
import Synchronization

/// Where a PostgreSQL store lives: `postgres://USER@HOST:PORT/DATABASE?schema=NAME`, or with
/// `host=/socket/directory` in the query for a Unix socket. The password comes from
/// `PGPASSWORD` or `~/.pgpass` (never from the URL, never printed); missing parts default as
/// libpq's do (`PGHOST`, `PGPORT`, `PGUSER`, `PGDATABASE`).
public struct PostgresLocation: Sendable, Hashable, CustomStringConvertible {
    /// The server's host name or address, or a Unix socket directory (starting with `/`).
    public var host: String
    /// The server's port (5432 by default).
    public var port: Int
    /// The user to connect as.
    public var user: String
    /// The database.
    public var database: String
    /// The PostgreSQL schema (namespace) that holds the store's tables.
    public var schema: String
    /// How the connection uses TLS, as libpq's `sslmode`.
    public var tls: PostgresTLS

    /// Parses a URL (`postgres://…`), or the part after `postgres:` of a store location.
    public init(parsing text: String, environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(StoreError)
    {
        var rest = text
        for prefix in ["postgres://", "postgresql://", "//"] where rest.hasPrefix(prefix) {
            rest.removeFirst(prefix.count)
            break
        }
        var query: [String: String] = [:]
        if let mark = rest.firstIndex(of: "?") {
            for pair in rest[rest.index(after: mark)...].split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                query[parts[0]] = parts.count > 1 ? (parts[1].removingPercentEncoding ?? parts[1]) : ""
            }
            rest = String(rest[..<mark])
        }
        var authority = rest
        var database = ""
        if let slash = rest.firstIndex(of: "/") {
            authority = String(rest[..<slash])
            database = String(rest[rest.index(after: slash)...])
        }
        var user = ""
        if let at = authority.lastIndex(of: "@") {
            user = String(authority[..<at])
            authority = String(authority[authority.index(after: at)...])
            if user.contains(":") {
                throw StoreError(.invalidArgument, "a postgres:// location must not hold a password; set PGPASSWORD or "
                    + "use ~/.pgpass")
            }
        }
        var host = authority
        var port = Int(environment["PGPORT"] ?? "") ?? 5432
        if let colon = authority.lastIndex(of: ":"), let given = Int(authority[authority.index(after: colon)...]) {
            host = String(authority[..<colon])
            port = given
        }
        self.host = query["host"] ?? (host.isEmpty ? environment["PGHOST"] ?? "localhost" : host)
        self.port = Int(query["port"] ?? "") ?? port
        self.user = query["user"] ?? (user.isEmpty ? environment["PGUSER"] ?? "postgres" : user)
        self.database = database.isEmpty ? environment["PGDATABASE"] ?? self.user : database
        guard let schema = query["schema"], !schema.isEmpty else {
            throw StoreError(.invalidArgument, "postgres:\(text) names no schema; add ?schema=NAME (each store lives "
                + "in a PostgreSQL schema of its own)")
        }
        guard schema.utf8.count <= 63, !schema.hasPrefix("pg_"), schema != "information_schema" else {
            throw StoreError(.invalidArgument, "'\(schema)' cannot be a store's schema name (at most 63 bytes, not "
                + "pg_… or information_schema)")
        }
        self.schema = schema
        tls = try PostgresTLS(query: query, environment: environment)
    }

    public var description: String {
        let hostPart = host.hasPrefix("/") ? "" : host + (port == 5432 ? "" : ":\(port)")
        let socket = host.hasPrefix("/") ? "&host=\(host)" + (port == 5432 ? "" : "&port=\(port)") : ""
        return "postgres://\(user)@\(hostPart)/\(database)?schema=\(schema)\(socket)\(tls.queryText)"
    }

    /// The password from `PGPASSWORD`, else the first matching line of `~/.pgpass`
    /// (`host:port:database:user:password`, `*` matching anything).
    func password(environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        if let password = environment["PGPASSWORD"] { return password }
        let file = environment["PGPASSFILE"] ?? (NSHomeDirectory() as NSString).appendingPathComponent(".pgpass")
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { return nil }
        let hostName = host.hasPrefix("/") ? "localhost" : host
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let fields = line.split(separator: ":", maxSplits: 4, omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 5 else { continue }
            let wanted = [hostName, String(port), database, user]
            if zip(fields.prefix(4), wanted).allSatisfy({ $0 == "*" || $0 == $1 }) { return fields[4] }
        }
        return nil
    }

    /// The server's address as a user gives it: `HOST:PORT`, or the socket directory.
    var server: String { host.hasPrefix("/") ? "\(host) (Unix socket, port \(port))" : "\(host):\(port)" }

    /// A new connection, waited for.
    func connect() throws(StoreError) -> PostgresConnection {
        var configuration: PostgresConnection.Configuration
        if host.hasPrefix("/") {
            // A Unix socket never leaves the machine: libpq ignores sslmode on one too.
            configuration = .init(unixSocketPath: "\(host)/.s.PGSQL.\(port)", username: user, password: password(),
                                  database: database)
        } else {
            configuration = .init(host: host, port: port, username: user, password: password(), database: database,
                                  tls: try tls.configuration(host: host, server: server))
            if tls.verifiesHostname, !PostgresTLS.isIPAddress(host) { configuration.options.tlsServerName = host }
        }
        // Operators see which store a connection serves (pg_stat_activity.application_name).
        configuration.options.additionalStartupParameters = [("application_name", String("datastore:\(schema)".prefix(63)))]
        do {
            return try PostgresConnection.connect(on: PostgresConnection.defaultEventLoopGroup.any(),
                                                  configuration: configuration, id: Self.nextID(),
                                                  logger: PostgresSession.logger).wait()
        } catch {
            throw StoreError(.io, "cannot connect to the PostgreSQL server at \(server) (database \(database), user "
                + "\(user)): \(PostgresSession.describe(error))")
        }
    }

    private static let ids = NSLock()
    nonisolated(unsafe) private static var lastID = 0
    private static func nextID() -> Int {
        ids.lock()
        defer { ids.unlock() }
        lastID += 1
        return lastID
    }
}

/// One connection used synchronously: each query waits for its result (from a thread that is
/// not one of NIO's event loops: the store's callers).
final class PostgresSession: @unchecked Sendable {
    static let logger = Logger(label: "DataStore.PostgresStore")
    let connection: PostgresConnection
    let location: PostgresLocation

    init(_ location: PostgresLocation) throws(StoreError) {
        self.location = location
        connection = try location.connect()
    }

    /// Runs `sql` with its binds; returns every row.
    @discardableResult
    func query(_ sql: String, _ binds: PostgresBindings = PostgresBindings()) throws(StoreError) -> [PostgresRow] {
        do {
            return try outcome(of: connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: Self.logger)).rows
        } catch {
            throw Self.storeError(error, sql: sql, location: location)
        }
    }

    /// Waits for `future`. postgres-nio never completes a query written to a connection that
    /// already closed, so the wait also ends, with ``ConnectionLost``, when the connection is
    /// found closed (looked at every 100 ms while the answer is late).
    private func outcome<T: Sendable>(of future: EventLoopFuture<T>) throws -> T {
        if connection.isClosed { throw ConnectionLost() }
        let done = DispatchSemaphore(value: 0)
        future.whenComplete { _ in done.signal() }
        while done.wait(timeout: .now() + .milliseconds(100)) == .timedOut {
            if connection.isClosed {
                // An answer may have come with the close.
                if done.wait(timeout: .now() + .milliseconds(100)) == .success { break }
                throw ConnectionLost()
            }
        }
        return try future.wait()
    }

    /// The connection closed under a query.
    struct ConnectionLost: Error {}

    /// Queues `sql` on the connection and returns at once; ``wait(_:sql:)`` gives its outcome.
    /// Statements run in the order they were queued.
    func send(_ sql: String, _ binds: PostgresBindings = PostgresBindings()) -> EventLoopFuture<PostgresQueryResult> {
        connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: Self.logger)
    }

    func wait(_ sent: EventLoopFuture<PostgresQueryResult>, sql: String) throws(StoreError) {
        do {
            _ = try outcome(of: sent)
        } catch {
            throw Self.storeError(error, sql: sql, location: location)
        }
    }

    private let closed = Mutex(false)

    /// Closes the connection (once; a session released without it is closed then).
    func close() {
        guard closed.withLock({ done in defer { done = true }; return !done }) else { return }
        try? connection.close().wait()
    }

    deinit { close() }

    /// The SQLSTATE of a server error.
    static func sqlState(_ error: any Error) -> String? {
        (error as? PSQLError)?.serverInfo?[.sqlState]
    }

    /// What went wrong, in the server's or the OS's words, never as a Swift value.
    static func describe(_ error: any Error) -> String {
        switch error {
        case is ConnectionLost:
            return "the connection was closed"
        case let error as PSQLError:
            if let info = error.serverInfo {
                return [info[.sqlState], info[.message], info[.detail]].compactMap { $0 }.joined(separator: ": ")
            }
            if let underlying = error.underlying { return describe(underlying) }
            switch error.code {
            case .serverClosedConnection, .clientClosedConnection: return "the connection was closed"
            case .connectionError: return "the connection failed"
            case .sslUnsupported:
                return "the server does not support TLS, and the location asks for it (sslmode=require, "
                    + "verify-ca or verify-full, or a host other than loopback without sslmode=disable)"
            case .queryCancelled: return "the query was cancelled"
            default: return "the PostgreSQL protocol failed (\(error.code))"
            }
        case let error as NIOConnectionError:
            let reasons = error.connectionErrors.map { describe($0.error) }
            if let first = reasons.first { return first }
            if error.dnsAError != nil || error.dnsAAAAError != nil { return "no host is named \(error.host)" }
            return "no address of \(error.host) answered"
        case is SocketAddressError:
            return "no such host"
        case let error as IOError:
            return String(cString: strerror(error.errnoCode)).lowercased()
        case let error as NIOSSLExtraError where error == .failedToValidateHostname:
            return "the server's TLS certificate does not name this host (sslmode=verify-full)"
        case let error as NIOSSLError:
            return PostgresTLS.describe(error)
        case let error as ChannelError:
            return "the connection failed (\(error))"
        default:
            return (error as NSError).localizedDescription
        }
    }

    static func storeError(_ error: any Error, sql: String, location: PostgresLocation) -> StoreError {
        let state = sqlState(error) ?? ""
        let code: StoreError.Code
        switch state {
        case "23505": code = .uniqueViolation
        case "23503": code = .referenceViolation
        case "40001", "40P01", "55P03": code = .conflict
        case "53100": code = .storeFull
        case "3F000", "42P01": code = .notFound
        default: code = state.hasPrefix("XX") ? .corrupt : .io
        }
        return StoreError(code, "\(location): \(describe(error)) (in \(sql.prefix(120)))")
    }
}
#endif
