@_spi(Backend) import DataStoreAPI
import Foundation

/// Reader connections, opened on demand up to a capacity.
///
/// `@unchecked Sendable`: `idle`, `open` and `closed` are accessed only with `condition` locked,
/// and a connection is used by one read at a time between `acquire` and `release`.
final class SQLiteReaderPool: @unchecked Sendable {
    private let path: String
    private let durability: Durability
    private let capacity: Int
    private let timeout: Duration
    private let readOnly: Bool
    private let condition = NSCondition()
    private var idle: [SQLiteConnection] = []
    private var open = 0

    init(path: String, durability: Durability, capacity: Int, timeout: Duration, readOnly: Bool) {
        self.path = path
        self.durability = durability
        self.capacity = capacity
        self.timeout = timeout
        self.readOnly = readOnly
    }

    /// A free connection, opening one when fewer than `capacity` are open.
    /// - Throws: `busy` when none is free within `timeout`.
    func acquire() throws -> SQLiteConnection {
        condition.lock()
        let deadline = Date.deadline(after: timeout)
        while idle.isEmpty && open >= capacity {
            if !condition.wait(until: deadline) && idle.isEmpty && open >= capacity {
                condition.unlock()
                throw StoreError(
                    .busy,
                    "\(path): all \(capacity) reader connections stayed in use for "
                        + "\(timeout); raise SQLiteOptions.maxReaders or finish reads sooner")
            }
        }
        if let connection = idle.popLast() {
            condition.unlock()
            return connection
        }
        open += 1
        condition.unlock()
        do {
            let connection = try SQLiteConnection(path: path, create: false, readOnly: readOnly)
            if !readOnly { try connection.configure(durability: durability) }
            return connection
        } catch {
            condition.lock()
            open -= 1
            condition.signal()
            condition.unlock()
            throw error
        }
    }

    func release(_ connection: SQLiteConnection) {
        condition.lock()
        idle.append(connection)
        condition.signal()
        condition.unlock()
    }

    /// Closes the idle connections (every one, once the store has no read running).
    func closeAll() throws {
        condition.lock()
        let closing = idle
        idle.removeAll()
        open = 0
        condition.unlock()
        for connection in closing { try connection.close() }
    }
}
