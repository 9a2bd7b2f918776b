#if Postgres
import CLibPQ
@_spi(Backend) import DataStoreAPI
import Foundation

/// A failure of the server or the connection, in the server's words.
struct LibpqError: Error {
    /// The SQLSTATE, when the server sent one.
    var sqlState: String?
    /// One line: the server's message and detail, or libpq's.
    var message: String
    /// Whether the connection is gone (what ran of the transaction is rolled back by the server).
    var connectionLost: Bool
    /// The table and column a constraint's failure names (the server's fields, never its words).
    var schema: String?
    var table: String?
    var column: String?

    /// The error of a failed result.
    init(result: OpaquePointer, connection: OpaquePointer?) {
        func field(_ code: Character) -> String? {
            guard let text = PQresultErrorField(result, Int32(code.asciiValue ?? 0)) else { return nil }
            return String(cString: text)
        }
        sqlState = field("C")
        schema = field("s")
        table = field("t")
        column = field("c")
        let primary = field("M") ?? LibpqConnection.oneLine(String(cString: PQresultErrorMessage(result)))
        message = [primary, field("D")].compactMap { $0 }.joined(separator: ": ")
        connectionLost = connection.map { PQstatus($0) == CONNECTION_BAD } ?? false
            || sqlState?.hasPrefix(PostgresSQLState.connectionExceptionClass) == true
            || PostgresSQLState.sessionEnded.contains(sqlState ?? "")
    }

    init(message: String, connectionLost: Bool, sqlState: String? = nil) {
        self.message = message
        self.connectionLost = connectionLost
        self.sqlState = sqlState
    }
}

/// Parameters sent in binary with their types, so that the server never guesses: `bigint`,
/// `float8`, `boolean`, `text`, `bytea` and `uuid`, in one contiguous buffer.
struct LibpqParameters {
    /// A parameter: its type, its length (-1: NULL) and where its bytes begin in ``data``.
    struct Slot {
        var type: UInt32
        var length: Int32
        var offset: Int
    }
    /// (Two arrays, not one per column libpq takes: a write sends several statements, and each
    /// array is an allocation; ``LibpqConnection/send(_:_:wanted:prepared:)`` lays the types
    /// and lengths out for libpq on the stack.)
    private(set) var slots: [Slot] = []
    private(set) var data: [UInt8] = []

    init() {}

    var count: Int { slots.count }

    /// The parameters' types, in order.
    var types: [UInt32] { slots.map(\.type) }

    /// Whether the parameters' types are `types`, in order (without making an array).
    func hasTypes(_ types: [UInt32]) -> Bool {
        guard types.count == slots.count else { return false }
        for i in 0..<types.count where types[i] != slots[i].type { return false }
        return true
    }

    /// Room for a statement's usual parameters, made at the first: arrays grown one append at a
    /// time reallocate two or three times.
    private mutating func reserve() {
        guard slots.capacity == 0 else { return }
        slots.reserveCapacity(8)
        data.reserveCapacity(128)
    }

    /// Empties the parameters, keeping their buffers (``LibpqConnection/binds()``).
    mutating func removeAll() {
        slots.removeAll(keepingCapacity: true)
        data.removeAll(keepingCapacity: true)
    }

    private mutating func add(_ type: UInt32, _ body: (inout [UInt8]) -> Void) {
        reserve()
        let start = data.count
        body(&data)
        slots.append(Slot(type: type, length: Int32(data.count - start), offset: start))
    }

    mutating func appendNull() {
        reserve()
        slots.append(Slot(type: 0, length: -1, offset: data.count))
    }

    mutating func append(_ value: Int64) {
        add(20) { $0.appendBigEndian(value) }
    }

    mutating func append(_ value: Int) { append(Int64(value)) }

    mutating func append(_ value: Double) {
        add(701) { $0.appendBigEndian(value.bitPattern) }
    }

    mutating func append(_ value: Bool) { add(16) { $0.append(value ? 1 : 0) } }

    mutating func append(_ value: String) {
        add(25) { data in
            var value = value
            value.withUTF8 { data.append(contentsOf: $0) }
        }
    }

    mutating func append(bytes: some Sequence<UInt8>) { add(17) { $0.append(contentsOf: bytes) } }

    mutating func append(_ value: UUID) {
        add(2950) { data in withUnsafeBytes(of: value.uuid) { data.appendBytes($0) } }
    }

    /// A value of a result as the server sent it: its bytes, with its column's type.
    mutating func append(_ cell: LibpqCell) {
        let type = UInt32(PQftype(cell.result.pointer, cell.column))
        if cell.isNull { appendNull() } else { add(type) { $0.appendBytes(cell.raw) } }
    }
}

/// A result's rows, read in binary; freed with the value.
final class LibpqResult: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { PQclear(pointer) }

    var count: Int { Int(PQntuples(pointer)) }
    var isEmpty: Bool { count == 0 }
    var first: LibpqRow? { isEmpty ? nil : LibpqRow(result: self, index: 0) }
    var rows: [LibpqRow] { (0..<count).map { LibpqRow(result: self, index: $0) } }
    /// The rows a command changed or returned (`INSERT`, `DELETE`).
    var affectedRows: Int { Int(String(cString: PQcmdTuples(pointer))) ?? 0 }
}

