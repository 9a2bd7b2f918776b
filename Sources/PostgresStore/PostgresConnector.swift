#if Postgres
import CLibPQ
@_spi(Backend) import DataStoreAPI
import Foundation
import Synchronization

/// Where a PostgreSQL store lives: a libpq connection string with the store's `schema` added,
/// as a URL (`postgres://USER@HOST:PORT/DATABASE?schema=NAME&…`) or as `key=value` pairs
/// (`host=/run/postgresql dbname=app schema=app`).
///
/// Everything libpq takes is taken: several hosts (`postgres://h1,h2:5433/app?schema=app&
/// target_session_attrs=read-write`), `sslmode` and its files, `connect_timeout`, `service`,
/// the `PG…` environment variables, `~/.pgpass` and service files. Two rules are the store's own:
/// a secret is never part of a location (a `password`, `user:password@`, or the client key's
/// `sslpassword`: it would show in logs and reports; use `PGPASSWORD`, `~/.pgpass`, `PGPASSFILE`
/// or a service file), and a TCP host other than loopback is never sent clear text
/// unless the location says `sslmode=disable` or `allow` (see ``PostgresTLS``).
///
/// Two parameters say how the store hears of other processes' commits: `listen=poll` makes
/// observers poll instead of `LISTEN` (behind a pooler in transaction mode, which cannot pass
/// notifications), and `listen_host` (with `listen_port`) names a server to `LISTEN` on directly
/// while everything else goes through the pooler.
///
/// Four send reads to standbys: `read_hosts=HOST:PORT,…` names streaming standbys of the
/// primary that `read` and `readAsync` go to, spread over them (the change feed's reads, and so
/// live queries' re-reads, stay on the primary);
/// `read_your_writes=off` lets such a read see a standby as far as it has replayed, without
/// waiting for this store's own last commit (on by default); `standby_wait=SECONDS` bounds that
/// wait (1 by default), after which the read goes to the primary; `max_standby_lag=SECONDS` (10 by
/// default) is how far behind the primary a standby may be and still serve reads (see
/// docs/postgresql.md).
public struct PostgresLocation: Sendable, Hashable, CustomStringConvertible {
    /// The servers, in the order libpq tries them: host names, addresses, or Unix socket
    /// directories (starting with `/`); empty for libpq's default (its socket directory).
    public var hosts: [String]
    /// Each host's port (one port applies to every host).
    public var ports: [Int]
    /// The user to connect as.
    public var user: String
    /// The database.
    public var database: String
    /// The PostgreSQL schema (namespace) that holds the store's tables.
    public var schema: String
    /// How the connection uses TLS, as libpq's `sslmode`.
    public var tls: PostgresTLS
    /// libpq's other parameters the location gives (`target_session_attrs`, `connect_timeout`,
    /// `service`, …), passed as they are.
    public var parameters: [String: String]
    /// How observers hear of commits.
    public var listener: Listener

    /// How observers hear of other connections' commits.
    public enum Listener: Sendable, Hashable {
        /// `LISTEN` on a connection of its own to the location's servers (the default).
        case sameServer
        /// `LISTEN` on a connection to this host and port (past a pooler), the rest as the location.
        case direct(host: String, port: Int)
        /// No `LISTEN`: observers poll the commit counter (`listen=poll`).
        case poll
    }

    /// Standbys that serve reads (`read_hosts=HOST:PORT,…`; a host without a port has the
    /// location's first port), in the order given; empty to read from the primary.
    public var readHosts: [PostgresServer] = []
    /// Whether a read on a standby waits until the standby has replayed this store's last
    /// commit (`read_your_writes=on`, the default), so that a write and a read after it agree as
    /// on the primary; `off` reads whatever the standby has replayed.
    public var readYourWrites = true
    /// How long a read waits for a standby to replay this store's last commit before it goes to
    /// the primary (`standby_wait=SECONDS`, 1 by default).
    public var standbyWait: Duration = .seconds(1)
    /// How far behind the primary a standby may be and still serve reads
    /// (`max_standby_lag=SECONDS`, 10 by default): one that has not replayed what the primary
    /// had written that long ago is left alone for a while, and the read goes elsewhere.
    public var maxStandbyLag: Duration = .seconds(10)

