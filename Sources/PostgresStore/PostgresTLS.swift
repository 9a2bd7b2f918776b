#if Postgres
@_spi(Backend) import DataStoreAPI
import Foundation

/// How a connection to PostgreSQL uses TLS: libpq's `sslmode`, `sslrootcert`, `sslcert` and
/// `sslkey`, from the location's query (`?sslmode=verify-full&sslrootcert=ca.pem`) or from
/// `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT` and `PGSSLKEY`.
///
/// The modes are libpq's: `disable` (never), `allow` and `prefer` (TLS when the server offers
/// it), `require` (always, without checking the certificate unless `sslrootcert` is given),
/// `verify-ca` (the certificate must chain to `sslrootcert`, or to the system's trust store) and
/// `verify-full` (that, and it must name the host); libpq does the work. One rule is stricter than libpq's: a TCP
/// host other than loopback is never sent a password or data in clear unless the location names
/// a mode that allows it (`disable` or `allow`), so `prefer`, the default, requires TLS for such
/// a host; on loopback it falls back to clear text as libpq's does, and a Unix socket never uses
/// TLS.
public struct PostgresTLS: Sendable, Hashable {
    /// libpq's `sslmode` values.
    public enum Mode: String, Sendable, Hashable, CaseIterable {
        case disable, allow, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    /// The mode the location names, or `nil` for the default.
    public var mode: Mode?
    /// A PEM file of the certificate authorities to trust (default: the system's trust store).
    public var rootCertificate: String?
    /// A PEM file of the client's certificate, and one of its private key, for servers that ask
    /// for one.
    public var clientCertificate: String?
    /// The client certificate's private key (PEM).
    public var clientKey: String?

    init(query: [String: String], environment: [String: String]) throws(StoreError) {
        if let text = query["sslmode"] ?? environment["PGSSLMODE"] {
            guard let mode = Mode(rawValue: text) else {
                throw StoreError(.invalidArgument, "sslmode '\(text)' is not one of "
                    + Mode.allCases.map(\.rawValue).joined(separator: ", "))
            }
            self.mode = mode
        }
        rootCertificate = query["sslrootcert"] ?? environment["PGSSLROOTCERT"]
        clientCertificate = query["sslcert"] ?? environment["PGSSLCERT"]
        clientKey = query["sslkey"] ?? environment["PGSSLKEY"]
        if (clientCertificate == nil) != (clientKey == nil) {
            throw StoreError(.invalidArgument, "sslcert and sslkey go together: give both or neither")
        }
    }

    /// The query parameters that say so, for the location's text.
    var queryText: String {
        [("sslmode", mode?.rawValue), ("sslrootcert", rootCertificate), ("sslcert", clientCertificate),
         ("sslkey", clientKey)].compactMap { name, value in value.map { "&\(name)=\($0)" } }.joined()
    }

    /// Whether the connection checks that the certificate names the host.
    var verifiesHostname: Bool { mode == .verifyFull }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// The system's trust store, for `verify-ca` and `verify-full` without `sslrootcert`
    /// (libpq 16 calls it `sslrootcert=system`; libpq 15 would look for ~/.postgresql/root.crt).
    static let systemTrustStore = "/etc/ssl/certs/ca-certificates.crt"

    /// libpq's TLS parameters for a connection to `hosts`: the stricter default past loopback
    /// (`prefer` becomes `require`), and the system's trust store when none is named.
    func parameters(hosts: [String]) -> [(String, String)] {
        var mode = self.mode ?? .prefer
        let pastLoopback = hosts.contains { !$0.hasPrefix("/") && !Self.isLoopback($0) }
        if mode == .prefer, pastLoopback { mode = .require }
        var list = [("sslmode", mode.rawValue)]
        if let rootCertificate {
            list.append(("sslrootcert", rootCertificate))
        } else if mode == .verifyCA || mode == .verifyFull {
            list.append(("sslrootcert", Self.systemTrustStore))
        }
        if let clientCertificate, let clientKey { list += [("sslcert", clientCertificate), ("sslkey", clientKey)] }
        return list
    }

    /// The files the location names exist and can be read (said before libpq tries them).
    func checkFiles(server: String) throws(StoreError) {
        if let rootCertificate, !FileManager.default.isReadableFile(atPath: rootCertificate) {
            throw StoreError(.notFound, "sslrootcert \(rootCertificate) does not exist or cannot be read")
        }
        for (name, file) in [("sslcert", clientCertificate), ("sslkey", clientKey)] {
            if let file, !FileManager.default.isReadableFile(atPath: file) {
                throw StoreError(.notFound, "\(name) \(file) does not exist or cannot be read")
            }
        }
    }
}
#endif