extension Array where Element == UInt8 {
    /// Appends raw bytes in one copy: `Array`'s generic `append(contentsOf:)` walks an
    /// `UnsafeRawBufferPointer` byte by byte, where an `UnsafeBufferPointer<UInt8>` is copied whole.
    @inline(__always)
    mutating func appendBytes(_ bytes: UnsafeRawBufferPointer) {
        append(contentsOf: bytes.assumingMemoryBound(to: UInt8.self))
    }

    /// Appends an integer's bytes in network order (the wire's).
    @inline(__always)
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.bigEndian) { appendBytes($0) }
    }
}

/// One row of a result.
struct LibpqRow {
    let result: LibpqResult
    let index: Int
    subscript(column: Int) -> LibpqCell { LibpqCell(result: result, row: Int32(index), column: Int32(column)) }
}

/// One value of a row, in PostgreSQL's binary format.
struct LibpqCell {
    let result: LibpqResult
    let row: Int32
    let column: Int32

    var isNull: Bool { PQgetisnull(result.pointer, row, column) != 0 }

    /// The value's bytes (valid while the result lives).
    var raw: UnsafeRawBufferPointer {
        let length = Int(PQgetlength(result.pointer, row, column))
        guard let base = PQgetvalue(result.pointer, row, column) else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(start: base, count: length)
    }

    func int64() throws(StoreError) -> Int64 { try Self.int64(raw) }
    func double() throws(StoreError) -> Double { try Self.double(raw) }
    func bool() throws(StoreError) -> Bool { try Self.bool(raw) }
    func string() throws(StoreError) -> String { try Self.string(raw) }
    func uuid() throws(StoreError) -> UUID { try Self.uuid(raw) }

    // The decoders of a value's bytes, for a reader that took them once (``raw``).

    private static func wrong(_ bytes: UnsafeRawBufferPointer, _ type: String) -> StoreError {
        StoreError(.corrupt, "a PostgreSQL value of \(bytes.count) bytes cannot be read as \(type)")
    }

    static func int64(_ bytes: UnsafeRawBufferPointer) throws(StoreError) -> Int64 {
        switch bytes.count {
        case 8: return Int64(bigEndian: bytes.loadUnaligned(as: Int64.self))
        case 4: return Int64(Int32(bigEndian: bytes.loadUnaligned(as: Int32.self)))
        case 2: return Int64(Int16(bigEndian: bytes.loadUnaligned(as: Int16.self)))
        default: throw wrong(bytes, "an integer")
        }
    }

    static func double(_ bytes: UnsafeRawBufferPointer) throws(StoreError) -> Double {
        switch bytes.count {
        case 8: return Double(bitPattern: UInt64(bigEndian: bytes.loadUnaligned(as: UInt64.self)))
        case 4: return Double(Float(bitPattern: UInt32(bigEndian: bytes.loadUnaligned(as: UInt32.self))))
        default: throw wrong(bytes, "a double")
        }
    }

    static func bool(_ bytes: UnsafeRawBufferPointer) throws(StoreError) -> Bool {
        guard bytes.count == 1 else { throw wrong(bytes, "a boolean") }
        return bytes[0] != 0
    }

    /// The text, checked as UTF-8. libpq ends every value with a NUL byte, and text holds none,
    /// so it is read as a C string (the standard library's specialized check, where the generic
    /// `String(validating:as:)` looked up type metadata for each value); a length that differs
    /// from the value's is damage.
    static func string(_ bytes: UnsafeRawBufferPointer) throws(StoreError) -> String {
        guard let base = bytes.baseAddress else { return "" }
        guard let text = String(validatingCString: base.assumingMemoryBound(to: CChar.self)),
              text.utf8.count == bytes.count else {
            throw StoreError(.corrupt, "a PostgreSQL text value is not UTF-8")
        }
        return text
    }

    static func uuid(_ bytes: UnsafeRawBufferPointer) throws(StoreError) -> UUID {
        guard bytes.count == 16 else { throw wrong(bytes, "a uuid") }
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &value) { $0.copyMemory(from: bytes) }
        return UUID(uuid: value)
    }

    func bytes() -> [UInt8] { Array(raw) }
}

