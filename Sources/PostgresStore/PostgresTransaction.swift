#if Postgres
import CLibPQ
@_spi(Backend) import DataStoreAPI
import Foundation

/// A read or write transaction on one session.
final class PostgresTransaction: StorageWriter, ChangeLogNumbering, BulkInserting {
    let session: PostgresSession
    let engine: PostgresEngine?
    let s: String

    /// The change feed's stored state (`_ds_meta`'s `datastore.feed`), as a write transaction's
    /// first statements read it ahead or as it assumed it (the feed asks for the state before
    /// each recorded commit); kept up to date by this transaction's own writes. `nil`: not
    /// known, ask the server.
    var feedState: [UInt8]??
    /// The feed's state this write transaction assumed (``FeedStateCache``) instead of reading
    /// it first: checked at commit, or read before the transaction writes the state.
    private(set) var assumedFeedState: [UInt8]?

    /// Takes `state` for the feed's state without reading it; the commit checks it.
    func assume(feedState state: [UInt8]) {
        feedState = .some(state)
        assumedFeedState = state
    }

    /// The engine's ``FeedStateCache`` generation when this transaction sent the read of the
    /// feed's state: what it read is kept only if the store forgot no state since.
    var feedStateGeneration: UInt64 = 0
    /// Whether this transaction wrote the feed's state (its commit makes the store forget the
    /// state it kept).
    private(set) var wroteFeedState = false
    /// A write transaction's snapshot (`pg_current_snapshot()`, the transaction's own at
    /// `SERIALIZABLE`) and the feed's floor in it, read at the first read of the feed's window in
    /// the transaction; the floor is forgotten when the transaction moves it.
    private var floorInSnapshot: UInt64?
    private var writeSnapshot: FeedWatermark.Snapshot?
    /// The feed's entry not yet sent, with the removal of old entries that goes with it: one
    /// statement, queued before COMMIT without a wait of its own (``sendPending()``), or sent
    /// before any read of the feed (``flush()``).
    private var pendingEntry: [UInt8]?
    /// The retention the entry's commit asks the engine to apply (``PostgresEngine``'s trim).
    private(set) var pendingTrim: (keeping: UInt64, slack: UInt64)?
    /// Whether this is a write transaction (a read's window comes from its probe).
    var isWrite = false
    /// A read transaction's `BEGIN`, sent with its first statement; a first statement that reads
    /// the feed is preceded by the feed's probe (see ``FeedWatermark``).
    var pendingBegin: String?
    /// Whether the transaction reads a standby (which cannot serve the change feed's reads).
    var onStandby = false
    private var probe: (issued: LibpqConnection.Ticket, holders: LibpqConnection.Ticket)?
    private var window: (floor: UInt64, released: UInt64)?
    /// The feed's probe count when the transaction's `BEGIN` was sent (``FeedWatermark/epoch``).
    var begunAtEpoch: UInt64 = 0

    static let feedStateKey = "datastore.feed"

    init(session: PostgresSession, engine: PostgresEngine?, quotedSchema: String) {
        self.session = session
        self.engine = engine
        s = quotedSchema
    }

    /// The write transaction's first statements' answer (the feed's state, when the store had
    /// none to assume), read when first needed: it comes with the answer of the block's first
    /// statement.
    var beginTicket: LibpqConnection.Ticket?

    /// What began the transaction, sent again on a new connection (set by the engine): a read's
    /// `BEGIN`, or a write's first statements (``PostgresEngine/sendBegin(_:alone:)``). (A value,
    /// not a closure: a closure's context was an allocation and two references counted a write.)
    enum Beginning {
        case read(String)
        case write(alone: Bool)
    }

    /// How to begin the transaction again (``Beginning``).
    var beginning: Beginning?
    /// Whether an answer came back: until then, nothing of the transaction ran, the block has
    /// seen nothing, and a lost connection is replaced and the transaction begun again.
    private var answered = false
    /// Whether an answer came back (see ``run(_:_:)``).
    var sawAnswer: Bool { answered }

    /// Sends `sql` and waits for its answer. A connection found lost at the transaction's first
    /// answer is replaced, the transaction begun again, and `sql` sent again, once.
    @discardableResult
    func run(_ sql: String, _ params: LibpqParameters = LibpqParameters()) throws -> LibpqResult {
        if let runsAgain { throw runsAgain }
        try beginIfPending()
        do {
            let result = try session.query(sql, params)
            answered = true
            return result
        } catch {
            guard try startsAgain(after: error) else { throw conflictOfUncheckedInsert(error) }
            let result = try session.query(sql, params)
            answered = true
            return result
        }
    }

    /// Whether this transaction sent an insert without looking for its key first (the key was
    /// past every key this transaction had read, or ``insertsUnchecked``).
    private(set) var sentUncheckedInserts = false
    /// Whether every insert sent without waiting was answered (read before a batch's COPY).
    private var uncheckedInsertsAnswered = false

    /// Whether inserts into an entity without unique indexes go without looking for their key
    /// and without waiting for their answer (set by the engine for a block's first run, when the
    /// store runs a block again after a conflict): a one-insert write is then one round trip. A
    /// key taken fails the insert at the server (`23505`), which rolls the transaction back; that
    /// is taken for a conflict (``conflictOfUncheckedInsert(_:)``), and the block's next run, which
    /// checks each key first, throws `keyExists` where the block inserted it, as a run that
    /// checked would have (or stores it, when another transaction's insert of the key was what
    /// clashed and it rolled back).
    var insertsUnchecked = false

    /// A key taken by another transaction between this one's read of the keys and an insert
    /// sent without looking (`23505` from it) is a conflict of the two transactions, as the
    /// server reports for what a serializable transaction read: the block runs again, and then
    /// finds the key taken. Any other error is returned as it is.
    func conflictOfUncheckedInsert(_ error: StoreError) -> StoreError {
        guard sentUncheckedInserts, session.metTakenKey, error.cause?.sqlState == PostgresSQLState.uniqueViolation
        else { return error }
        session.conflicted = true
        return StoreError(.conflict, "\(session.location): a key this transaction inserted without looking for it "
            + "first was taken, by another transaction at the same time or before (\(error.cause?.message ?? error.message))",
            cause: .postgres(sqlState: PostgresSQLState.serializationFailure, message: error.cause?.message ?? error.message))
    }