    /// The first host (or the socket directory), `""` for libpq's default.
    public var host: String { hosts.first ?? "" }
    /// The first host's port.
    public var port: Int { ports.first ?? 5432 }

    /// The parameters that are the store's, not libpq's.
    private static let ownKeys: Set<String> = ["schema", "listen", "listen_host", "listen_port", "pooler",
                                               "answer_timeout", "write_retries", "write_connections", "read_hosts",
                                               "read_your_writes", "standby_wait", "max_standby_lag"]

    /// How long a connection waits for the server's next answer before it gives the server up
    /// (`answer_timeout=SECONDS`, 30 by default; 0 waits for as long as it takes). A server
    /// whose processes hang (stopped, a frozen VM) keeps its connections open, so neither
    /// `connect_timeout` nor TCP keepalives end a wait for it: the write fails with
    /// `unavailable` (or `io` when it was committing) within this bound, and the next one
    /// connects again. Give more to a store whose single statements run longer.
    public var answerTimeout: Duration? = .seconds(30)

    /// How many more times a write block runs when the server rolls its transaction back for a
    /// conflict with other connections' transactions (a serialization failure, `40001`, or a
    /// deadlock, `40P01`): `write_retries=N`, 10 by default; `write_retries=0` fails at once with
    /// `conflict`. Each retry waits a random time up to a bound that doubles (1 ms, then 2, 4,
    /// …, at most 100 ms). A block may therefore run more than once: keep what is not the
    /// store's (a message sent, a counter in memory) out of it.
    public var writeRetries = 10

    /// How many write transactions of one store run at once, each on a writer connection of
    /// its own (`write_connections=N`, at most ``maxWriteConnections``; when `nil`,
    /// ``defaultWriteConnections``): the connections are made as writes need them and kept. `writeSync` blocks of different
    /// threads, and awaited `writeAsync` blocks of different tasks, then run concurrently, and
    /// the server orders them (see Concurrency); more wait for a connection, at most 30 s, then
    /// fail with `busy`. `write_connections=1` runs one write at a time, as the embedded
    /// stores do.
    public var writeConnections: Int?

    /// The writer pool's size when neither the location nor the store's options give one:
    /// twice the machine's cores, and at least 4. A write transaction is one or two round trips that
    /// keep its connection busy only while the server works, so more connections than the
    /// server can run at once add waits inside the server rather than commits; and each one is
    /// a thread of the app's and a process of the server's. Measured on 2 cores, 16 callers
    /// committed 7,165 one-insert transactions a second on 4 connections and 4,870 on 16
    /// (Benchmarks/README.md). Give more for a server with many cores in front of a busy app.
    public static var defaultWriteConnections: Int { max(4, 2 * ProcessInfo.processInfo.activeProcessorCount) }

    /// The most writer connections a store may have.
    public static let maxWriteConnections = 1_000

    /// Whether the location goes through a pooler in transaction mode (`pooler=transaction`,
    /// pgbouncer's `pool_mode = transaction`): statements are not prepared by name (the next
    /// transaction may run on another server connection), and observers poll unless
    /// `listen_host` names a server to `LISTEN` on.
    public var transactionPooler: Bool

