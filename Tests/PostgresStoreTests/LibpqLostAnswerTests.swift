#if Postgres
import DataStoreAPI
import DataStoreTestSupport
import Dispatch
import Foundation
@_spi(Backend) @testable import PostgresStore
import Testing

/// A server of one connection on a Unix socket of its own: it says it is ready (the protocol's
/// `AuthenticationOk` and `ReadyForQuery`, nothing else), reads what the client sends next, and
/// ends the connection without a word, as a server process killed with SIGKILL does.
private final class VanishingServer: @unchecked Sendable {
    static let port = 5_999
    private let listener: Int32
    /// Signalled once the connection was ended.
    let ended = DispatchSemaphore(value: 0)

    init(directory: String) throws {
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array("\(directory)/.s.PGSQL.\(Self.port)".utf8CString)
        guard path.count <= MemoryLayout.size(ofValue: address.sun_path) else {
            throw StoreError(.invalidArgument, "the socket's path \(directory) is too long")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in path.withUnsafeBytes { raw.copyMemory(from: $0) } }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard listener >= 0, bound == 0, listen(listener, 1) == 0 else {
            throw StoreError(.io, "the test's server cannot listen in \(directory): errno \(errno)")
        }
        Thread { [self] in serveOne() }.start()
    }

    deinit { close(listener) }

    private func serveOne() {
        let client = accept(listener, nil, nil)
        guard client >= 0 else { return }
        // The startup message: its length (four bytes, big-endian, itself included), then the rest.
        var length = [UInt8](repeating: 0, count: 4)
        defer {
            close(client)
            ended.signal()
        }
        guard readFully(client, &length) else { return }
        let rest = Int(length.reduce(0) { $0 << 8 | UInt32($1) }) - 4
        var startup = [UInt8](repeating: 0, count: max(0, rest))
        guard readFully(client, &startup) else { return }
        let ready: [UInt8] = [0x52, 0, 0, 0, 8, 0, 0, 0, 0, 0x5A, 0, 0, 0, 5, 0x49]
        _ = ready.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
        var statement = [UInt8](repeating: 0, count: 4_096)
        _ = statement.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
    }

    private func readFully(_ descriptor: Int32, _ buffer: inout [UInt8]) -> Bool {
        var filled = 0
        while filled < buffer.count {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + filled, $0.count - filled) }
            guard count > 0 else { return false }
            filled += count
        }
        return true
    }
}

/// A wait that begins once the server has ended the connection without a word (its end is
/// already in the socket) fails at once with the loss, not after the answer timeout: the
/// answer's first read finds the connection closed, and no `poll` waits on the socket libpq
/// closed then (it would wait out the whole timeout, as a write after a failover once could).
@Test func anAnswerAwaitedAfterTheServerVanishedFailsAtOnce() throws {
    let dir = try TemporaryDirectory()
    let server = try VanishingServer(directory: dir.url.path)
    let connection = try LibpqConnection([("host", dir.url.path), ("port", "\(VanishingServer.port)"),
                                          ("user", "test"), ("dbname", "test")], answerTimeout: .seconds(120))
    let ticket = try connection.send("SELECT 1", prepared: false)
    try connection.flush()
    // The server read the statement and ended the connection.
    server.ended.wait()
    let clock = ContinuousClock()
    let start = clock.now
    #expect(throws: LibpqError.self) { try connection.result(ticket) }
    let took = clock.now - start
    #expect(took < .seconds(30), "the loss was reported after \(took)")
}
#endif