    /// Whether `error` lost the connection before any answer came, in which case the
    /// connection is replaced and the transaction begun again on it.
    /// Also when a statement prepared on this connection was planned against a table that
    /// another connection changed since (a schema upgrade): the prepared statements are
    /// dropped and the transaction begun again.
    private func startsAgain(after error: StoreError) throws -> Bool {
        guard !answered, let beginning else { return false }
        // A transaction begun again has none of this one's settings (one not begun again is over).
        plansCursorsWhole = false
        // The connection lost (or reaching a server that no longer takes writes, after a
        // failover): a new one.
        // The connection was left in a failed transaction by one before this (a statement
        // whose answer was not waited for failed, so the COMMIT after it in its pipeline
        // segment was skipped): that one is rolled back and this one begun again.
        // "cached plan must not change result type" is SQLSTATE 0A000 (feature_not_supported),
        // which no statement of the store meets otherwise (decided on the code, not the server's
        // words): the same, with the connection's prepared statements forgotten first.
        let state = error.cause?.sqlState
        let lost = error.code == .unavailable
        guard lost || state == PostgresSQLState.inFailedTransaction || state == PostgresSQLState.featureNotSupported
        else { return false }
        answered = true
        probe = nil
        if sentUncheckedInserts {
            // An insert sent without waiting went with what is lost or aborted, and the block
            // has seen it stored: the transaction cannot be begun again without it. Its COMMIT
            // was not sent: the block runs again. The connection is left as it is (lost, or in
            // the aborted transaction, whose every next statement fails), so that nothing the
            // block does after catching this is stored; the engine rolls it back when the block
            // ends.
            let reason = error.cause?.message ?? error.message
            session.conflicted = true
            runsAgainForgettingStatements = state == PostgresSQLState.featureNotSupported
            let again = StoreError(.conflict, "\(session.location): the transaction was rolled back before it "
                + "committed (\(reason)); the block runs again",
                cause: .postgres(sqlState: PostgresSQLState.serializationFailure, message: reason))
            runsAgain = again
            throw again
        }
        if lost {
            try session.reconnect()
        } else {
            try session.send("ROLLBACK", wanted: false)
            if state == PostgresSQLState.featureNotSupported {
                do {
                    try session.connection.forgetStatements()
                } catch {
                    throw PostgresSession.storeError(error, sql: "DEALLOCATE ALL", location: session.location)
                }
            }
        }
        switch beginning {
        case .read(let begin): try session.send(begin, wanted: false)
        case .write(let alone):
            guard let engine else { return false }
            try engine.sendBegin(self, alone: alone)
        }
        return true
    }

    /// Set when the transaction cannot go on and its block must run again (``startsAgain(after:)``
    /// after inserts sent without waiting): the error that says so, which the commit throws
    /// too when the block caught it.
    private(set) var runsAgain: StoreError?
    /// Whether the connection's prepared statements are to be forgotten before the block runs
    /// again (a table changed under them).
    private(set) var runsAgainForgettingStatements = false

    var feedSQL: PostgresFeedSQL {
        engine?.feedSQL ?? PostgresFeedSQL(s: s, lockKey: PostgresEngine.lockKey(session.location.schema))
    }

    /// Sends the read's `BEGIN` if it is still held back; with `probing`, after the feed's probe
    /// (its own statements, before the snapshot's, with a sync point between).
    func beginIfPending(probing: Bool = false) throws {
        guard let begin = pendingBegin else { return }
        pendingBegin = nil
        begunAtEpoch = engine?.feedWatermark.epoch ?? 0
        if probing {
            let feed = feedSQL
            probe = (try session.send(feed.issued), try session.send(feed.holders, feed.holderBinds))
            try session.flush()
        }
        try session.send(begin, wanted: false)
    }

    /// Reads the answer to the statements that began the write transaction.
    func resolveBegin() throws {
        guard let ticket = beginTicket else { return }
        beginTicket = nil
        let row: LibpqResult
        do {
            row = try session.wait(ticket, sql: "the write transaction's first statements")
        } catch {
            guard try startsAgain(after: error) else { throw error }
            try resolveBegin()
            return
        }
        answered = true
        if let cells = row.first, feedState == nil {
            let state = cells[0].isNull ? nil : cells[0].bytes()
            feedState = .some(state)
            engine?.feedStateCache.note(state, readSince: feedStateGeneration)
        }
    }

    /// Queues the check of the feed's state this transaction assumed, for a commit without an
    /// entry (whose statement checks it otherwise); `nil` when it read the state.
    func sendFeedStateCheck() throws -> LibpqConnection.Ticket? {
        guard let assumed = assumedFeedState, let engine else { return nil }
        var binds = LibpqParameters()
        binds.append(bytes: assumed)
        return try session.send(engine.checkedFeed.check, binds)
    }

    /// Sends what this transaction holds back and waits for it.
    func flush() throws {
        if let sent = try sendPending() { try session.wait(sent, sql: "the change feed's entry") }
    }

    /// Queues what this transaction holds back without waiting: before COMMIT, whose answer
    /// comes after this statement's (a failed statement turns the COMMIT into a rollback, so the
    /// caller checks this outcome after the COMMIT's).
    func sendPending(notifying channel: String? = nil) throws -> LibpqConnection.Ticket? {
        guard let entry = pendingEntry else { return nil }
        let feed = feedSQL
        var binds = session.connection.binds()
        binds.append(bytes: entry)
        binds.append(feed.writerLock)
        // With the state assumed, the entry's statement checks it (its third bind).
        let sql: String
        if let assumed = assumedFeedState, let checked = engine?.checkedFeed {
            binds.append(bytes: assumed)
            sql = channel == nil ? checked.appendEntry : checked.appendEntryNotifying
        } else {
            sql = channel == nil ? feed.appendEntry : feed.appendEntryNotifying
        }
        if let channel { binds.append(channel) }
        pendingEntry = nil
        return try session.send(sql, consume binds)
    }

    private func table(_ entity: EntitySchema) -> String { PostgresSQL.table(entity, schema: s) }
    /// Whether the rows carry their checksum (``PostgresRowSum``): every store of this format
    /// (the transactions of an open, without an engine, run after its upgrade).
    private var sealed: Bool { engine?.sealedRows ?? true }
    /// The attributes' columns, then the sum's: what every select and insert of rows names.
    private func columns(_ entity: EntitySchema) -> String { PostgresSQL.columns(entity, sealed: sealed) }
    private func pk(_ entity: EntitySchema) -> String { PostgresSQL.quote(entity.primaryKey) }