    /// Parses a URL (`postgres://…`), a `key=value` connection string, or the part after
    /// `postgres:` of a store location.
    public init(parsing text: String, environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(StoreError)
    {
        var pairs: [(String, String)]
        var authorityHosts: [String] = []
        var authorityPorts: [String] = []
        var user = "", database = ""
        if let rest = Self.stripScheme(text) {
            // user:password@ whose password holds an unencoded / or ? (which would otherwise split
            // it into a host, a port or a database, and show it): text up to the last @ with a
            // colon and no query parameter in it is a user and a password.
            if let at = rest.lastIndex(of: "@"), case let before = rest[..<at], before.contains(":"),
               !before.contains("="), !before.contains("&") {
                throw Self.passwordRefusal
            }
            var query: [(String, String)] = []
            var main = rest
            if let mark = rest.firstIndex(of: "?") {
                for pair in rest[rest.index(after: mark)...].split(separator: "&") where !pair.isEmpty {
                    let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                    let value = parts.count > 1 ? (parts[1].removingPercentEncoding ?? parts[1]) : ""
                    query.append((parts[0].removingPercentEncoding ?? parts[0], value))
                }
                main = String(rest[..<mark])
            }
            var authority = main
            if let slash = main.firstIndex(of: "/") {
                authority = String(main[..<slash])
                database = String(main[main.index(after: slash)...]).removingPercentEncoding ?? ""
            }
            if let at = authority.lastIndex(of: "@") {
                user = String(authority[..<at])
                authority = String(authority[authority.index(after: at)...])
                if user.contains(":") { throw Self.passwordRefusal }
                user = user.removingPercentEncoding ?? user
                // A colon percent-encoded (bob%3Apassword@) is a password too.
                if user.contains(":") { throw Self.passwordRefusal }
            }
            for spec in authority.split(separator: ",", omittingEmptySubsequences: false) where !authority.isEmpty {
                var host = String(spec), port = ""
                if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
                    let after = host[host.index(after: close)...]
                    port = after.hasPrefix(":") ? String(after.dropFirst()) : ""
                    host = String(host[host.index(after: host.startIndex)..<close])
                } else if let colon = host.lastIndex(of: ":") {
                    port = String(host[host.index(after: colon)...])
                    host = String(host[..<colon])
                }
                authorityHosts.append(host.removingPercentEncoding ?? host)
                authorityPorts.append(port)
            }
            pairs = query
        } else if text.contains("=") {
            pairs = try Self.keyValuePairs(text)
        } else {
            throw StoreError(.invalidArgument, "'\(LocationSecrets.redacted(postgres: text))' is not a PostgreSQL location: give a URL "
                + "(postgres://USER@HOST/DATABASE?schema=NAME) or key=value pairs (host=… dbname=… schema=…)")
        }
        var values: [String: String] = [:]
        for (key, value) in pairs { values[key] = value }
        for secret in Self.secretKeys where values[secret] != nil { throw Self.secretRefusal(secret) }
        guard let schema = values["schema"], !schema.isEmpty else {
            let add = Self.stripScheme(text) == nil ? "schema=NAME" : "?schema=NAME"
            throw StoreError(.invalidArgument, "postgres:\(LocationSecrets.redacted(postgres: text)) names no schema; add "
                + "\(add) (each store lives in a PostgreSQL schema of its own)")
        }
        guard schema.utf8.count <= 63, !schema.hasPrefix("pg_"), schema != "information_schema" else {
            throw StoreError(.invalidArgument, "'\(schema)' cannot be a store's schema name (at most 63 bytes, not "
                + "pg_… or information_schema)")
        }
        self.schema = schema
        hosts = Self.list(values["host"]) ?? (authorityHosts.allSatisfy(\.isEmpty) ? nil : authorityHosts)
            ?? Self.list(environment["PGHOST"]) ?? []
        let portText: [String] = Self.list(values["port"]) ?? (authorityPorts.allSatisfy(\.isEmpty) ? nil : authorityPorts)
            ?? Self.list(environment["PGPORT"]) ?? []
        var ports: [Int] = []
        for port in portText {
            guard let number = port.isEmpty ? 5432 : Int(port), (1...65535).contains(number) else {
                throw StoreError(.invalidArgument, "'\(port)' is not a port number (1 to 65535)")
            }
            ports.append(number)
        }
        if ports.isEmpty { ports = [5432] }
        guard ports.count == 1 || ports.count == max(1, hosts.count) else {
            throw StoreError(.invalidArgument, "postgres:\(LocationSecrets.redacted(postgres: text)) names \(hosts.count) hosts and \(ports.count) ports; "
                + "give one port for all, or one per host")
        }
        self.ports = ports
        self.user = values["user"] ?? (user.isEmpty ? environment["PGUSER"] ?? NSUserName() : user)
        self.database = values["dbname"] ?? (database.isEmpty ? environment["PGDATABASE"] ?? self.user : database)
        tls = try PostgresTLS(query: values, environment: environment)
        switch values["pooler"] {
        case nil, "none", "session": transactionPooler = false
        case "transaction": transactionPooler = true
        case let other?:
            throw StoreError(.invalidArgument, "pooler='\(other)' is not one of none, session, transaction")
        }
        switch values["listen"] {
        case nil where transactionPooler && values["listen_host"] == nil:
            listener = .poll
        case nil, "on":
            if let host = values["listen_host"] {
                guard let port = Int(values["listen_port"] ?? "5432") else {
                    throw StoreError(.invalidArgument, "listen_port '\(values["listen_port"] ?? "")' is not a port number")
                }
                listener = .direct(host: host, port: port)
            } else {
                listener = .sameServer
            }
        case "poll": listener = .poll
        case let other?:
            throw StoreError(.invalidArgument, "listen='\(other)' is not one of on, poll (or give listen_host)")
        }
        if let text = values["write_retries"] {
            guard let count = Int(text), (0...1_000).contains(count) else {
                throw StoreError(.invalidArgument, "write_retries='\(text)' is not a count of retries (0 to 1000)")
            }
            writeRetries = count
        }
        if let text = values["write_connections"] {
            guard let count = Int(text), (1...Self.maxWriteConnections).contains(count) else {
                throw StoreError(.invalidArgument, "write_connections='\(text)' is not a number of connections "
                    + "(1 to \(Self.maxWriteConnections))")
            }
            writeConnections = count
        }
        if let text = values["answer_timeout"] {
            guard let seconds = Double(text), seconds >= 0, seconds <= 86_400 else {
                throw StoreError(.invalidArgument, "answer_timeout='\(text)' is not a number of seconds (0 to 86400; "
                    + "0 for none)")
            }
            answerTimeout = seconds == 0 ? nil : .milliseconds(Int64(seconds * 1_000))
        }
        if let text = values["read_hosts"] {
            for spec in text.split(separator: ",", omittingEmptySubsequences: false) {
                let server = try PostgresServer(parsing: String(spec), defaultPort: ports[0])
                guard !readHosts.contains(server) else {
                    throw StoreError(.invalidArgument, "read_hosts names \(server) twice")
                }
                readHosts.append(server)
            }
        }
        switch values["read_your_writes"] {
        case nil, "on", "true", "1": readYourWrites = true
        case "off", "false", "0": readYourWrites = false
        case let other?: throw StoreError(.invalidArgument, "read_your_writes='\(other)' is not one of on, off")
        }
        if let text = values["standby_wait"] {
            guard let seconds = Double(text), seconds >= 0, seconds <= 3_600 else {
                throw StoreError(.invalidArgument, "standby_wait='\(text)' is not a number of seconds (0 to 3600)")
            }
            standbyWait = .milliseconds(Int64(seconds * 1_000))
        }
        if let text = values["max_standby_lag"] {
            guard let seconds = Double(text), seconds >= 0.001, seconds <= 86_400 else {
                throw StoreError(.invalidArgument, "max_standby_lag='\(text)' is not a number of seconds (0.001 to 86400)")
            }
            maxStandbyLag = .milliseconds(Int64(seconds * 1_000))
        }
        let passed: Set<String> = ["host", "port", "user", "dbname", "sslmode", "sslrootcert", "sslcert", "sslkey"]
        parameters = values.filter { !Self.ownKeys.contains($0.key) && !passed.contains($0.key) }
        try Self.validate(parameters)
    }