/// One libpq connection in pipeline mode, used from one thread at a time: statements are
/// queued with ``send(_:_:)`` and go to the server together at the next wait, whose answers
/// come back in one round trip; ``result(_:)`` waits for one statement's answer (and reads
/// those of the statements before it). A statement that fails makes the ones after it up to
/// the next wait fail with the same error, as the server skips them.
final class LibpqConnection {
    private let connection: OpaquePointer
    private enum Entry {
        case statement(id: Int, wanted: Bool)
        /// The preparation of a named statement (its answer is only looked at when it failed).
        case preparation(key: PreparedKey)
        case sync
    }
    // `@exclusivity(unchecked)` on the state a write touches many times: the connection is used
    // from one thread at a time, and no access to it overlaps another (callgrind: the runtime's
    // checks were about 4,500 instructions of a one-insert write's 85,000 on the client).
    /// What was sent and not yet read, in order.
    @exclusivity(unchecked) private var entries: [Entry] = []
    @exclusivity(unchecked) private var head = 0
    /// Whether the last entry sent is a sync point (everything sent is on its way).
    @exclusivity(unchecked) private var synced = true
    @exclusivity(unchecked) private var nextID = 0
    /// The answers read before they were asked for (a statement's answer asked for when it is
    /// the next one read goes straight to its caller, not through here).
    /// (An array, searched from its oldest: a transaction leaves one or two here, where a
    /// dictionary's hashing, insert and removal took about 500 instructions a write.)
    @exclusivity(unchecked) private var outcomes: [(id: Int, outcome: Result<LibpqResult, LibpqError>)] = []

    /// The answer read for statement `id` before it was asked for, taken out.
    private func takeOutcome(_ id: Int) -> Result<LibpqResult, LibpqError>? {
        guard let index = outcomes.firstIndex(where: { $0.id == id }) else { return nil }
        return outcomes.remove(at: index).outcome
    }
    /// The first failure since the last sync point: the cause of the statements skipped after it.
    @exclusivity(unchecked) private var segmentFailure: LibpqError?
    /// The first statement sent without waiting whose failure the rest of its transaction
    /// depends on (``watchFailures(from:)``), and that failure once it came.
    @exclusivity(unchecked) private var watchedFrom: Int?
    @exclusivity(unchecked) private var watchedFailure: LibpqError?

    /// Watches the statements from `ticket` on (`nil`: none), whose answers nobody waits for
    /// (inserts sent without waiting): when one fails, the transaction is aborted, and a
    /// statement after it in another pipeline segment fails with `25P02` ("current transaction is
    /// aborted"), which says nothing of why; such a statement is given the first watched failure
    /// instead.
    func watchFailures(from ticket: Ticket?) {
        watchedFrom = ticket?.id
        watchedFailure = nil
    }

    /// `error`, or the watched failure that aborted the transaction when `error` only says that
    /// it is aborted (`25P02`, which a statement's preparation meets too).
    @inline(__always)
    private func explained(_ error: LibpqError) -> LibpqError {
        guard error.sqlState == PostgresSQLState.inFailedTransaction, let watchedFailure else { return error }
        return watchedFailure
    }

    /// Whether nothing was answered since ``markUnanswered()``, and whether the first answer
    /// since then was the server's notice that it ended the session (`57P01`, which a backend
    /// sends after everything it had answered, before it closes): then none of what was sent since
    /// ran.
    @exclusivity(unchecked) private var unanswered = false
    @exclusivity(unchecked) private(set) var endedBeforeAnswering = false

    /// Starts watching for ``endedBeforeAnswering`` (a write transaction's first statements are
    /// about to be sent).
    func markUnanswered() {
        unanswered = true
        endedBeforeAnswering = false
    }

    /// Notes an answer read: a success, or `error`.
    @inline(__always)
    private func noteAnswer(_ error: LibpqError? = nil) {
        guard unanswered else { return }
        unanswered = false
        endedBeforeAnswering = error?.sqlState == PostgresSQLState.adminShutdown
    }

    /// A statement sent; ``result(_:)`` gives its answer.
    struct Ticket { fileprivate let id: Int }

    /// Connects with libpq's keywords and values (`host`, `port`, `dbname`, `sslmode`, …);
    /// everything not given comes from the `PG…` environment variables, `~/.pgpass` and
    /// service files, as in every libpq client.
    init(_ parameters: [(String, String)], pipelined: Bool = true, answerTimeout: Duration? = nil)
        throws(LibpqError)
    {
        self.answerTimeout = answerTimeout
        let (seconds, attoseconds) = answerTimeout?.components ?? (0, 0)
        answerTimeoutNanoseconds = seconds.multipliedReportingOverflow(by: 1_000_000_000).overflow ? .max
            : seconds * 1_000_000_000 &+ attoseconds / 1_000_000_000
        var keywords = parameters.map { strdup($0.0) }
        var values = parameters.map { strdup($0.1) }
        keywords.append(nil)
        values.append(nil)
        defer {
            for pointer in keywords { free(pointer) }
            for pointer in values { free(pointer) }
        }
        let made: OpaquePointer? = keywords.withUnsafeBufferPointer { k in
            values.withUnsafeBufferPointer { v in
                k.withMemoryRebound(to: UnsafePointer<CChar>?.self) { k in
                    v.withMemoryRebound(to: UnsafePointer<CChar>?.self) { v in
                        PQconnectdbParams(k.baseAddress, v.baseAddress, 0)
                    }
                }
            }
        }
        guard let made else { throw LibpqError(message: "out of memory", connectionLost: true) }
        guard PQstatus(made) == CONNECTION_OK else {
            let message = Self.oneLine(String(cString: PQerrorMessage(made)))
            PQfinish(made)
            throw LibpqError(message: message, connectionLost: true)
        }
        connection = made
        // libpq prints the server's notices (NOTICE: drop cascades to …) on standard error
        // unless told otherwise: a library's caller did not ask for them.
        PQsetNoticeProcessor(made, { _, _ in }, nil)
        if pipelined, PQenterPipelineMode(made) != 1 {
            PQfinish(made)
            throw LibpqError(message: "libpq cannot enter pipeline mode", connectionLost: true)
        }
        isPipelined = pipelined
    }