    /// The rows as compact records in one arena's shared chunks, each row's values checked against
    /// its checksum (``PostgresRowSum``) when it has one.
    private func records(_ rows: LibpqResult, _ entity: EntitySchema) throws -> [Record] {
        var arena = CompactArena()
        var records: [Record] = []
        records.reserveCapacity(rows.count)
        let columns = RowColumns(entity, sealed: sealed)
        for index in 0..<rows.count {
            records.append(try record(rows, Int32(index), entity, columns, arena: &arena))
        }
        return records
    }

    /// Whether this transaction set `cursor_tuple_fraction` for its cursors.
    private var plansCursorsWhole = false

    /// The rows of a cursor's first page; the most a later page holds, and the bytes it aims at.
    static let firstPageRows = 1_000
    static let maxPageRows = 10_000
    static let pageBytes = 8 << 20
    private static let fetchFirstPage = "FETCH \(firstPageRows) FROM _ds_rows"

    /// The rows of a read that may return more than a page, through a cursor (the transaction's
    /// `_ds_rows`, closed after it) whose pages are fetched one ahead: the server finds the next
    /// page while this one is decoded, and libpq holds two pages rather than the whole result,
    /// which it holds for one statement. The first page is 1,000 rows; a later one as many as
    /// fit in 8 MiB by the size of the rows before it, from 16 to 10,000. The second page is
    /// asked for with the first, so that a result of one page is one round trip, as a plain
    /// query's. A transaction's statements share its snapshot, so the rows are those of one
    /// query.
    private func pagedRecords(_ sql: String, _ binds: LibpqParameters, _ entity: EntitySchema) throws -> [Record] {
        try beginIfPending()
        if !plansCursorsWhole {
            // A cursor's query planned for its whole result, as a plain query's is (a cursor's is
            // otherwise planned for its first tenth, which favors plans that start fast).
            try session.send("SET LOCAL cursor_tuple_fraction = 1", wanted: false)
            plansCursorsWhole = true
        }
        try session.send("DECLARE _ds_rows NO SCROLL CURSOR FOR " + sql, binds, wanted: false)
        var open = true
        defer { if open { _ = try? session.send("CLOSE _ds_rows", wanted: false) } }
        var pages: [(ticket: LibpqConnection.Ticket, rows: Int)] = []
        func ask(_ rows: Int) throws {
            // The first pages' statement prepared, as the others are; a later page's count varies.
            let sql = rows == Self.firstPageRows ? Self.fetchFirstPage : "FETCH \(rows) FROM _ds_rows"
            pages.append((try session.send(sql, prepared: rows == Self.firstPageRows), rows))
        }
        try ask(Self.firstPageRows)
        try ask(Self.firstPageRows)
        var arena = CompactArena()
        var records: [Record] = []
        let columns = RowColumns(entity, sealed: sealed)
        var next = 0
        while true {
            let page: LibpqResult
            do {
                page = try session.wait(pages[next].ticket, sql: sql)
            } catch {
                // The server refused: the transaction is over (a CLOSE now would fail too, and
                // take the caller's ROLLBACK with it), and its cursor with it; or it is begun again.
                open = false
                guard try startsAgain(after: error) else { throw conflictOfUncheckedInsert(error) }
                return try pagedRecords(sql, binds, entity)
            }
            answered = true
            let full = page.count == pages[next].rows
            if full {
                // The page after the one on its way, asked for before this one is decoded.
                try ask(Self.pageRows(after: page))
                try session.flush()
            }
            do {
                // The next page's rows taken off the socket as they come, so that the server goes
                // on sending them while this page is decoded.
                try decode(page, into: &records, entity, columns, arena: &arena, draining: full)
            } catch {
                // A row that does not read: the pages asked for ahead are not waited for.
                for ahead in pages[(next + 1)...] { session.discard(ahead.ticket) }
                throw error
            }
            next += 1
            guard full else { break }
        }
        // The page asked for ahead, empty, is waited for all the same (it is on its way): a
        // failure of its FETCH (a standby cancelling it for its replay) aborts the transaction,
        // and a read that went on unaware would leave its connection in a failed transaction.
        for page in pages[next...] {
            do {
                _ = try session.wait(page.ticket, sql: sql)
            } catch {
                open = false
                throw conflictOfUncheckedInsert(error)
            }
        }
        return records
    }

    /// Every row of `entity` in its key's order (at most `limit`), in pages each of which is a
    /// query of its own that starts after the key that ended the one before (`WHERE key > $1
    /// ORDER BY key LIMIT $2`, a range of the key's index): the server streams each page as it
    /// finds its rows, where a cursor's `FETCH` first stores them (measured with libpq from C,
    /// fastest of 80 scans of 100,000 rows: 37.8 ms in such pages, 45.2 ms through a cursor,
    /// 36.1 ms in one query). The next page is asked for as soon as this one has arrived, and
    /// is taken off the socket while this one is decoded; libpq holds two pages at most. Pages
    /// are sized as a cursor's (``firstPageRows``, then by ``pageRows(after:)``); the
    /// transaction's statements share its snapshot, so the pages are one query's rows.
    private func keyOrderedRecords(_ entity: EntitySchema, limit: Int?) throws -> [Record] {
        try beginIfPending()
        let select = "SELECT \(columns(entity)) FROM \(table(entity))"
        let order = " ORDER BY \(pk(entity)) ASC LIMIT "
        let first = select + order + "$1"
        let next = select + " WHERE \(pk(entity)) > $1" + order + "$2"
        guard let keyColumn = entity.attributes.firstIndex(where: { $0.name == entity.primaryKey }) else {
            throw StoreError(.invalidArgument, "\(entity.name) has no attribute '\(entity.primaryKey)' for its key")
        }
        var left = limit ?? Int.max
        var asked = min(left, Self.firstPageRows)
        var binds = LibpqParameters()
        binds.append(asked)
        var ticket = try session.send(first, binds)
        var arena = CompactArena()
        var records: [Record] = []
        let columns = RowColumns(entity, sealed: sealed)
        while true {
            let page: LibpqResult
            do {
                page = try session.wait(ticket, sql: first)
            } catch {
                guard try startsAgain(after: error) else { throw conflictOfUncheckedInsert(error) }
                return try keyOrderedRecords(entity, limit: limit)
            }
            answered = true
            left -= page.count
            let full = page.count == asked && left > 0
            var ahead: LibpqConnection.Ticket?
            if full {
                asked = min(left, Self.pageRows(after: page))
                var binds = LibpqParameters()
                binds.append(LibpqRow(result: page, index: page.count - 1)[keyColumn])
                binds.append(asked)
                ahead = try session.send(next, binds)
                try session.flush()
            }
            do {
                try decode(page, into: &records, entity, columns, arena: &arena, draining: full)
            } catch {
                // A row that does not read: the page asked for ahead is not waited for.
                if let ahead { session.discard(ahead) }
                throw error
            }
            guard let ahead else { return records }
            ticket = ahead
        }
    }