    /// A comma-separated list's items.
    private static func list(_ text: String?) -> [String]? {
        guard let text else { return nil }
        return text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
    }

    private static var passwordRefusal: StoreError { secretRefusal("password") }

    /// libpq's parameters that hold a secret: never part of a location, which every command
    /// prints, reports write and a follow record keeps.
    /// (`passwd`, `pwd` and `pass` are not libpq's, but what a user who typed one meant.)
    static let secretKeys = ["password", "sslpassword", "passwd", "pwd", "pass"]

    /// The refusal of a location that holds the secret `key` (its value is not repeated).
    private static func secretRefusal(_ key: String) -> StoreError {
        switch key {
        case "sslpassword":
            return StoreError(.invalidArgument, "a PostgreSQL location must not hold sslpassword (the passphrase of "
                + "the client key: it would show wherever the location does); give it in a service file "
                + "(service=NAME, with sslpassword in PGSERVICEFILE), or use a key without a passphrase")
        default:
            return StoreError(.invalidArgument, "a PostgreSQL location must not hold a password (it would show wherever "
                + "the location does); set PGPASSWORD or use ~/.pgpass")
        }
    }

    /// The text after `postgres://`, `postgresql://` or `//`, or `nil` for a `key=value` string.
    private static func stripScheme(_ text: String) -> String? {
        for prefix in ["postgres://", "postgresql://", "//"] where text.hasPrefix(prefix) {
            return String(text.dropFirst(prefix.count))
        }
        return nil
    }

