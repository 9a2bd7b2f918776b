#if Postgres
@_spi(Backend) import DataStoreAPI
import Foundation
import PostgresNIO

/// How a connection to PostgreSQL uses TLS: libpq's `sslmode`, `sslrootcert`, `sslcert` and
/// `sslkey`, from the location's query (`?sslmode=verify-full&sslrootcert=ca.pem`) or from
/// `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT` and `PGSSLKEY`.
///
/// The modes are libpq's: `disable` (never), `allow` and `prefer` (TLS when the server offers
/// it), `require` (always, without checking the certificate unless `sslrootcert` is given),
/// `verify-ca` (the certificate must chain to `sslrootcert`, or to the system's trust store) and
/// `verify-full` (that, and it must name the host). One rule is stricter than libpq's: a TCP
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

    static func isIPAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    /// postgres-nio's TLS setting for a TCP connection to `host`.
    func configuration(host: String, server: String) throws(StoreError) -> PostgresConnection.Configuration.TLS {
        switch mode ?? .prefer {
        case .disable:
            return .disable
        case .allow:
            return .prefer(try context(verification: .none, server: server))
        case .prefer where Self.isLoopback(host):
            return .prefer(try context(verification: .none, server: server))
        case .prefer:
            // Past loopback, clear text only when the location names it (disable or allow).
            return .require(try context(verification: .none, server: server))
        case .require:
            // libpq: with a root certificate given, require checks the chain as verify-ca does.
            return .require(try context(verification: rootCertificate == nil ? .none : .noHostnameVerification,
                                        server: server))
        case .verifyCA:
            return .require(try context(verification: .noHostnameVerification, server: server))
        case .verifyFull:
            return .require(try context(verification: .fullVerification, server: server))
        }
    }

    private func context(verification: CertificateVerification, server: String) throws(StoreError) -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.certificateVerification = verification
        do {
            if let rootCertificate {
                guard FileManager.default.isReadableFile(atPath: rootCertificate) else {
                    throw StoreError(.notFound, "sslrootcert \(rootCertificate) does not exist or cannot be read")
                }
                configuration.trustRoots = .file(rootCertificate)
            }
            if let clientCertificate, let clientKey {
                for file in [clientCertificate, clientKey] where !FileManager.default.isReadableFile(atPath: file) {
                    throw StoreError(.notFound, "\(file == clientKey ? "sslkey" : "sslcert") \(file) does not exist "
                        + "or cannot be read")
                }
                configuration.certificateChain = try NIOSSLCertificate.fromPEMFile(clientCertificate)
                    .map { .certificate($0) }
                configuration.privateKey = .privateKey(try NIOSSLPrivateKey(file: clientKey, format: .pem))
            }
            return try NIOSSLContext(configuration: configuration)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.invalidArgument, "cannot set up TLS for \(server): "
                + ((error as? NIOSSLError).map(Self.describe) ?? "\(error)"))
        }
    }

    /// A TLS failure in words: what OpenSSL's error queue says, without Swift's types.
    static func describe(_ error: NIOSSLError) -> String {
        switch error {
        case .handshakeFailed(let inner):
            let text = "\(inner)"
            if text.contains("CERTIFICATE_VERIFY_FAILED") {
                return "the server's TLS certificate is not signed by a trusted authority (sslrootcert)"
            }
            return "the TLS handshake failed"
        case .failedToLoadCertificate: return "a certificate file cannot be read as PEM"
        case .failedToLoadPrivateKey: return "the private key file cannot be read as PEM"
        case .uncleanShutdown: return "the server closed the TLS connection"
        default: return "TLS failed"
        }
    }
}
#endif