    /// Appends `page`'s rows to `records`; with `draining`, the socket is read every
    /// ``rowsBetweenDrains(_:)`` rows, so that the server goes on sending the page on its way.
    private func decode(_ page: LibpqResult, into records: inout [Record], _ entity: EntitySchema, _ columns: RowColumns,
                        arena: inout CompactArena, draining: Bool) throws {
        let drainEvery = draining ? Self.rowsBetweenDrains(page) : Int.max
        var untilDrain = drainEvery
        for index in 0..<page.count {
            untilDrain -= 1
            if untilDrain == 0 {
                session.drainSocket()
                untilDrain = drainEvery
            }
            records.append(try record(page, Int32(index), entity, columns, arena: &arena))
        }
    }

    /// The rows of the next page: as many as fit in ``pageBytes`` by the memory libpq took for
    /// each row of `page`, from 16 to ``maxPageRows``.
    private static func pageRows(after page: LibpqResult) -> Int {
        let perRow = PQresultMemorySize(page.pointer) / max(1, page.count)
        return min(maxPageRows, max(16, pageBytes / max(1, perRow)))
    }

    /// Every how many rows of `page` the socket is read while the next page is on its way: about
    /// 64 KiB of rows as libpq holds them (a third of a Unix socket's default buffer), at most
    /// 256 rows.
    private static func rowsBetweenDrains(_ page: LibpqResult) -> Int {
        let perRow = PQresultMemorySize(page.pointer) / max(1, page.count)
        return min(256, max(1, (64 << 10) / max(1, perRow)))
    }

    /// What reading a result's rows of an entity needs of it, taken once per result: each
    /// attribute's type and whether it may be null, and whether the rows carry their sum.
    private struct RowColumns {
        let types: [ValueType]
        let optional: [Bool]
        let sealed: Bool

        init(_ entity: EntitySchema, sealed: Bool) {
            types = entity.attributes.map(\.type)
            optional = entity.attributes.map(\.isOptional)
            self.sealed = sealed
        }
    }

    /// The result's row `row` as a compact record of `arena`: each column read once, its bytes
    /// copied once, into the record, and the sum taken over the record's fields. A row that does
    /// not read so (damage, or text holding the escape byte) is read value by value, which
    /// unescapes the text and names what is wrong.
    private func record(_ result: LibpqResult, _ row: Int32, _ entity: EntitySchema, _ columns: RowColumns,
                        arena: inout CompactArena) throws -> Record {
        let compact = withExtendedLifetime(result) { () -> Record? in
            let pointer = result.pointer
            let sealed = columns.sealed
            return columns.types.withUnsafeBufferPointer { types in
                withUnsafeTemporaryAllocation(of: StoredField.self, capacity: max(types.count, 1)) { fields -> Record? in
                    for i in types.indices {
                        guard let field = PostgresSQL.field(pointer, row, Int32(i), types[i],
                                                            optional: columns.optional[i]) else { return nil }
                        fields.initializeElement(at: i, to: field)
                    }
                    let sumColumn = Int32(types.count)
                    let sumLength = sealed ? PQgetlength(pointer, row, sumColumn) : 0
                    let summed = sealed && (sumLength != 0 || PQgetisnull(pointer, row, sumColumn) == 0)
                    return arena.record(layout: entity.layout, fields: UnsafeBufferPointer(rebasing: fields[0..<types.count]),
                                        summed: summed) { sum in
                        guard sumLength == 8, let base = PQgetvalue(pointer, row, sumColumn) else { return false }
                        return Int64(bigEndian: UnsafeRawPointer(base).loadUnaligned(as: Int64.self)) == sum
                    }
                }
            }
        }
        if let compact { return compact }
        var values = RecordArena()
        return try record(LibpqRow(result: result, index: Int(row)), entity, types: columns.types, arena: &values)
    }

    /// One row as a record in `arena`.
    /// - Throws: `corrupt` naming the item when a value cannot be read or its checksum does not
    ///   match.
    /// - Parameter types: the attributes' types, in order (taken once per result).
    private func record(_ cells: LibpqRow, _ entity: EntitySchema, types: [ValueType], arena: inout RecordArena) throws
        -> Record {
        var failure: (any Error)?
        let record = arena.record(layout: entity.layout) { sink in
            do {
                for i in types.indices {
                    let value = try PostgresSQL.value(cells[i], types[i], entity: entity, index: i)
                    if value.isNull && !entity.attributes[i].isOptional {
                        throw StoreError(.corrupt, "\(session.location): \(entity.name).\(entity.attributes[i].name) is "
                            + "null, but the attribute is required")
                    }
                    sink.append(value)
                }
                return true
            } catch {
                failure = error
                return false
            }
        }
        guard let record else {
            throw failure ?? StoreError(.corrupt, "\(session.location): a row of '\(entity.name)' could not be read")
        }
        if sealed {
            let cell = cells[types.count]
            if !cell.isNull, try cell.int64() != RecordSum.of(record.values(in: entity.layout)) {
                throw StoreError(.corrupt, "\(session.location): \(entity.name)[\(Self.keyText(record[entity.primaryKey]))]: "
                    + "its checksum does not match its values (they changed after it was written)")
            }
        }
        return record
    }

    private static func keyText(_ key: Value) -> String {
        switch key {
        case .int(let n): return String(n)
        case .string(let text): return text
        default: return "\(key)"
        }
    }

