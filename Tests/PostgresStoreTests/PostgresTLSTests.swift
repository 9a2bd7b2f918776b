#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
import PostgresStore
import StoreMigration
import Testing

/// A certificate authority made for the test, and a server certificate it signed for the host
/// name `localhost` only.
private func makeCertificates(in dir: String) throws {
    let openssl = "/usr/bin/openssl"
    _ = try runCommand(openssl, ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                                 "-subj", "/CN=DataStore test CA", "-keyout", dir + "/ca.key", "-out", dir + "/ca.pem"])
    _ = try runCommand(openssl, ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
                                 "-keyout", dir + "/server.key", "-out", dir + "/server.csr"])
    try Data("subjectAltName=DNS:localhost\n".utf8).write(to: URL(fileURLWithPath: dir + "/san.ext"))
    _ = try runCommand(openssl, ["x509", "-req", "-in", dir + "/server.csr", "-CA", dir + "/ca.pem",
                                 "-CAkey", dir + "/ca.key", "-CAcreateserial", "-days", "2",
                                 "-extfile", dir + "/san.ext", "-out", dir + "/server.crt"])
}

/// A throwaway server on TCP (`listen`, `port`), with TLS when `ssl` names the directory of
/// its certificate; stopped when the returned value is released.
private final class TCPServer {
    let dir: String
    init(dir: String, listen: String, port: Int, ssl: String?) throws {
        self.dir = dir
        var environment = "PG_LISTEN='\(listen)' PG_PORT=\(port)"
        if let ssl { environment += " PG_SSL_DIR='\(ssl)'" }
        let status = system("\(environment) /bin/bash '\(PostgresTestServer.script)' start '\(dir)' >/dev/null")
        guard status == 0 else { throw StoreError(.io, "the TCP test server did not start (\(dir))") }
    }
    deinit { _ = system("/bin/bash '\(PostgresTestServer.script)' stop '\(dir)' >/dev/null 2>&1") }
}

/// Runs migrate-store: its exit status and standard error.
private func migrateStore(_ arguments: [String]) throws -> (status: Int32, errors: String) {
    let process = Process()
    process.executableURL = CrashRecovery.executable(named: "migrate-store")
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    let errors = Pipe()
    process.standardError = errors
    try process.run()
    let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return (process.terminationStatus, text)
}

/// The one address of this machine that is not loopback, if it has one.
private func nonLoopbackAddress() -> String? {
    (try? runCommand("/usr/bin/hostname", ["-I"]))?.split(separator: " ")
        .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        .first { !$0.isEmpty && !$0.contains(":") && !$0.hasPrefix("127.") }
}

/// TLS as libpq users know it: verify-full against the test's own CA works; a host the
/// certificate does not name, a CA the system does not trust, `require` against a server
/// without TLS and a clear-text attempt to a host other than loopback without
/// `sslmode=disable` are each refused with one line, before any password is sent; and
/// `migrate-store` takes the same URLs.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func postgreSQLOverTLSVerifiesWhatTheLocationAsksAndNeverFallsBackToClearText() throws {
    let dir = try TemporaryDirectory()
    try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: dir.url.path)
    let certs = dir.path("certs")
    try FileManager.default.createDirectory(atPath: certs, withIntermediateDirectories: true)
    try makeCertificates(in: certs)
    try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: certs + "/server.key")
    let tlsPort = Int.random(in: 20_000..<30_000)
    let plainPort = tlsPort + 1
    let tlsServer = try TCPServer(dir: dir.path("tls"), listen: "127.0.0.1", port: tlsPort, ssl: certs)
    let plainServer = try TCPServer(dir: dir.path("plain"), listen: "*", port: plainPort, ssl: nil)
    defer { withExtendedLifetime((tlsServer, plainServer)) {} }
    let schema = Schema(entities: [EntitySchema("Note", primaryKey: "id", attributes: [Attribute("id", .int)])])
    let ca = certs + "/ca.pem"

    // verify-full with the CA: works.
    let good = "postgres://postgres@localhost:\(tlsPort)/datastore?schema=tls&sslmode=verify-full&sslrootcert=\(ca)"
    let store = try PostgresStore(url: good, schema: schema)
    try store.writeSync { try $0.insert(["id": 1], into: "Note") }
    #expect(try store.read { try $0.count(FetchRequest("Note")) } == 1)
    try store.close()

    func refusal(_ url: String) -> String {
        do {
            let store = try PostgresStore(url: url, schema: schema)
            try? store.close()
            return "opened"
        } catch {
            return "\(error)"
        }
    }
    let wrongHost = refusal("postgres://postgres@127.0.0.1:\(tlsPort)/datastore?schema=tls&sslmode=verify-full"
        + "&sslrootcert=\(ca)")
    #expect(wrongHost.contains("does not name this host"), "\(wrongHost)")
    let untrusted = refusal("postgres://postgres@localhost:\(tlsPort)/datastore?schema=tls&sslmode=verify-full")
    #expect(untrusted.contains("not signed by a trusted authority"), "\(untrusted)")
    let noTLS = refusal("postgres://postgres@localhost:\(plainPort)/datastore?schema=plain&sslmode=require")
    #expect(noTLS.contains("does not support TLS"), "\(noTLS)")
    if let address = nonLoopbackAddress() {
        let clear = refusal("postgres://postgres@\(address):\(plainPort)/datastore?schema=plain")
        #expect(clear.contains("does not support TLS"), "a host past loopback is never sent clear text: \(clear)")
        let named = refusal("postgres://postgres@\(address):\(plainPort)/datastore?schema=plain&sslmode=disable")
        #expect(named == "opened", "clear text when the location names it: \(named)")
    } else {
        Issue.record("this machine has no address but loopback: the clear-text refusal was not tried")
    }
    for message in [wrongHost, untrusted, noTLS] {
        #expect(!message.contains("\n") && !message.contains("NIOSSL") && !message.contains("PSQLError"),
                "\(message)")
    }

    // migrate-store takes the same URLs.
    let source = StoreLocation(kind: .sqlite, path: dir.path("source.sqlite"))
    try DemoData.seed(source, items: 50, seed: 1)
    let copy = try migrateStore(["copy", "--from", source.description, "--to",
                           "postgres://postgres@localhost:\(tlsPort)/datastore?schema=copied&sslmode=verify-full"
                            + "&sslrootcert=\(ca)", "--progress", "none"])
    #expect(copy.status == 0, "\(copy.errors)")
    let refused = try migrateStore(["copy", "--from", source.description, "--to",
                              "postgres://postgres@127.0.0.1:\(tlsPort)/datastore?schema=other&sslmode=verify-full"
                               + "&sslrootcert=\(ca)", "--progress", "none"])
    #expect(refused.status == 3 && refused.errors.split(separator: "\n").count == 1
            && refused.errors.contains("does not name this host"), "\(refused.errors)")
}
#endif