    deinit { PQfinish(connection) }

    /// How long the connection waits for the server's next answer before it gives the server up
    /// (nil: for as long as it takes). A server whose processes are stopped (SIGSTOP, a frozen
    /// VM) keeps its TCP connections open and acknowledged by the kernel, so neither
    /// `connect_timeout` nor TCP keepalives notice it; this bound does.
    private let answerTimeout: Duration?
    /// ``answerTimeout`` in nanoseconds (at most about 292 years).
    private let answerTimeoutNanoseconds: Int64
    /// Set once the bound passed: the connection was shut down, and its errors say why.
    private var timedOut = false

    /// The next result, waited for at most ``answerTimeout`` while the server sends nothing
    /// (`PQisBusy` says whether `PQgetResult` would block; `poll` waits on the socket). On
    /// timeout the socket is shut down, so that libpq sees the connection end: every answer
    /// still due fails as lost, and the server rolls back the transaction once it runs again.
    private func nextResult() -> OpaquePointer? {
        guard !timedOut else { return nil }
        // (The clock is read only when an answer is still to come: most results of a pipeline
        // arrive together.)
        // (In nanoseconds of the monotonic clock: `ContinuousClock` and `Duration`'s components
        // took about 600 instructions a write.)
        if answerTimeout != nil, PQisBusy(connection) == 1 {
            // What the server already sent is read first, without waiting: on a machine where
            // the server runs as soon as a statement reaches it, its answer is often there, and
            // `poll` would be one system call more a write (pgbench reads first, too).
            // (A read that fails, the connection lost, goes to PQgetResult at once, as one after a
            // poll does: the socket is closed then, and poll would wait out the timeout.)
            if PQconsumeInput(connection) != 1 || PQisBusy(connection) == 0 { return PQgetResult(connection) }
            let deadline = Self.monotonicNanoseconds() &+ answerTimeoutNanoseconds
            repeat {
                let left = deadline &- Self.monotonicNanoseconds()
                guard left > 0 else {
                    timedOut = true
                    shutdown(PQsocket(connection), Int32(SHUT_RDWR))
                    _ = PQconsumeInput(connection)
                    return nil
                }
                let milliseconds = Int32(clamping: left / 1_000_000 + 1)
                var descriptor = pollfd(fd: PQsocket(connection), events: Int16(POLLIN), revents: 0)
                let ready = poll(&descriptor, 1, milliseconds)
                if ready < 0 && errno == EINTR { continue }
                if ready != 0 && PQconsumeInput(connection) != 1 { break }
            } while PQisBusy(connection) == 1
        }
        return PQgetResult(connection)
    }

    private var isPipelined: Bool