    /// Reads every row of `entity` in key order, a page at a time, each checked as a read checks
    /// it; a row that does not read is described in `damage` and the check goes on.
    /// - Returns: the rows read, and those without a sum (written by another program).
    func checkRows(_ entity: EntitySchema, damage: inout [String]) throws -> (rows: Int, unsealed: Int) {
        let pk = pk(entity)
        var (rows, unsealed) = (0, 0)
        var after: LibpqParameters?
        var arena = CompactArena()
        let plan = RowColumns(entity, sealed: sealed)
        while true {
            let select = "SELECT \(columns(entity)), \(pk) FROM \(table(entity))"
            var binds = after ?? LibpqParameters()
            binds.append(Int64(1_000))
            let page = try run(select + (after == nil ? " ORDER BY \(pk) LIMIT $1" : " WHERE \(pk) > $1 ORDER BY \(pk) LIMIT $2"),
                               binds)
            for (index, row) in page.rows.enumerated() {
                rows += 1
                if sealed, row[entity.attributes.count].isNull { unsealed += 1 }
                do {
                    _ = try record(page, Int32(index), entity, plan, arena: &arena)
                } catch let error as StoreError where error.code == .corrupt {
                    damage.append(error.message)
                }
            }
            guard page.count == 1_000, let last = page.rows.last else { break }
            // The next page from the last key as the server has it, which reads whatever its value.
            var next = LibpqParameters()
            next.append(last[entity.attributes.count + (sealed ? 1 : 0)])
            after = next
        }
        return (rows, unsealed)
    }

    private func binds(_ values: [Value]) -> LibpqParameters {
        var binds = LibpqParameters()
        for value in values { PostgresSQL.bind(value, into: &binds) }
        return binds
    }

    /// The binds of a row's insert: its values in `entity`'s order, then their sum.
    private func rowBinds(_ record: Record, _ entity: EntitySchema) -> LibpqParameters {
        let values = record.values(in: entity.layout)
        var binds = session.connection.binds()
        for value in values { PostgresSQL.bind(value, into: &binds) }
        if sealed { binds.append(RecordSum.of(values)) }
        return binds
    }

    /// One query for many keys (each get is a round trip to the server).
    func get(_ entity: EntitySchema, keyValues: [Value]) throws -> [Record] {
        guard keyValues.count > 1 else { return try keyValues.compactMap { try get(entity, keyValue: $0) } }
        // As many rows as keys at most: a plain query, not a cursor, for up to a page of keys.
        return try fetch(FetchRequest(entity.name, filter: .among(entity.primaryKey, keyValues), limit: keyValues.count),
                         in: entity)
    }

    /// The statements of one entity, made once per store and entity.
    private func statements(_ entity: EntitySchema) -> EntityStatements {
        // The entity written last, again: its statements without the store's lock.
        if let last = lastStatements, last.made.layout === entity.layout, last.entityName == entity.name {
            return last.made
        }
        let made = engine?.statements(entity) ?? EntityStatements(entity, schema: s, sealed: sealed)
        lastStatements = (entity.name, made)
        return made
    }

    /// The statements ``statements(_:)`` gave last, with the name of the entity they were for.
    private var lastStatements: (entityName: String, made: EntityStatements)?

    func get(_ entity: EntitySchema, key: PrimaryKey) throws -> Record? {
        try records(run(statements(entity).get, binds([key.value])), entity).first
    }

    func contains(_ entity: EntitySchema, key: PrimaryKey) throws -> Bool {
        try !run(statements(entity).contains, binds([key.value])).isEmpty
    }

    /// Every item in key order, a page at a time, until `body` says stop.
    private func forEach(_ entity: EntitySchema, _ body: ([UInt8], Record) throws -> Bool) throws {
        var after: Value?
        while true {
            let page = try scan(entity, after: after.map { try PrimaryKey($0) }, limit: 1_000)
            for record in page {
                if try !body(try PrimaryKey(record[entity.primaryKey]).bytes, record) { return }
            }
            guard page.count == 1_000, let last = page.last else { return }
            after = last[entity.primaryKey]
        }
    }

    func fetch(_ request: FetchRequest, in entity: EntitySchema) throws -> [Record] {
        if let select = PostgresRequestSQL.select(request, entity, columns: columns(entity), table: table(entity),
                                                   schema: s) {
            if engine != nil, request.limit.map({ $0 > Self.firstPageRows }) ?? true {
                if case .all = request.filter, request.sort.isEmpty, request.offset == 0 {
                    return try keyOrderedRecords(entity, limit: request.limit)
                }
                return try pagedRecords(select.sql, select.binds, entity)
            }
            return try records(run(select.sql, select.binds), entity)
        }
        var stages = RequestStages(request)
        try forEach(entity) { key, record in stages.offer(key: key, record: record) }
        return stages.finish()
    }

    func count(_ filter: Filter, in entity: EntitySchema) throws -> Int {
        if case .all = filter {
            guard let row = try run("SELECT count(*) FROM \(table(entity))").first else { return 0 }
            return Int(try row[0].int64())
        }
        if let query = PostgresRequestSQL.count(filter, entity, table: table(entity), schema: s),
            let row = try run(query.sql, query.binds).first
        {
            return Int(try row[0].int64())
        }
        var count = 0
        try forEach(entity) { _, record in
            if filter.matches(record) { count += 1 }
            return true
        }
        return count
    }

    func scan(_ entity: EntitySchema, after key: PrimaryKey?, limit: Int) throws -> [Record] {
        let select = "SELECT \(columns(entity)) FROM \(table(entity))"
        if let key {
            return try records(run(select + " WHERE \(pk(entity)) > $1 ORDER BY \(pk(entity)) LIMIT $2",
                                             binds([key.value, .int(Int64(limit))])), entity)
        }
        return try records(run(select + " ORDER BY \(pk(entity)) LIMIT $1", binds([.int(Int64(limit))])),
                           entity)
    }

    func metadata(forKey key: String) throws -> [UInt8]? {
        if key == Self.feedStateKey, onStandby { throw ReadNeedsPrimary() }
        if key == Self.feedStateKey {
            try resolveBegin()
            if let known = feedState { return known }
            // A read of the feed: its probe goes before the snapshot.
            if !isWrite { try beginIfPending(probing: true) }
        }
        var binds = LibpqParameters()
        binds.append(PostgresSQL.escape(key))
        guard let row = try run("SELECT value FROM \(s)._ds_meta WHERE key = $1", binds).first else {
            return nil
        }
        return row[0].bytes()
    }

    // MARK: Writing

    /// Before a write of the feed's state, which must follow what the transaction's snapshot
    /// holds: the check of the state it assumed (which also sets the commit's durability, as the
    /// read of the state does otherwise). A state changed since fails the check on the server,
    /// which rolls the transaction back (a block that catches the conflict cannot commit what it
    /// did on the assumed state), and the block runs again, reading the state.
    private func checkAssumedFeedState() throws {
        guard let assumed = assumedFeedState, let engine else { return }
        var binds = LibpqParameters()
        binds.append(bytes: assumed)
        // The block acted on the assumed state: the transaction is never begun again unseen.
        answered = true
        try run(engine.checkedFeed.check, binds)
        assumedFeedState = nil
    }