    /// libpq's `key = value` syntax: values in single quotes may hold spaces, `\'` and `\\`.
    private static func keyValuePairs(_ text: String) throws(StoreError) -> [(String, String)] {
        var pairs: [(String, String)] = []
        var characters = Array(text)[...]
        func skipSpaces() { while characters.first?.isWhitespace == true { characters.removeFirst() } }
        while true {
            skipSpaces()
            guard !characters.isEmpty else { return pairs }
            var key = ""
            while let c = characters.first, c != "=", !c.isWhitespace { key.append(characters.removeFirst()) }
            // A secret is refused before its value is read: a mistake in the value (a space
            // without quotes, a missing quote) must not put part of it in the message.
            if let secret = secretKeys.first(where: { $0 == key.lowercased() }) { throw secretRefusal(secret) }
            skipSpaces()
            guard characters.first == "=" else {
                throw StoreError(.invalidArgument, "'\(key)' in the connection string has no '=value'")
            }
            characters.removeFirst()
            skipSpaces()
            var value = ""
            if characters.first == "'" {
                characters.removeFirst()
                while true {
                    guard let c = characters.popFirst() else {
                        throw StoreError(.invalidArgument, "the value of '\(key)' has no closing quote")
                    }
                    if c == "'" { break }
                    if c == "\\", let next = characters.popFirst() { value.append(next) } else { value.append(c) }
                }
            } else {
                while let c = characters.first, !c.isWhitespace {
                    characters.removeFirst()
                    if c == "\\", let next = characters.popFirst() { value.append(next) } else { value.append(c) }
                }
            }
            pairs.append((key, value))
        }
    }

    /// libpq's own check of the parameters: an unknown keyword is named now, not at connect.
    private static func validate(_ parameters: [String: String]) throws(StoreError) {
        guard !parameters.isEmpty else { return }
        let text = parameters.sorted { $0.key < $1.key }.map { key, value in
            "\(key)='" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
        }.joined(separator: " ")
        var message: UnsafeMutablePointer<CChar>?
        if let options = PQconninfoParse(text, &message) {
            PQconninfoFree(options)
            return
        }
        let reason = message.map { LibpqConnection.oneLine(String(cString: $0)) } ?? "libpq cannot read it"
        if let message { PQfreemem(message) }
        throw StoreError(.invalidArgument, "the PostgreSQL location's parameters are not valid: \(reason)")
    }

    public var description: String {
        let socket = hosts.first?.hasPrefix("/") == true
        var authority = ""
        if !socket {
            authority = hosts.enumerated().map { i, host in
                let shown = host.contains(":") ? "[\(host)]" : host
                let port = ports.count > 1 ? ports[i] : ports[0]
                return port == 5432 ? shown : "\(shown):\(port)"
            }.joined(separator: ",")
            if hosts.isEmpty, port != 5432 { authority = ":\(port)" }
        }
        var query = ["schema=\(schema)"]
        if socket {
            query.append("host=\(hosts.joined(separator: ","))")
            if ports != [5432] { query.append("port=\(ports.map(String.init).joined(separator: ","))") }
        }
        if transactionPooler { query.append("pooler=transaction") }
        /// Seconds as a location gives them: `2`, `0.25` (any duration a caller set, whole).
        func seconds(_ duration: Duration) -> String {
            let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
            return seconds == seconds.rounded() ? Int64(exactly: seconds).map { String($0) } ?? String(seconds)
                : String(seconds)
        }
        if answerTimeout != .seconds(30) { query.append("answer_timeout=\(answerTimeout.map(seconds) ?? "0")") }
        if writeRetries != 10 { query.append("write_retries=\(writeRetries)") }
        if let writeConnections { query.append("write_connections=\(writeConnections)") }
        switch listener {
        case .sameServer: break
        case .poll where transactionPooler: break
        case .poll: query.append("listen=poll")
        case let .direct(host, port): query.append("listen_host=\(host)&listen_port=\(port)")
        }
        if !readHosts.isEmpty { query.append("read_hosts=\(readHosts.map(\.description).joined(separator: ","))") }
        if !readYourWrites { query.append("read_your_writes=off") }
        if standbyWait != .seconds(1) { query.append("standby_wait=\(seconds(standbyWait))") }
        if maxStandbyLag != .seconds(10) { query.append("max_standby_lag=\(seconds(maxStandbyLag))") }
        query += parameters.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        return "postgres://\(user)@\(authority)/\(database)?" + query.joined(separator: "&") + tls.queryText
    }