    /// The monotonic clock (`CLOCK_MONOTONIC`), in nanoseconds.
    private static func monotonicNanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) &* 1_000_000_000 &+ Int64(now.tv_nsec)
    }

    /// What a failed connection met, for deciding whether it may pass: see ``diagnose(_:within:)``.
    struct ConnectDiagnosis {
        /// The SQLSTATE the server refused the connection with (`57P03` starting up or shutting
        /// down, `28P01` a wrong password, `3D000` no such database), when it sent one.
        var sqlState: String?
        /// Whether a server answered at all (a socket connected and the startup was sent).
        var reachedServer = false
        /// Whether the location asks the server to be of a kind (`target_session_attrs`
        /// `read-write`, `primary`, …): a server reached that turns out not to be is refused by
        /// libpq without a SQLSTATE, and may be of that kind later (a standby promoted).
        var asksTarget = false
        /// Whether the server asked for a password and none was given (`PQconnectionNeedsPassword`).
        var needsPassword = false

        /// Whether the same connection may succeed later: no server answered (none listens, the
        /// network, a timeout), the servers answered but none is of the kind asked for (none
        /// accepts writes yet), or a server refused for a reason that passes (starting, stopping,
        /// in recovery, out of connection slots). A wrong password, user or database, a missing
        /// password, a server without the TLS asked for: these do not pass.
        var isTransient: Bool {
            if let sqlState { return PostgresSQLState.isTransient(sqlState) }
            if needsPassword { return false }
            return !reachedServer || asksTarget
        }
    }

    /// Connects once more with `parameters`, asynchronously, with libpq's verbose errors (which
    /// carry the server's SQLSTATE, in any language), following how far it gets; for at most
    /// `timeout` (libpq leaves `connect_timeout` to the caller of `PQconnectPoll`).
    static func diagnose(_ parameters: [(String, String)], within timeout: Duration? = nil) -> ConnectDiagnosis {
        // The location's connect_timeout (libpq's own default waits for as long as the network
        // does), else 5 s.
        let timeout = timeout ?? parameters.last { $0.0 == "connect_timeout" }.flatMap { Int($0.1) }
            .map { Duration.seconds(min(max(2, $0), 86_400)) } ?? .seconds(5)
        var diagnosis = ConnectDiagnosis()
        diagnosis.asksTarget = parameters.contains { $0.0 == "target_session_attrs" && $0.1 != "any" }
        var keywords = parameters.map { strdup($0.0) }
        var values = parameters.map { strdup($0.1) }
        keywords.append(nil)
        values.append(nil)
        defer {
            for pointer in keywords { free(pointer) }
            for pointer in values { free(pointer) }
        }
        let started: OpaquePointer? = keywords.withUnsafeBufferPointer { k in
            values.withUnsafeBufferPointer { v in
                k.withMemoryRebound(to: UnsafePointer<CChar>?.self) { k in
                    v.withMemoryRebound(to: UnsafePointer<CChar>?.self) { v in
                        PQconnectStartParams(k.baseAddress, v.baseAddress, 0)
                    }
                }
            }
        }
        guard let connection = started else { return diagnosis }
        defer { PQfinish(connection) }
        PQsetErrorVerbosity(connection, PQERRORS_VERBOSE)
        let deadline = ContinuousClock.now + timeout
        var state = PGRES_POLLING_WRITING
        while PQstatus(connection) != CONNECTION_BAD {
            switch PQstatus(connection) {
            case CONNECTION_STARTED, CONNECTION_NEEDED: break
            default: diagnosis.reachedServer = true
            }
            if state == PGRES_POLLING_OK || state == PGRES_POLLING_FAILED { break }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { break }
            var descriptor = pollfd(fd: PQsocket(connection),
                                    events: Int16(state == PGRES_POLLING_READING ? POLLIN : POLLOUT), revents: 0)
            let milliseconds = Int32(clamping: left.components.seconds * 1_000
                + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            guard descriptor.fd >= 0, poll(&descriptor, 1, milliseconds) >= 0 else { break }
            state = PQconnectPoll(connection)
        }
        if PQstatus(connection) == CONNECTION_BAD {
            let message = String(cString: PQerrorMessage(connection))
            diagnosis.sqlState = PostgresSQLState.inVerboseMessage(message)
            diagnosis.needsPassword = PQconnectionNeedsPassword(connection) == 1
        }
        return diagnosis
    }

    /// libpq's multi-line messages as one line.
    static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }.joined(separator: "; ")
    }

    /// The host this connection reached (of several a location names), and its port.
    var server: String {
        let host = PQhost(connection).map { String(cString: $0) } ?? ""
        let port = PQport(connection).map { String(cString: $0) } ?? ""
        return host.hasPrefix("/") ? "\(host) (port \(port))" : "\(host):\(port)"
    }

    /// Whether the connection is still usable: checked without waiting, by reading what the
    /// server may have sent (a terminated backend's last words, or the end of the stream).
    var isAlive: Bool {
        guard !timedOut, PQstatus(connection) == CONNECTION_OK else { return false }
        guard head == entries.count else { return true }
        // Idle, nothing is due: what the socket holds is a notice, a notification, or a
        // terminated backend's last message followed by the end of the stream.
        for _ in 0..<3 {
            var descriptor = pollfd(fd: PQsocket(connection), events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 0) > 0 else { return true }
            if descriptor.revents & Int16(POLLERR | POLLNVAL) != 0 { return false }
            guard PQconsumeInput(connection) == 1 else { return false }
            _ = PQisBusy(connection)
            guard PQstatus(connection) == CONNECTION_OK else { return false }
        }
        return PQstatus(connection) == CONNECTION_OK
    }

    /// The connection's socket, for waiting on notifications.
    var socket: Int32 { PQsocket(connection) }

    private var lostError: LibpqError {
        if timedOut, let answerTimeout {
            return LibpqError(message: "the server sent no answer for \(answerTimeout) (answer_timeout), so the "
                + "connection was given up", connectionLost: true)
        }
        let text = Self.oneLine(String(cString: PQerrorMessage(connection)))
        return LibpqError(message: text.isEmpty ? "the connection was closed" : text, connectionLost: true)
    }

    /// Empty parameters for a statement, with the buffers the last statement sent with
    /// parameters left (``send(_:_:wanted:prepared:)`` keeps them): a write sends two or three
    /// statements with parameters, and new ones are two allocations each.
    func binds() -> LibpqParameters {
        var made = LibpqParameters()
        swap(&made, &spareBinds)
        // (Emptied here, not when they were sent: a caller that sent a copy, as `query` does,
        // has let its own go by now, so emptying them keeps their buffers rather than making new.)
        made.removeAll()
        return made
    }

    /// The parameters the last statement with parameters was sent with, whose buffers
    /// ``binds()`` hands out next: at most ``keptBindBytes`` of values (a large value's buffer is
    /// not kept by every pooled connection).
    @exclusivity(unchecked) private var spareBinds = LibpqParameters()
    private static let keptBindBytes = 16 << 10

    /// Queues `sql` with its parameters; it goes to the server at the next wait.
    @discardableResult
    func send(_ sql: String, _ params: consuming LibpqParameters = LibpqParameters(), wanted: Bool = true,
              prepared: Bool = true) throws(LibpqError) -> Ticket
    {
        defer {
            // (libpq copied the values into its output buffer.)
            if params.slots.capacity > 0, params.data.capacity <= Self.keptBindBytes { spareBinds = params }
        }
        guard PQstatus(connection) == CONNECTION_OK else { throw lostError }
        let name = prepared ? try statementName(sql, params) : nil
        // (The values' pointers and formats on the stack: a write sends several statements.)
        let count = params.count
        let sent: Int32 = params.data.withUnsafeBufferPointer { data in
            withUnsafeTemporaryAllocation(of: UnsafePointer<CChar>?.self, capacity: max(1, count)) { values in
                withUnsafeTemporaryAllocation(of: Int32.self, capacity: max(1, 3 * count)) { columns in
                    // The formats, the lengths and the types, one after the other.
                    let formats = columns.baseAddress!
                    let lengths = formats + count
                    let types = UnsafeMutableRawPointer(lengths + count).assumingMemoryBound(to: UInt32.self)
                    let base = data.baseAddress.map { UnsafeRawPointer($0) }
                    for i in 0..<count {
                        let slot = params.slots[i]
                        formats[i] = 1
                        lengths[i] = slot.length
                        types[i] = slot.type
                        if slot.length < 0 {
                            values[i] = nil
                        } else if let base {
                            values[i] = (base + slot.offset).assumingMemoryBound(to: CChar.self)
                        } else {
                            // A zero-length value needs a pointer all the same (not null, which
                            // means NULL).
                            values[i] = UnsafePointer<CChar>(bitPattern: 1)
                        }
                    }
                    let valuePointers = count == 0 ? nil : UnsafePointer(values.baseAddress)
                    let formatPointer = count == 0 ? nil : UnsafePointer(formats)
                    let lengthPointer = count == 0 ? nil : UnsafePointer(lengths)
                    let typePointer = count == 0 ? nil : UnsafePointer(types)
                    // (withCString: a native string's own bytes, where passing the String makes a
                    // C copy of it on the heap.)
                    if let name {
                        return name.withCString { name in
                            PQsendQueryPrepared(connection, name, Int32(count), valuePointers, lengthPointer,
                                                formatPointer, 1)
                        }
                    }
                    return sql.withCString { sql in
                        PQsendQueryParams(connection, sql, Int32(count), typePointer, valuePointers, lengthPointer,
                                          formatPointer, 1)
                    }
                }
            }
        }
        guard sent == 1 else { throw lostError }
        nextID += 1
        entries.append(.statement(id: nextID, wanted: wanted))
        synced = false
        if !isPipelined {
            // One statement at a time: its answer is read before the next goes.
            entries.append(.sync)
            synced = true
        }
        return Ticket(id: nextID)
    }

    /// How many sync points were sent: each is one round trip when its answers are waited for.
    private(set) var syncCount = 0

    /// Whether statements are prepared by name and kept for the connection's life (parsed and
    /// planned once); off behind a pooler in transaction mode, where the next transaction may
    /// run on another server connection.
    var preparesStatements = true
    /// The names of the statements prepared on this connection, by text and parameter types.
    private var statementNames: [PreparedKey: String] = [:]

    /// The statements named last, newest last, at most 16.
    @exclusivity(unchecked) private var recentStatements: [(key: PreparedKey, name: String)] = []
    /// The two words of each of ``recentStatements``' texts, in the same order: a text sent again
    /// from the same stored string has the same words, found without a reference counted or a
    /// character compared (the texts' own loop took about 1,100 instructions a write).
    @exclusivity(unchecked) private var recentWords: [(UInt64, UInt64)] = []

    private func remember(_ key: PreparedKey, _ name: String) {
        if recentStatements.count == 16 {
            recentStatements.removeFirst()
            recentWords.removeFirst()
        }
        recentStatements.append((key, name))
        recentWords.append(Self.words(of: key.sql))
    }

    private func forgetRecent(_ key: PreparedKey) {
        while let index = recentStatements.firstIndex(where: { $0.key == key }) {
            recentStatements.remove(at: index)
            recentWords.remove(at: index)
        }
    }

    /// A string's two words (its count and flags, and its storage or its small contents): equal
    /// words are equal strings.
    @inline(__always) private static func words(of text: String) -> (UInt64, UInt64) {
        unsafeBitCast(text, to: (UInt64, UInt64).self)
    }

    /// A prepared statement's text and parameter types.
    struct PreparedKey: Hashable {
        let sql: String
        let types: [UInt32]
    }
    private static let maxPreparedStatements = 256
    /// Statements prepared so far: names are never used twice on a connection.
    private var preparedCount = 0
    private static let maxPreparedParameters = 32

    /// The name of `sql`'s prepared statement, prepared now (queued) when it is new; `nil` when
    /// it goes unnamed (too many parameters, the cache full, or preparation off).
    private func statementName(_ sql: String, _ params: LibpqParameters) throws(LibpqError) -> String? {
        guard preparesStatements, isPipelined, params.count <= Self.maxPreparedParameters else { return nil }
        // The statements sent most are found among the recent ones without hashing: first by
        // their text's words (the same stored string), then by their text (another string of the
        // same text; the length first, as `==` on two storages compares their contents).
        let words = Self.words(of: sql)
        var index = recentWords.count
        while index > 0 {
            index -= 1
            if recentWords[index] == words, params.hasTypes(recentStatements[index].key.types) {
                return recentStatements[index].name
            }
        }
        let length = sql.utf8.count
        for recent in recentStatements.reversed()
        where recent.key.sql.utf8.count == length && recent.key.sql == sql && params.hasTypes(recent.key.types) {
            return recent.name
        }
        let key = PreparedKey(sql: sql, types: params.types)
        if let name = statementNames[key] {
            remember(key, name)
            return name
        }
        guard statementNames.count < Self.maxPreparedStatements else { return nil }
        preparedCount += 1
        let name = "ds\(preparedCount)"
        guard PQsendPrepare(connection, name, sql, Int32(params.count), params.types) == 1 else { throw lostError }
        statementNames[key] = name
        remember(key, name)
        entries.append(.preparation(key: key))
        synced = false
        return name
    }

    /// Drops every prepared statement (after the tables they name changed).
    func forgetStatements() throws(LibpqError) {
        guard !statementNames.isEmpty else { return }
        statementNames.removeAll()
        recentStatements.removeAll()
        recentWords.removeAll()
        try send("DEALLOCATE ALL", wanted: false, prepared: false)
    }

    /// Sends what is queued, with a sync point after it.
    func flush() throws(LibpqError) {
        guard !synced else { return }
        guard PQpipelineSync(connection) == 1 else { throw lostError }
        syncCount += 1
        entries.append(.sync)
        synced = true
    }

    /// The answer to `ticket`, waited for: what was queued goes first.
    func result(_ ticket: Ticket) throws(LibpqError) -> LibpqResult {
        if !outcomes.isEmpty, let outcome = takeOutcome(ticket.id) { return try outcome.get() }
        while head < entries.count {
            if !synced { try flush() }
            if let (id, outcome) = readNext() {
                if id == ticket.id { return try outcome.get() }
                outcomes.append((id, outcome))
            }
            // (A lost connection fails every statement still on its way, this one among them.)
            if !outcomes.isEmpty, let outcome = takeOutcome(ticket.id) { return try outcome.get() }
        }
        throw LibpqError(message: "a statement's answer was read twice", connectionLost: false)
    }

    /// Gives up the answer to `ticket` without waiting for it: it is dropped when it comes (its
    /// error, if it has one, still fails the statements after it in its pipeline segment).
    func discard(_ ticket: Ticket) {
        if !outcomes.isEmpty, takeOutcome(ticket.id) != nil { return }
        for index in entries.indices[head...] {
            if case .statement(ticket.id, true) = entries[index] {
                entries[index] = .statement(id: ticket.id, wanted: false)
                return
            }
        }
    }

    /// Sends `sql` and waits for its answer.
    @discardableResult
    func query(_ sql: String, _ params: LibpqParameters = LibpqParameters()) throws(LibpqError) -> LibpqResult {
        try result(send(sql, params))
    }

    /// Reads every answer still on its way (those waited for stay for ``result(_:)``); throws
    /// only when the connection is lost.
    func settle() throws(LibpqError) {
        if !synced { try flush() }
        while head < entries.count {
            if let (id, outcome) = readNext() { outcomes.append((id, outcome)) }
        }
        guard PQstatus(connection) == CONNECTION_OK else { throw lostError }
    }

    /// Gives the connection up: its socket is shut down, so that libpq sees it end (it is no
    /// longer alive, and the server rolls back whatever transaction it held); a session then
    /// connects again before its next use.
    func abandon() {
        shutdown(PQsocket(connection), Int32(SHUT_RDWR))
        _ = PQconsumeInput(connection)
        fail(remaining: lostError)
    }

    /// Moves what the server has sent so far from the socket into libpq's buffer, without
    /// waiting and without parsing it: a reader that decodes one answer while the next is on its
    /// way calls this between rows, so that the server, whose sends stop once the socket's
    /// buffer (about 200 KiB) is full, keeps producing the next answer meanwhile. A lost
    /// connection is seen by the next wait, as without it.
    func drainSocket() { _ = PQconsumeInput(connection) }

    /// Forgets the answers nobody asked for (at the end of a transaction).
    func forgetAnswers() { outcomes.removeAll(keepingCapacity: true) }

    /// Reads the answers of the next entry sent; a statement's, when it is wanted, is returned.
    private func readNext() -> (id: Int, outcome: Result<LibpqResult, LibpqError>)? {
        let entry = entries[head]
        head += 1
        if head == entries.count {
            entries.removeAll(keepingCapacity: true)
            head = 0
        }
        switch entry {
        case .sync:
            guard isPipelined else {
                segmentFailure = nil
                return nil
            }
            if let result = nextResult() {
                PQclear(result)
            } else {
                fail(remaining: lostError)
            }
            segmentFailure = nil
            return nil
        case .preparation(let key):
            var failure: LibpqError?
            var sawResult = false
            while let result = nextResult() {
                sawResult = true
                if PQresultStatus(result) != PGRES_COMMAND_OK, failure == nil {
                    failure = PQresultStatus(result) == PGRES_PIPELINE_ABORTED
                        ? (segmentFailure ?? LibpqError(message: "an earlier statement failed", connectionLost: false))
                        : explained(LibpqError(result: result, connection: connection))
                }
                PQclear(result)
            }
            if !sawResult { failure = lostError }
            noteAnswer(failure)
            if let failure {
                // Not prepared: the next use prepares it again.
                statementNames[key] = nil
                forgetRecent(key)
                segmentFailure = segmentFailure ?? failure
                if failure.connectionLost { fail(remaining: failure) }
            }
            return nil
        case .statement(let id, let wanted):
            var first: OpaquePointer?
            while let result = nextResult() {
                if first == nil { first = result } else { PQclear(result) }
            }
            let outcome: Result<LibpqResult, LibpqError>
            if let first {
                switch PQresultStatus(first) {
                case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
                    noteAnswer()
                    // An answer nobody waits for is freed here, without an object around it.
                    guard wanted else {
                        PQclear(first)
                        return nil
                    }
                    outcome = .success(LibpqResult(first))
                case PGRES_PIPELINE_ABORTED:
                    PQclear(first)
                    outcome = .failure(segmentFailure ?? LibpqError(message: "an earlier statement failed",
                                                                 connectionLost: false))
                default:
                    var error = LibpqError(result: first, connection: connection)
                    PQclear(first)
                    noteAnswer(error)
                    if !wanted, let watchedFrom, id >= watchedFrom, watchedFailure == nil { watchedFailure = error }
                    error = explained(error)
                    segmentFailure = segmentFailure ?? error
                    outcome = .failure(error)
                }
            } else {
                outcome = .failure(lostError)
                noteAnswer(lostError)
            }
            if case .failure(let error) = outcome, error.connectionLost { fail(remaining: error) }
            return wanted ? (id, outcome) : nil
        }
    }

    /// The connection is gone: every statement still on its way fails with `error`.
    private func fail(remaining error: LibpqError) {
        for entry in entries[head...] {
            if case .statement(let id, _) = entry { outcomes.append((id, .failure(error))) }
        }
        entries.removeAll()
        head = 0
        synced = true
    }

    /// Runs `body` outside pipeline mode (COPY needs it), after every answer on its way.
    func outsidePipeline<T>(_ body: (OpaquePointer) throws -> T) throws -> T {
        try settle()
        guard isPipelined else { return try body(connection) }
        guard PQexitPipelineMode(connection) == 1 else { throw lostError }
        defer { if PQenterPipelineMode(connection) != 1 { PQreset(connection) } }
        return try body(connection)
    }

    /// The notifications received so far, by channel name.
    func notifications() -> [String] {
        _ = PQconsumeInput(connection)
        var channels: [String] = []
        while let notify = PQnotifies(connection) {
            channels.append(String(cString: notify.pointee.relname))
            PQfreemem(notify)
        }
        return channels
    }

    /// Writes the data `fill` writes into the buffer it is given, a chunk at a time until it
    /// returns `false`, into the COPY `sql` starts; returns the rows the server counted.
    func copyIn(_ sql: String, _ fill: (CopyBuffer) throws -> Bool) throws -> Int {
        try outsidePipeline { connection in
            guard let started = PQexec(connection, sql) else { throw lostError }
            guard PQresultStatus(started) == PGRES_COPY_IN else {
                let error = explained(LibpqError(result: started, connection: connection))
                PQclear(started)
                throw error
            }
            PQclear(started)
            let buffer = CopyBuffer(capacity: 1 << 17)
            var more = true
            var failure: (any Error)?
            while more {
                buffer.removeAll()
                do {
                    more = try fill(buffer)
                } catch {
                    failure = error
                    break
                }
                if buffer.count > 0 {
                    let put = PQputCopyData(connection, buffer.bytes.baseAddress?.assumingMemoryBound(to: CChar.self),
                                            Int32(buffer.count))
                    guard put == 1 else { throw lostError }
                }
            }
            guard PQputCopyEnd(connection, failure == nil ? nil : "the client stopped the copy") == 1 else {
                throw lostError
            }
            var outcome: Result<Int, LibpqError> = .success(0)
            while let result = nextResult() {
                if PQresultStatus(result) == PGRES_COMMAND_OK {
                    outcome = .success(Int(String(cString: PQcmdTuples(result))) ?? 0)
                } else if case .success = outcome {
                    outcome = .failure(LibpqError(result: result, connection: connection))
                }
                PQclear(result)
            }
            if let failure { throw failure }
            if PQstatus(connection) == CONNECTION_BAD { throw lostError }
            return try outcome.get()
        }
    }
}
#endif