    /// The unique-index rule, checked before a write so that a violation leaves the transaction
    /// usable (a failed statement would abort it).
    private func checkUnique(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        try UniqueIndexRule.check(record, key: key, in: entity) { index, values in
            let attributes = index.attributes.compactMap { name in entity.attributes.first { $0.name == name } }
            let conditions = attributes.enumerated().map { i, attribute in
                let type = PostgresSQL.castType(attribute.type)
                return PostgresSQL.indexTerm(attribute, schema: s) + " = "
                    + PostgresSQL.indexTerm(attribute, schema: s, operand: "$\(i + 1)::\(type)")
            }
            return try records(run("SELECT \(columns(entity)) FROM \(table(entity)) WHERE "
                                              + conditions.joined(separator: " AND "), binds(values)), entity)
        }
    }


    /// For entities with integer keys and no unique index: a bound no key in the table passes
    /// (`nil` inside: the table is empty), learned at the transaction's second insert into the
    /// entity and kept by its own writes. An insert of a key past the bound is sent without
    /// waiting for its answer; if another transaction took that key meanwhile, its `23505` is a
    /// conflict and the block runs again (``conflictOfUncheckedInsert(_:)``). It is sent without
    /// waiting for its answer (the next statement's answer, at the latest `COMMIT`'s,
    /// comes after it, and carries its error if it had one): a loop of inserts in one
    /// transaction is not one round trip per insert.
    private var keyBounds: [String: Int64?] = [:]
    /// The entities this transaction inserted into, in the order of their first insert (a write
    /// touches one or a few: an array, which a one-insert write does not allocate a hash table for).
    private var insertsSeen: [String] = []

    /// Forgets the bounds (after the tables changed other than by single-item writes).
    func forgetKeyBounds() { keyBounds.removeAll() }

    func insert(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        if entity.indexes.contains(where: \.isUnique) {
            if try contains(entity, key: key) { throw StoreError.keyExists(entity, record) }
            try checkUnique(record, key: key, in: entity)
        } else if engine != nil, insertsUnchecked {
            // Sent without waiting: a key taken fails the statement (23505), which rolls the
            // transaction back and runs the block again, checking (``insertsUnchecked``).
            if let runsAgain { throw runsAgain }
            try sendUnchecked(record, in: entity)
            return
        } else if engine != nil, case .int(let k) = key.value {
            if let bound = keyBounds[entity.name] {
                if bound.map({ k > $0 }) ?? true {
                    try sendUnchecked(record, in: entity)
                    keyBounds[entity.name] = .some(k)
                    return
                }
            } else if insertsSeen.contains(entity.name) {
                // The second insert: the bound is read with it, in the same round trip.
                let max = try session.send(statements(entity).maxKey)
                let inserted = try run(statements(entity).insert, rowBinds(record, entity))
                let row = try session.wait(max, sql: statements(entity).maxKey)
                let stored: Int64? = try row.first.flatMap { $0[0].isNull ? nil : try $0[0].int64() }
                keyBounds[entity.name] = .some([stored, k].compactMap { $0 }.max())
                if inserted.isEmpty { throw StoreError.keyExists(entity, record) }
                return
            }
            insertsSeen.append(entity.name)
        }
        let inserted = try run(statements(entity).insert, rowBinds(record, entity))
        if inserted.isEmpty { throw StoreError.keyExists(entity, record) }
    }

    /// Sends the plain insert of `record` without waiting for its answer; its failure is
    /// watched (``LibpqConnection/watchFailures(from:)``) from the transaction's first such insert.
    private func sendUnchecked(_ record: Record, in entity: EntitySchema) throws {
        let ticket = try session.send(statements(entity).insertPlain, rowBinds(record, entity), wanted: false)
        if !sentUncheckedInserts { session.connection.watchFailures(from: ticket) }
        sentUncheckedInserts = true
        uncheckedInsertsAnswered = false
    }

    /// A write of `key` into `entity` other than an insert: the bound includes it.
    private func wrote(_ key: PrimaryKey, in entity: EntitySchema) {
        guard let bound = keyBounds[entity.name] else { return }
        if case .int(let k) = key.value {
            keyBounds[entity.name] = .some(max(bound ?? k, k))
        } else {
            keyBounds[entity.name] = nil
        }
    }

    /// Inserts by COPY (or one multi-row statement) when no item of the batch clashes (keys taken or given
    /// twice, values a unique index holds or that two items of the batch share); otherwise
    /// stores nothing and returns `false`.
    func insertAllOrNone(_ records: [(record: Record, key: PrimaryKey)], in entity: EntitySchema) throws -> Bool {
        guard !records.isEmpty else { return true }
        if let runsAgain { throw runsAgain }
        // Inserts sent without waiting are answered first: a taken key among them is a conflict
        // of theirs, not a clash of this batch's (whose COPY would meet their aborted transaction).
        if sentUncheckedInserts, !uncheckedInsertsAnswered {
            try run("SELECT 1")
            uncheckedInsertsAnswered = true
        }
        keyBounds[entity.name] = nil
        // Large batches go by COPY, under a savepoint: the table's primary key and unique
        // indexes refuse a clash, which rolls the COPY back to the savepoint, and the batch then
        // goes one by one, for the exact error. (A check by query first cost a look-up per key;
        // a key given twice in the batch is refused by the primary key too.)
        if records.count >= 64 {
            try session.send("SAVEPOINT ds_bulk", wanted: false)
            do {
                try session.copy(records, into: entity, quotedSchema: s, sealed: sealed)
                // (The block sees the rows stored: the transaction is not begun again without them.)
                answered = true
            } catch let error as StoreError where error.code == .uniqueViolation {
                try run("ROLLBACK TO SAVEPOINT ds_bulk")
                // The batch goes one by one: the inserts look for their keys, one of which is taken.
                insertsUnchecked = false
                return false
            }
            try session.send("RELEASE SAVEPOINT ds_bulk", wanted: false)
            return true
        }
        guard try bulkIsClean(records, entity) else {
            insertsUnchecked = false
            return false
        }
        var binds = LibpqParameters()
        var rows: [String] = []
        var n = 0
        for (record, _) in records {
            var marks: [String] = []
            let values = record.values(in: entity.layout)
            for value in values {
                PostgresSQL.bind(value, into: &binds)
                n += 1
                marks.append("$\(n)")
            }
            if sealed {
                binds.append(RecordSum.of(values))
                n += 1
                marks.append("$\(n)")
            }
            rows.append("(" + marks.joined(separator: ", ") + ")")
        }
        try run("INSERT INTO \(table(entity)) (\(columns(entity))) VALUES " + rows.joined(separator: ", "), binds)
        return true
    }