    /// The location of one standby of ``readHosts``: its host and port alone (so that a lost
    /// connection connects to it again, not to the primary), any server kind accepted.
    func standby(_ server: PostgresServer) -> PostgresLocation {
        var location = self
        location.hosts = [server.host]
        location.ports = [server.port]
        location.readHosts = []
        // (libpq would connect to `hostaddr` rather than the standby's host.)
        for key in ["target_session_attrs", "hostaddr", "load_balance_hosts"] { location.parameters[key] = nil }
        return location
    }

    /// The server's address as a user gives it: `HOST:PORT` (several, with commas), or the
    /// socket directory.
    var server: String {
        if hosts.isEmpty { return "libpq's default socket (port \(port))" }
        if host.hasPrefix("/") { return "\(host) (Unix socket, port \(port))" }
        return hosts.enumerated().map { i, host in "\(host):\(ports.count > 1 ? ports[i] : ports[0])" }
            .joined(separator: ",")
    }

    /// libpq's keywords and values for a connection (to the location's servers, or to
    /// `overriding` host and port).
    func connectionParameters(overriding: (host: String, port: Int)? = nil) -> [(String, String)] {
        var list: [(String, String)] = []
        if let overriding {
            list += [("host", overriding.host), ("port", String(overriding.port))]
        } else {
            if !hosts.isEmpty { list.append(("host", hosts.joined(separator: ","))) }
            list.append(("port", ports.map(String.init).joined(separator: ",")))
        }
        list += [("user", user), ("dbname", database), ("client_encoding", "UTF8")]
        if parameters["application_name"] == nil {
            // Operators see which store a connection serves (pg_stat_activity.application_name).
            list.append(("application_name", String("datastore:\(schema)".prefix(63))))
        }
        let tcpHosts = overriding.map { [$0.host] } ?? hosts
        list += tls.parameters(hosts: tcpHosts)
        list += parameters.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        return list
    }

    /// A new connection, waited for.
    func connect(pipelined: Bool = true, overriding: (host: String, port: Int)? = nil) throws(StoreError) -> LibpqConnection {
        try tls.checkFiles(server: server)
        do {
            return try LibpqConnection(connectionParameters(overriding: overriding), pipelined: pipelined,
                                       answerTimeout: answerTimeout)
        } catch {
            // libpq gives a failed connection no SQLSTATE, and its words (and the server's) are in
            // the language of LANG and lc_messages: whether the failure may pass is decided on
            // what a diagnosing attempt sees (how far it got, the server's SQLSTATE), never on text.
            let diagnosis = LibpqConnection.diagnose(connectionParameters(overriding: overriding))
            throw StoreError(diagnosis.isTransient ? .unavailable : .io,
                             "cannot connect to the PostgreSQL server at \(overriding.map { "\($0.host):\($0.port)" } ?? server) "
                                 + "(database \(database), user \(user)): \(PostgresSession.describe(error))",
                             cause: .postgres(sqlState: PostgresSQLState.unableToConnect,
                                              message: diagnosis.sqlState.map { "\($0): \(error.message)" } ?? error.message))
        }
    }

    /// Whether `error` is a failure to connect (``connect(pipelined:overriding:)``): nothing of a
    /// transaction reached a server.
    static func isConnectFailure(_ error: StoreError) -> Bool {
        error.cause?.sqlState == PostgresSQLState.unableToConnect
    }
}

/// One connection used synchronously, with the location it serves for its errors.
final class PostgresSession: @unchecked Sendable {
    /// The connection; replaced by ``reconnect()`` (by the one thread that uses the session).
    private(set) var connection: LibpqConnection
    let location: PostgresLocation

