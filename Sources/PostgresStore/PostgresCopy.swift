#if Postgres
@_spi(Backend) import DataStoreAPI
import Foundation
import PostgresNIO

/// Runs postgres-nio's async calls (`COPY … FROM STDIN` has no other form) from the store's
/// synchronous API: the task runs on a thread of its own (a task executor), never on Swift's
/// cooperative pool, so that blocking the caller until it ends cannot starve that pool.
final class PostgresBridge: TaskExecutor, @unchecked Sendable {
    static let shared = PostgresBridge()
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []

    private init() {
        let thread = Thread { [unowned self] in self.loop() }
        thread.name = "DataStore.PostgresBridge"
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func loop() {
        while true {
            condition.lock()
            while jobs.isEmpty { condition.wait() }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }

    /// Runs `body` to its end and returns what it returned, blocking the calling thread.
    func run<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let box = ResultBox<T>()
        let done = DispatchSemaphore(value: 0)
        Task(executorPreference: self) {
            do { box.result = .success(try await body()) } catch { box.result = .failure(error) }
            done.signal()
        }
        done.wait()
        guard let result = box.result else {
            throw StoreError(.io, "a PostgreSQL task ended without a result")
        }
        return try result.get()
    }
}

/// The result of a bridged task, written by the task and read once it signalled.
private final class ResultBox<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}

extension PostgresSession {
    /// `COPY table FROM STDIN` of `records` in text format, inside the session's transaction.
    /// postgres-nio's COPY cannot qualify the table's name: it is found through the writer
    /// session's `search_path`, which the engine sets to the store's schema when it connects.
    func copy(_ records: [(record: Record, key: PrimaryKey)], into entity: EntitySchema) throws {
        let connection = self.connection
        let rows = records.map(\.record)
        do {
            try PostgresBridge.shared.run {
                try await connection.copyFrom(table: PostgresSQL.identifier(entity.name),
                                              columns: entity.attributes.map { PostgresSQL.identifier($0.name) },
                                              logger: PostgresSession.logger) { writer in
                    var buffer = ByteBuffer()
                    for record in rows {
                        PostgresCopyText.append(record, of: entity, to: &buffer)
                        if buffer.readableBytes >= 1 << 16 {
                            try await writer.write(buffer)
                            buffer.clear()
                        }
                    }
                    if buffer.readableBytes > 0 { try await writer.write(buffer) }
                }
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw PostgresSession.storeError(error, sql: "COPY \(entity.name) FROM STDIN", location: location)
        }
    }
}

/// The text format of COPY: columns separated by tabs, `\N` for null, backslash escapes.
enum PostgresCopyText {
    static func append(_ record: Record, of entity: EntitySchema, to buffer: inout ByteBuffer) {
        for (i, attribute) in entity.attributes.enumerated() {
            if i > 0 { buffer.writeInteger(UInt8(0x09)) }
            switch record[attribute.name] {
            case .null: buffer.writeString("\\N")
            case .bool(let b): buffer.writeString(b ? "t" : "f")
            case .int(let n): buffer.writeString(String(n))
            case .double(let d): buffer.writeString(d.isInfinite ? (d < 0 ? "-Infinity" : "Infinity") : "\(d)")
            case .string(let s): escaped(PostgresSQL.escape(s).utf8, to: &buffer)
            case .bytes(let b):
                // bytea's hex input, its backslash escaped for COPY.
                buffer.writeString("\\\\x")
                let hex = Array("0123456789abcdef".utf8)
                for byte in b {
                    buffer.writeInteger(hex[Int(byte >> 4)])
                    buffer.writeInteger(hex[Int(byte & 15)])
                }
            case .date(let t): buffer.writeString(String(t.microsecondsSinceEpoch))
            case .uuid(let u): buffer.writeString(u.uuidString)
            }
        }
        buffer.writeInteger(UInt8(0x0A))
    }

    private static func escaped(_ bytes: String.UTF8View, to buffer: inout ByteBuffer) {
        for byte in bytes {
            switch byte {
            case 0x5C: buffer.writeString("\\\\")
            case 0x0A: buffer.writeString("\\n")
            case 0x0D: buffer.writeString("\\r")
            case 0x09: buffer.writeString("\\t")
            default: buffer.writeInteger(byte)
            }
        }
    }
}
#endif