    /// Whether a batch can go in one statement: no key taken or repeated, and no unique value
    /// held already or shared within the batch (single-attribute unique indexes are checked in
    /// one query per 10,000 values, several attributes' as tuples).
    private func bulkIsClean(_ records: [(record: Record, key: PrimaryKey)], _ entity: EntitySchema) throws -> Bool {
        guard Set(records.map(\.key)).count == records.count else { return false }
        for chunk in stride(from: 0, to: records.count, by: 10_000).map({ records[$0..<min(records.count, $0 + 10_000)] }) {
            var binds = LibpqParameters()
            let marks = chunk.enumerated().map { i, item -> String in
                PostgresSQL.bind(item.key.value, into: &binds)
                return "$\(i + 1)"
            }
            if try !run("SELECT 1 FROM \(table(entity)) WHERE \(pk(entity)) IN (\(marks.joined(separator: ", "))) "
                + "LIMIT 1", binds).isEmpty { return false }
        }
        for index in entity.indexes where index.isUnique {
            let attributes = index.attributes.compactMap { entity.attribute(named: $0) }
            guard attributes.count == index.attributes.count else { return false }
            var seen = Set<[Value]>()
            var tuples: [[Value]] = []
            for (record, _) in records {
                guard let tuple = UniqueIndexRule.tuple(record, index) else { continue }
                guard seen.insert(tuple).inserted else { return false }
                tuples.append(tuple)
            }
            // One query per chunk: `(terms) IN ((values), …)`, each term as the index has it.
            let columns = "(" + attributes.map { PostgresSQL.indexTerm($0, schema: s) }.joined(separator: ", ") + ")"
            let perChunk = max(1, 10_000 / attributes.count)
            var start = 0
            while start < tuples.count {
                let chunk = tuples[start..<min(tuples.count, start + perChunk)]
                var binds = LibpqParameters()
                let rows = chunk.map { tuple -> String in
                    let terms = zip(attributes, tuple).map { attribute, value -> String in
                        PostgresSQL.bind(value, into: &binds)
                        let cast = "$\(binds.count)::\(PostgresSQL.castType(attribute.type))"
                        return PostgresSQL.indexTerm(attribute, schema: s, operand: cast)
                    }
                    return "(" + terms.joined(separator: ", ") + ")"
                }
                if try !run("SELECT 1 FROM \(table(entity)) WHERE \(columns) IN (\(rows.joined(separator: ", "))) "
                    + "LIMIT 1", binds).isEmpty { return false }
                start += chunk.count
            }
        }
        return true
    }

    func put(_ record: Record, key: PrimaryKey, in entity: EntitySchema) throws {
        if entity.indexes.contains(where: \.isUnique) { try checkUnique(record, key: key, in: entity) }
        try run(statements(entity).put, rowBinds(record, entity))
        wrote(key, in: entity)
    }

    func delete(key: PrimaryKey, in entity: EntitySchema) throws -> Bool {
        try !run(statements(entity).delete, binds([key.value])).isEmpty
    }

    func deleteAll(in entity: EntitySchema) throws -> Int {
        guard let row = try run("WITH gone AS (DELETE FROM \(table(entity)) RETURNING 1) "
            + "SELECT count(*) FROM gone").first else { return 0 }
        return Int(try row[0].int64())
    }

    func setMetadata(_ value: [UInt8]?, forKey key: String) throws {
        if key == Self.feedStateKey {
            try resolveBegin()
            try checkAssumedFeedState()
            feedState = nil
            wroteFeedState = true
            // Every write after this one reads the state until one has read what it commits.
            engine?.feedStateCache.forget()
        }
        // Keys are text: NUL and the escape's own byte are escaped as in values.
        var binds = LibpqParameters()
        binds.append(PostgresSQL.escape(key))
        guard let value else {
            try run("DELETE FROM \(s)._ds_meta WHERE key = $1", binds)
            return
        }
        binds.append(bytes: value)
        try run("INSERT INTO \(s)._ds_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE "
            + "SET value = EXCLUDED.value", binds)
    }

    // MARK: The change feed's entries

    var changeLogStorage: (any ChangeLogStoring)? { self }
    var changeLogWriter: (any ChangeLogWriting)? { self }
    var changeLogNumbering: (any ChangeLogNumbering)? { self }

    func changeLogBounds() throws -> (first: UInt64, last: UInt64)? {
        let window = try changeLogWindow()
        return (window.floor, window.released)
    }

    func changeLogWindow() throws -> (floor: UInt64, released: UInt64) {
        if onStandby { throw ReadNeedsPrimary() }
        if let window { return window }
        let feed = feedSQL
        if isWrite {
            // A write transaction's snapshot was taken before it could probe: what this process's
            // earlier probes say of it (a feed read in a write block may lag; it never skips).
            try resolveBegin()
            if floorInSnapshot == nil || writeSnapshot == nil {
                // (Forgotten after this transaction moved the floor.)
                guard let row = try run(feedSQL.window).first else {
                    throw StoreError(.corrupt, "\(session.location): the server returned no snapshot")
                }
                writeSnapshot = try FeedWatermark.Snapshot(try row[0].string())
                floorInSnapshot = PostgresFeedSQL.floor(row[1])
            }
            guard let floorInSnapshot, let writeSnapshot else { return (0, 0) }
            let released = engine?.feedWatermark.released(in: writeSnapshot, begun: begunAtEpoch, probe: nil) ?? 0
            return (floorInSnapshot, released)
        }
        try beginIfPending(probing: true)
        var read: FeedWatermark.Probe?
        if let (issued, holders) = probe {
            probe = nil
            let issuedRow = try session.wait(issued, sql: feed.issued)
            let holdersRow = try session.wait(holders, sql: feed.holders)
            if let first = issuedRow.first, let held = holdersRow.first {
                read = FeedWatermark.Probe(issued: UInt64(clamping: try first[0].int64()),
                                           holders: FeedWatermark.holders(try held[0].string()))
            }
        }
        guard let row = try run(feed.window).first else {
            throw StoreError(.corrupt, "\(session.location): the server returned no snapshot")
        }
        let snapshot = try FeedWatermark.Snapshot(try row[0].string())
        let released = engine?.feedWatermark.released(in: snapshot, begun: begunAtEpoch, probe: read)
            ?? (read.map { $0.holders.allSatisfy { !snapshot.isRunning($0) } ? $0.issued : 0 } ?? 0)
        let made = (PostgresFeedSQL.floor(row[1]), released)
        window = made
        return made
    }