    init(_ location: PostgresLocation, pipelined: Bool = true,
         overriding: (host: String, port: Int)? = nil) throws(StoreError) {
        self.location = location
        connection = try location.connect(pipelined: pipelined, overriding: overriding)
        connection.preparesStatements = !location.transactionPooler
    }

    /// A new connection in place of a lost one: libpq tries the location's hosts in order (with
    /// `target_session_attrs=read-write`, until one accepts writes).
    func reconnect() throws(StoreError) {
        connection = try location.connect()
        connection.preparesStatements = !location.transactionPooler
        afterReconnect?(self)
    }

    /// What the store does on a connection made again (set by the engine).
    var afterReconnect: ((PostgresSession) -> Void)?

    /// Whether the connection is gone (checked without waiting).
    var isClosed: Bool { !connection.isAlive }

    /// Whether the server answered a statement on this connection with a serialization failure or
    /// a deadlock since the flag was last cleared: the writer's own transaction conflicted,
    /// rather than the error coming from somewhere else (another store used inside a block).
    var conflicted = false

    /// Whether the server refused a statement on this connection as read-only (`25006`) since the
    /// flag was last cleared (at a write transaction's start): the writer's own refusal, rather
    /// than one rethrown from another store.
    var refusedAsReadOnly = false

    /// Whether a statement on this connection met a taken key (`23505`) since the flag was last
    /// cleared (at a write transaction's start): the writer's own, rather than one rethrown
    /// from another store.
    var metTakenKey = false

    /// The store's record of the feed's state that write transactions assume (set by the engine
    /// on its writers).
    var feedStateCache: FeedStateCache?

    /// The store error for `error`, noting a conflict the server reported. The check of the
    /// feed's state at commit failing (the state changed since the transaction assumed it) is a
    /// conflict too: the state is read again, and the block runs again.
    private func failure(_ error: LibpqError, sql: String) -> StoreError {
        var error = error
        if FeedStateCache.isCheckFailure(error, schema: location.schema) {
            feedStateCache?.forget()
            error = LibpqError(message: "the change feed's settings changed (another connection changed them) after "
                                   + "this transaction assumed them; it runs again with the new ones",
                               connectionLost: false, sqlState: PostgresSQLState.serializationFailure)
        }
        if PostgresSQLState.isConflict(error.sqlState) { conflicted = true }
        if error.sqlState == PostgresSQLState.readOnlyTransaction { refusedAsReadOnly = true }
        if error.sqlState == PostgresSQLState.uniqueViolation { metTakenKey = true }
        return Self.storeError(error, sql: sql, location: location)
    }

    /// Runs `sql` with its parameters and waits for its rows (after everything queued before).
    @discardableResult
    func query(_ sql: String, _ params: LibpqParameters = LibpqParameters()) throws(StoreError) -> LibpqResult {
        do {
            return try connection.query(sql, params)
        } catch {
            throw failure(error, sql: sql)
        }
    }

    /// Queues `sql`; it goes to the server with the next statement waited for, or at ``flush()``.
    /// Unless `prepared` is `false`, it is prepared by name on the connection and kept.
    @discardableResult
    func send(_ sql: String, _ params: consuming LibpqParameters = LibpqParameters(), wanted: Bool = true,
              prepared: Bool = true) throws(StoreError) -> LibpqConnection.Ticket
    {
        do {
            return try connection.send(sql, consume params, wanted: wanted, prepared: prepared)
        } catch {
            throw failure(error, sql: sql)
        }
    }

    /// The answer to a statement queued with ``send(_:_:wanted:)``; on `connection`, one this
    /// session had before it connected again (a commit's answer still on its way), when given.
    @discardableResult
    func wait(_ ticket: LibpqConnection.Ticket, on connection: LibpqConnection? = nil, sql: String) throws(StoreError)
        -> LibpqResult {
        do {
            return try (connection ?? self.connection).result(ticket)
        } catch {
            throw failure(error, sql: sql)
        }
    }

    /// Gives up the answer to a statement queued with ``send(_:_:wanted:prepared:)``.
    func discard(_ ticket: LibpqConnection.Ticket) { connection.discard(ticket) }

    /// Reads what the server has sent so far, without waiting (``LibpqConnection/drainSocket()``).
    func drainSocket() { connection.drainSocket() }

