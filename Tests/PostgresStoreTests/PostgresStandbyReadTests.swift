#if Postgres
@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
@_spi(Backend) import PostgresStore
import Synchronization
import Testing

/// Reads from a standby (`read_hosts=`), against a primary and an asynchronous standby of
/// their own: the standby replays each commit some time after it is acknowledged, so a read
/// that does not wait for it can be stale.
@Suite(.serialized) struct PostgresStandbyReadTests {
    static let schema = Schema(entities: [EntitySchema("Counter", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("value", .int),
    ])])

    private func open(_ servers: ReplicatedServers, schema name: String, extra: String = "") throws -> PostgresStore {
        try PostgresStore(url: "postgres://postgres@127.0.0.1:\(servers.primaryPort)/datastore?schema=\(name)"
                              + "&read_hosts=127.0.0.1:\(servers.standbyPort)&connect_timeout=2" + extra,
                          schema: Self.schema)
    }

    /// A write then a read, 1,000 times: with read-your-writes (the default) every read sees the
    /// write before it, and the standby serves the reads; the change feed's reads, which need the
    /// primary, still see every commit.
    @Test func aReadAfterAWriteOnAStandbySeesIt() throws {
        let directory = try TemporaryDirectory()
        let servers = try ReplicatedServers(dir: directory.path("replicas"), synchronous: false)
        let store = try open(servers, schema: "standby_ryw")
        defer { try? store.close() }
        #expect(store.location.readHosts == [PostgresServer(host: "127.0.0.1", port: servers.standbyPort)])
        let start = try store.currentChangeToken()
        let before = store.readsServed
        var stale = 0
        for i in 0..<1_000 {
            try store.writeSync { try $0.save(["id": .int(Int64(i % 10)), "value": .int(Int64(i))], into: "Counter") }
            let read = try store.read { try $0.get("Counter", key: .int(Int64(i % 10)))?["value"] }
            if read != .int(Int64(i)) { stale += 1 }
        }
        #expect(stale == 0)
        let after = store.readsServed
        #expect(after.standbys - before.standbys >= 900, "\(after)")
        print("standby reads: 1,000 writes each followed by a read, \(stale) stale; the standby served "
            + "\(after.standbys - before.standbys), the primary \(after.primary - before.primary)")
        // A read asked of the primary goes there.
        #expect(try store.read(on: .primary) { try $0.count(FetchRequest("Counter")) } == 10)
        #expect(store.readsServed.primary == after.primary + 1)
        // The feed is read on the primary: every commit is there.
        var sets: [ChangeSet] = []
        var token = start
        while case let page = try store.changes(since: token, limit: 1_000), !page.isEmpty {
            sets += page
            token = page.last!.token
        }
        #expect(sets.count == 1_000)
    }

    /// A standby stopped (its sessions ended under the readers) and started again: no reader
    /// sees an error; the reads go to the primary while it is down and back to it once it is up.
    @Test func aStandbyStoppedAndStartedUnderReadersGivesNoError() throws {
        let directory = try TemporaryDirectory()
        let servers = try ReplicatedServers(dir: directory.path("replicas"), synchronous: false)
        let store = try open(servers, schema: "standby_restart", extra: "&read_your_writes=off")
        defer { try? store.close() }
        try store.writeSync { w in
            for i in 0..<100 { try w.insert(["id": .int(Int64(i)), "value": .int(Int64(i))], into: "Counter") }
        }
        // Once the standby has replayed the items, no read sees fewer (a standby never goes back).
        let replayed = ContinuousClock.now + .seconds(30)
        while try store.read({ try $0.count(FetchRequest("Counter")) }) < 100, ContinuousClock.now < replayed { usleep(1_000) }
        let stop = Atomic<Bool>(false)
        let failures = Mutex<[String]>([])
        let counts = Mutex<[Int]>([])
        let readers = (0..<4).map { n in
            Thread {
                while !stop.load(ordering: .relaxed) {
                    do {
                        let count = try store.read { try $0.count(FetchRequest("Counter")) }
                        counts.withLock { $0.append(count) }
                        if n == 0 { try store.writeSync { try $0.save(["id": 0, "value": .int(Int64(n))], into: "Counter") } }
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                }
            }
        }
        for reader in readers { reader.start() }
        defer { stop.store(true, ordering: .relaxed) }
        let first = store.readsServed
        try wait("reads on the standby") { store.readsServed.standbys > first.standbys + 50 }
        try servers.run("stop-standby")
        let stopped = store.readsServed
        try wait("reads on the primary") { store.readsServed.primary > stopped.primary + 50 }
        try servers.run("start-standby")
        let started = store.readsServed
        try wait("reads on the standby again") { store.readsServed.standbys > started.standbys + 50 }
        stop.store(true, ordering: .relaxed)
        while readers.contains(where: { !$0.isFinished }) { usleep(1_000) }
        #expect(failures.withLock { $0 } == [])
        #expect(counts.withLock { $0.allSatisfy { $0 == 100 } })
    }

    /// Waits until `condition` holds, at most 30 s.
    private func wait(_ what: String, _ condition: () throws -> Bool) throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while try !condition() {
            guard ContinuousClock.now < deadline else { throw StoreError(.busy, "waited 30 s for \(what)") }
            usleep(10_000)
        }
    }

    /// Runs `sql` on the server at `port`.
    private func psql(_ port: Int, _ sql: String) throws {
        let status = system("psql -q -h 127.0.0.1 -p \(port) -U postgres -d datastore -c \"\(sql)\" >/dev/null")
        guard status == 0 else { throw StoreError(.io, "psql \(sql) failed") }
    }

    /// A standby whose replay is paused falls behind the primary: once it is further behind than
    /// `max_standby_lag`, reads go to the primary (and see the latest commit) without an error;
    /// once it replays again, reads go back to it.
    @Test func aStandbyThatFallsBehindIsLeftAlone() throws {
        let directory = try TemporaryDirectory()
        let servers = try ReplicatedServers(dir: directory.path("replicas"), synchronous: false)
        let store = try open(servers, schema: "standby_lag", extra: "&read_your_writes=off&max_standby_lag=0.5&standby_wait=0.1")
        defer { try? store.close() }
        try store.writeSync { try $0.insert(["id": 1, "value": 0], into: "Counter") }
        try wait("the standby to replay the item") { try store.read { try $0.get("Counter", key: 1) } != nil }
        try psql(servers.standbyPort, "SELECT pg_wal_replay_pause()")
        var latest: Int64 = 0
        try wait("a read of the latest value") {
            latest += 1
            try store.writeSync { [latest] in try $0.save(["id": 1, "value": .int(latest)], into: "Counter") }
            return try store.read { try $0.get("Counter", key: 1)?["value"] } == .int(latest)
        }
        // The standby stays behind: every read now sees the latest commit.
        for _ in 0..<20 {
            latest += 1
            try store.writeSync { [latest] in try $0.save(["id": 1, "value": .int(latest)], into: "Counter") }
            #expect(try store.read { try $0.get("Counter", key: 1)?["value"] } == .int(latest))
        }
        try psql(servers.standbyPort, "SELECT pg_wal_replay_resume()")
        let resumed = store.readsServed
        try wait("reads on the standby again") {
            _ = try store.read { try $0.get("Counter", key: 1) }
            return store.readsServed.standbys > resumed.standbys
        }
    }

    /// A standby promoted (it takes writes of its own now) is no longer read from: what it takes
    /// is never seen, and a read after a write on the primary sees that write.
    @Test func aPromotedStandbyIsNotReadFrom() throws {
        let directory = try TemporaryDirectory()
        let servers = try ReplicatedServers(dir: directory.path("replicas"), synchronous: false)
        let store = try open(servers, schema: "standby_promoted")
        defer { try? store.close() }
        try store.writeSync { try $0.insert(["id": 1, "value": 0], into: "Counter") }
        #expect(try store.read { try $0.get("Counter", key: 1)?["value"] } == 0)
        #expect(store.readsServed.standbys > 0)
        try servers.run("promote")
        try psql(servers.standbyPort, "INSERT INTO standby_promoted.\\\"Counter\\\" (id, value) VALUES (999, 999)")
        for value in Int64(1)...50 {
            try store.writeSync { try $0.save(["id": 1, "value": .int(value)], into: "Counter") }
            #expect(try store.read { try $0.get("Counter", key: 1)?["value"] } == .int(value))
        }
        // Once the store has seen it promoted (the reads above asked it), what the promoted node
        // takes of its own is never read, even by reads that wait for nothing, for longer than
        // the 2 s a standby that failed is left alone.
        let until = ContinuousClock.now + .seconds(3)
        var reads = 0
        while ContinuousClock.now < until {
            #expect(try store.read(on: .standbys(readYourWrites: false)) { try $0.get("Counter", key: 999) } == nil)
            reads += 1
        }
        #expect(reads > 10)
        let after = store.readsServed
        _ = try store.read { try $0.count(FetchRequest("Counter")) }
        #expect(store.readsServed.primary == after.primary + 1)
    }

    /// `read_hosts`, `read_your_writes`, `standby_wait` and `max_standby_lag` are read, printed
    /// back, and refused with their names when wrong.
    @Test func theStandbyParametersParseAndPrint() throws {
        let location = try PostgresLocation(parsing: "postgres://app@db1/app?schema=s&read_hosts=db2,db3:5433,[::1]:6000"
                                                + "&read_your_writes=off&standby_wait=0.25&max_standby_lag=3")
        #expect(location.readHosts == [PostgresServer(host: "db2", port: 5432), PostgresServer(host: "db3", port: 5433),
                                       PostgresServer(host: "::1", port: 6000)])
        #expect(!location.readYourWrites)
        #expect(location.standbyWait == .milliseconds(250))
        #expect(location.maxStandbyLag == .seconds(3))
        #expect(location.parameters.isEmpty)
        let printed = location.description
        #expect(printed.contains("read_hosts=db2:5432,db3:5433,[::1]:6000"))
        #expect(try PostgresLocation(parsing: printed) == location)
        let plain = try PostgresLocation(parsing: "postgres://app@db1/app?schema=s")
        #expect(plain.readHosts.isEmpty && plain.readYourWrites && plain.standbyWait == .seconds(1)
                    && plain.maxStandbyLag == .seconds(10))
        #expect(!plain.description.contains("read_"))
        for (text, named) in [("read_hosts=db2:99999", "99999"), ("read_hosts=db2,,db3", "empty host"),
                              ("read_your_writes=maybe", "read_your_writes"), ("standby_wait=-1", "standby_wait"),
                              ("max_standby_lag=0", "max_standby_lag"), ("max_standby_lag=0.0004", "max_standby_lag"),
                              ("read_hosts=db2:5433,db2:5433", "twice"), ("read_hosts=[::1]x", "[::1]x")] {
            let error = #expect(throws: StoreError.self) { try PostgresLocation(parsing: "postgres://app@db1/app?schema=s&\(text)") }
            #expect(error?.code == .invalidArgument)
            #expect(error?.message.contains(named) == true, "\(error?.message ?? "")")
        }
    }
    /// Paged reads on a standby: at a page's edges (no row, a page exactly, two pages exactly,
    /// one past), each row once in key order; then, with the standby cancelling at once every
    /// read in the way of its replay (`max_standby_streaming_delay = 0`) and the primary taking
    /// the table's `ACCESS EXCLUSIVE` lock over and over, reads of 25,000 rows in five pages,
    /// whose cursor the standby cancels during a `FETCH` (an error) or ends with its connection
    /// between two (a FATAL): no reader sees an error or a short result, the read runs again on
    /// the primary.
    @Test func pagedReadsOnAStandbyAndTheirRecoveryConflicts() throws {
        let directory = try TemporaryDirectory()
        let servers = try ReplicatedServers(dir: directory.path("replicas"), synchronous: false)
        let schema = Schema(entities: [EntitySchema("Row", primaryKey: "id", attributes: [
            Attribute("id", .int), Attribute("text", .string),
        ])])
        let store = try PostgresStore(url: "postgres://postgres@127.0.0.1:\(servers.primaryPort)/datastore?schema=standby_pages"
                                          + "&read_hosts=127.0.0.1:\(servers.standbyPort)&connect_timeout=2", schema: schema)
        defer { try? store.close() }
        let count = 25_000
        try store.writeSync { writer in
            try writer.insert(contentsOf: (0..<count).map { ["id": .int(Int64($0)), "text": .string("row \($0)")] }, into: "Row")
        }
        @Sendable func rows(below bound: Int) throws -> [Value?] {
            try store.read { try $0.fetch(FetchRequest("Row", filter: Field("id") < Int64(bound))) }.map { $0["id"] }
        }
        try wait("a read on the standby") {
            let served = store.readsServed.standbys
            _ = try rows(below: 1)
            return store.readsServed.standbys > served
        }
        let before = store.readsServed
        for bound in [0, 1_000, 2_000, 2_001] {
            #expect(try rows(below: bound) == (0..<bound).map { .int(Int64($0)) }, "ids below \(bound)")
        }
        #expect(store.readsServed.standbys - before.standbys == 4, "\(store.readsServed)")

        try psql(servers.standbyPort, "ALTER SYSTEM SET max_standby_streaming_delay = 0")
        try psql(servers.standbyPort, "SELECT pg_reload_conf()")
        func conflicts() throws -> Int {
            Int(try runCommand("/usr/bin/psql", ["-h", "127.0.0.1", "-p", "\(servers.standbyPort)", "-U", "postgres",
                                                 "-d", "datastore", "-Atc", "SELECT confl_lock FROM pg_stat_database_conflicts "
                                                     + "WHERE datname = 'datastore'"])
                .trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }
        let conflictsBefore = try conflicts()
        let stop = Atomic<Bool>(false)
        let failures = Mutex<[String]>([])
        let reads = Atomic<Int>(0)
        let primaryPort = servers.primaryPort
        let locker = Thread {
            let locks = String(repeating: "BEGIN; LOCK TABLE standby_pages.\"Row\" IN ACCESS EXCLUSIVE MODE; COMMIT; "
                                   + "SELECT pg_sleep(0.02);\n", count: 20)
            while !stop.load(ordering: .relaxed) {
                if (try? runCommand("/usr/bin/psql", ["-q", "-h", "127.0.0.1", "-p", "\(primaryPort)", "-U", "postgres",
                                                      "-d", "datastore", "-c", locks])) == nil {
                    failures.withLock { $0.append("the primary refused the lock") }
                }
            }
        }
        let readers = (0..<2).map { _ in
            Thread {
                while !stop.load(ordering: .relaxed) {
                    do {
                        let ids = try rows(below: count)
                        if ids.count != count || ids.first != .int(0) || ids.last != .int(Int64(count - 1)) {
                            failures.withLock { $0.append("a read of \(ids.count) rows") }
                        }
                        reads.add(1, ordering: .relaxed)
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                }
            }
        }
        locker.start()
        for reader in readers { reader.start() }
        defer { stop.store(true, ordering: .relaxed) }
        let started = store.readsServed
        try wait("5 reads cancelled by the standby's replay") { try conflicts() >= conflictsBefore + 5 }
        try wait("20 reads after them") { reads.load(ordering: .relaxed) >= 20 }
        stop.store(true, ordering: .relaxed)
        while !locker.isFinished || readers.contains(where: { !$0.isFinished }) { usleep(1_000) }
        #expect(failures.withLock { $0 } == [])
        let served = store.readsServed
        // What the standby did to each read: a FETCH cancelled (ERROR), or the connection ended
        // between two (FATAL, when the read was idle in its transaction).
        let log = (try? String(contentsOfFile: servers.dir + "/standby.log", encoding: .utf8)) ?? ""
        func lines(_ text: String) -> Int { log.components(separatedBy: text).count - 1 }
        print("recovery conflicts under paged reads: \(try conflicts() - conflictsBefore) on the standby "
            + "(\(lines("ERROR:  canceling statement due to conflict with recovery")) statements cancelled, "
            + "\(lines("FATAL:  terminating connection due to conflict with recovery")) connections ended), "
            + "\(reads.load(ordering: .relaxed)) reads, the standby served \(served.standbys - started.standbys), "
            + "the primary \(served.primary - started.primary)")
        #expect(served.primary > started.primary, "no read ran again on the primary: \(served)")
    }
}
#endif