    func changeLogIssued() throws -> UInt64 {
        if onStandby { throw ReadNeedsPrimary() }
        // (In a write transaction, read when asked: a number taken since its snapshot counts a
        // token up to it as not final yet, as it is.)
        guard let row = try run(feedSQL.issued).first else { return 0 }
        return UInt64(clamping: try row[0].int64())
    }

    func changeLogEntries(after: UInt64, through: UInt64, limit: Int) throws -> [(sequence: UInt64, entry: [UInt8])] {
        if onStandby { throw ReadNeedsPrimary() }
        try flush()
        var binds = LibpqParameters()
        binds.append(Int64(clamping: after))
        binds.append(Int64(clamping: through))
        binds.append(Int64(limit))
        return try run("SELECT seq, entry FROM \(s)._ds_feed WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3", binds)
            .rows.map { (UInt64(clamping: try $0[0].int64()), $0[1].bytes()) }
    }

    func changeLogCount(after: UInt64, through: UInt64, atMost: Int) throws -> Int {
        if onStandby { throw ReadNeedsPrimary() }
        guard through > after else { return 0 }
        var binds = LibpqParameters()
        binds.append(Int64(clamping: after))
        binds.append(Int64(clamping: through))
        binds.append(Int64(atMost))
        guard let row = try run("SELECT count(*) FROM (SELECT 1 FROM \(s)._ds_feed WHERE seq > $1 AND seq <= $2 ORDER BY seq "
            + "LIMIT $3) x", binds).first else { return 0 }
        return Int(try row[0].int64())
    }

    /// The floor rises to the oldest of the newest `keeping` entries, and never above a number
    /// this process found final (a lower number still running would otherwise commit under it).
    func expireChangeLog(keeping: UInt64) throws {
        try flush()
        guard keeping >= 1, let released = engine?.feedWatermark.highestReleased, released > 0 else { return }
        try run(feedSQL.expire, PostgresFeedSQL.expireBinds(released: released, keeping: keeping))
        window = nil
        floorInSnapshot = nil
    }

    func changeLogEntry(_ sequence: UInt64) throws -> [UInt8]? {
        try changeLogEntries(after: sequence &- 1, through: sequence, limit: 1).first?.entry
    }

    func appendChangeLog(_ sequence: UInt64, _ entry: [UInt8]) throws {
        try resolveBegin()
        if pendingEntry != nil { try flush() }
        pendingEntry = entry
    }

    func trimChangeLog(keeping: UInt64, slack: UInt64) throws {
        pendingTrim = (keeping, max(1, slack))
    }

    func removeChangeLog(before sequence: UInt64) throws {
        try flush()
        var binds = LibpqParameters()
        binds.append(Int64(clamping: sequence))
        try run("WITH gone AS (DELETE FROM \(s)._ds_feed WHERE seq < $1 RETURNING 1) "
            + feedSQL.raiseFloor("$1::int8"), binds)
        window = nil
        floorInSnapshot = nil
    }

    func restartChangeLog() throws {
        try flush()
        try run("WITH taken AS (SELECT nextval(\(feedSQL.sequenceLiteral)) AS v), gone AS (DELETE FROM \(s)._ds_feed "
            + "WHERE seq <= (SELECT v FROM taken) RETURNING 1) " + feedSQL.raiseFloor("v + 1", from: "FROM taken"))
        window = nil
        floorInSnapshot = nil
    }

    func continueChangeLog(after head: UInt64) throws {
        try flush()
        let feed = feedSQL
        var binds = LibpqParameters()
        binds.append(Int64(clamping: head))
        try run("SELECT setval(\(feed.sequenceLiteral), greatest(($1::int8), (\(feed.issued)))) "
            + "WHERE greatest(($1::int8), (\(feed.issued))) > 0", binds)
        try run("DELETE FROM \(s)._ds_feed")
        var floor = LibpqParameters()
        floor.append(Int64(clamping: head) + 1)
        try run(feed.raiseFloor("$1::int8", greatest: false), floor)
        window = nil
        floorInSnapshot = nil
    }
}
/// The SQL of one entity's single-item statements, shared by the writes that use them (a
/// reference: a write copies no strings to take them).
final class EntityStatements: Sendable {
    let attributes: [String]
    /// The layout they were made for: the same layout object has the same attribute names.
    let layout: RecordLayout
    let get, contains, insert, put, delete: String
    /// An insert that fails on a taken key (sent without waiting, where none can be taken).
    let insertPlain: String
    /// The largest key.
    let maxKey: String

    init(_ entity: EntitySchema, schema s: String, sealed: Bool) {
        attributes = entity.attributes.map(\.name)
        layout = entity.layout
        let table = PostgresSQL.table(entity, schema: s)
        let columns = PostgresSQL.columns(entity, sealed: sealed)
        let pk = PostgresSQL.quote(entity.primaryKey)
        let placeholders = (1...entity.attributes.count + (sealed ? 1 : 0)).map { "$\($0)" }.joined(separator: ", ")
        get = "SELECT \(columns) FROM \(table) WHERE \(pk) = $1"
        contains = "SELECT 1 FROM \(table) WHERE \(pk) = $1"
        insert = "INSERT INTO \(table) (\(columns)) VALUES (\(placeholders)) ON CONFLICT (\(pk)) DO NOTHING RETURNING 1"
        insertPlain = "INSERT INTO \(table) (\(columns)) VALUES (\(placeholders))"
        maxKey = "SELECT max(\(pk)) FROM \(table)"
        let updates = entity.attributes.filter { $0.name != entity.primaryKey }
            .map { "\(PostgresSQL.quote($0.name)) = EXCLUDED.\(PostgresSQL.quote($0.name))" }
            + (sealed ? ["\(PostgresRowSum.column) = EXCLUDED.\(PostgresRowSum.column)"] : [])
        put = "INSERT INTO \(table) (\(columns)) VALUES (\(placeholders)) ON CONFLICT (\(pk)) DO "
            + (updates.isEmpty ? "NOTHING" : "UPDATE SET " + updates.joined(separator: ", "))
        delete = "DELETE FROM \(table) WHERE \(pk) = $1 RETURNING 1"
    }
}
#endif