    /// Sends what is queued without waiting for its answers.
    func flush() throws(StoreError) {
        do {
            try connection.flush()
        } catch {
            throw failure(error, sql: "the statements queued")
        }
    }

    /// Reads every answer still on its way; throws only when the connection is lost.
    func settle() throws(StoreError) {
        do {
            try connection.settle()
        } catch {
            throw Self.storeError(error, sql: "a statement sent earlier", location: location)
        }
    }

    /// Drops the connection (see ``LibpqConnection/abandon()``): the next use connects again.
    func abandonConnection() { connection.abandon() }

    private let closed = Mutex(false)

    /// Marks the session closed (the connection is freed with the session).
    func close() {
        closed.withLock { $0 = true }
    }

    /// What went wrong, in the server's or libpq's words, on one line, with TLS failures and a
    /// missing password said plainly.
    static func describe(_ error: LibpqError) -> String {
        let text = error.message
        if text.contains("does not match host name") {
            return "the server's TLS certificate does not name this host (sslmode=verify-full)"
        }
        if text.contains("certificate verify failed") {
            return "the server's TLS certificate is not signed by a trusted authority (sslrootcert)"
        }
        if text.contains("server does not support SSL, but SSL was required") {
            return "the server does not support TLS, and the location asks for it (sslmode=require, verify-ca or "
                + "verify-full, or a host other than loopback without sslmode=disable)"
        }
        if text.contains("no password supplied") {
            return "the server asks for a password and none was given (set PGPASSWORD, or add a line to ~/.pgpass "
                + "or to the file PGPASSFILE names)"
        }
        if let state = error.sqlState { return "\(state): \(text)" }
        return text
    }

    static func storeError(_ error: LibpqError, sql: String, location: PostgresLocation) -> StoreError {
        let state = error.sqlState ?? ""
        let code: StoreError.Code
        typealias S = PostgresSQLState
        switch state {
        case S.uniqueViolation: code = .uniqueViolation
        case S.foreignKeyViolation: code = .referenceViolation
        case S.serializationFailure, S.deadlockDetected, S.lockNotAvailable: code = .conflict
        case S.diskFull: code = .storeFull
        case S.invalidSchemaName, S.undefinedTable: code = .notFound
        case S.readOnlyTransaction: code = .unavailable
        default: code = error.connectionLost ? .unavailable : state.hasPrefix(S.internalErrorClass) ? .corrupt : .io
        }
        let what = state == S.readOnlyTransaction ? "the server no longer accepts writes (a standby, or a primary being demoted): "
            : ""
        return StoreError(code, "\(location): \(what)\(describe(error)) (in \(sql.prefix(120)))",
                          cause: StoreError.Cause.postgres(sqlState: state, message: error.message))
    }
}
/// One server of a location: a host name, an address or a Unix socket directory, and a port.
public struct PostgresServer: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `HOST`, `HOST:PORT`, `[IPV6]:PORT`, or a socket directory (`/run/postgresql`, with
    /// `:PORT` after it when it is not `defaultPort`).
    init(parsing text: String, defaultPort: Int) throws(StoreError) {
        var host = text, port = ""
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            let after = host[host.index(after: close)...]
            guard after.isEmpty || after.hasPrefix(":") else {
                throw StoreError(.invalidArgument, "'\(text)' in read_hosts is not HOST:PORT (give [IPV6]:PORT)")
            }
            port = after.isEmpty ? "" : String(after.dropFirst())
            host = String(host[host.index(after: host.startIndex)..<close])
        } else if let colon = host.lastIndex(of: ":"), host.filter({ $0 == ":" }).count == 1 || host.hasPrefix("/") {
            port = String(host[host.index(after: colon)...])
            host = String(host[..<colon])
        }
        guard !host.isEmpty else {
            throw StoreError(.invalidArgument, "read_hosts names an empty host in '\(text)'; give HOST:PORT, separated by commas")
        }
        guard let number = port.isEmpty ? defaultPort : Int(port), (1...65_535).contains(number) else {
            throw StoreError(.invalidArgument, "'\(port)' in read_hosts is not a port number (1 to 65535)")
        }
        // (A URL's values are decoded once already.)
        self.host = host
        self.port = number
    }

    public var description: String { host.contains(":") && !host.hasPrefix("/") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
#endif
