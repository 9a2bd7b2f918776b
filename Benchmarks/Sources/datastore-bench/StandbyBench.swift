import BenchSupport
@_spi(Backend) import DataStoreAPI
import Foundation
@_spi(Backend) import PostgresStore
import Synchronization

/// Reads from a standby against reads from the primary alone: a primary and an asynchronous
/// streaming standby of their own (`Scripts/postgres-replicas.sh`, on loopback, both on this
/// machine's cores), `readers` threads each reading one item by key in a loop for `seconds`, and
/// one writer thread committing an update every 10 ms through the same store (so that
/// read-your-writes has commits to wait for). The setups take turns, `rounds` times each, so that
/// a drift of the machine's speed (server and client share 2 cores) falls on all of them alike;
/// each round begins with the next setup (the first of one round is the second of the next), and
/// the clock starts a quarter of a second after the readers (once their connections are open).
/// Prints one row per setup: reads per second over all its rounds, and how many of them the
/// primary served (the store's count, and `pg_stat_database` per server, summed over the rounds).
func benchmarkStandbyReads(readers: Int = 16, items: Int = 10_000, seconds: Double = 2.5, rounds: Int = 6,
                           keys: [StoreKey?] = [nil]) throws {
    let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Scripts/postgres-replicas.sh").path
    let dir = scratch("replicas")
    try? FileManager.default.removeItem(atPath: dir)
    let primaryPort = Int.random(in: 40_000..<50_000), standbyPort = primaryPort + 1
    guard system("/bin/bash '\(script)' start '\(dir)' \(primaryPort) \(standbyPort) async >/dev/null") == 0 else {
        FileHandle.standardError.write(Data("datastore-bench: the primary and standby did not start (\(script))\n".utf8))
        exit(1)
    }
    defer { _ = system("/bin/bash '\(script)' stop '\(dir)' >/dev/null 2>&1") }
    let schema = Schema(entities: [EntitySchema("Item", primaryKey: "id", attributes: [
        Attribute("id", .int), Attribute("name", .string), Attribute("score", .int),
    ])])
    for key in keys {
        let base = "postgres://postgres@127.0.0.1:\(primaryPort)/datastore?schema=reads" + (key == nil ? "" : "_encrypted")
        let seed = try PostgresStore(url: base, schema: schema, key: key)
        try seed.writeSync { w in
            try w.insert(contentsOf: (0..<items).map { ["id": .int(Int64($0)), "name": .string("item \($0)"), "score": .int(Int64($0))] },
                         into: "Item")
        }
        try seed.close()
    }

    /// `pg_stat_database`'s committed transactions of the database on the server at `port`.
    func committed(_ port: Int) -> Int {
        let pipe = Pipe()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        process.arguments = ["-h", "127.0.0.1", "-p", "\(port)", "-U", "postgres", "-d", "datastore", "-Atc",
                             "SELECT xact_commit FROM pg_stat_database WHERE datname = 'datastore'"]
        process.standardOutput = pipe
        try? process.run()
        process.waitUntilExit()
        let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    print("")
    print("| PostgreSQL, \(readers) readers of one item by key, a writer committing every 10 ms | reads/s | "
        + "vs the primary alone | primary's share (store) | primary's transactions (pg_stat_database) | "
        + "standby's transactions |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    struct Totals {
        var reads = 0, seconds = 0.0, primaryReads = 0, standbyReads = 0, primaryCommits = 0, standbyCommits = 0
    }
    for key in keys {
        let base = "postgres://postgres@127.0.0.1:\(primaryPort)/datastore?schema=reads" + (key == nil ? "" : "_encrypted")
        let suffix = key == nil ? "" : ", encrypted"
        let setups = [("primary alone" + suffix, ""),
                      ("one standby, read-your-writes on" + suffix, "&read_hosts=127.0.0.1:\(standbyPort)"),
                      ("one standby, read-your-writes off" + suffix,
                       "&read_hosts=127.0.0.1:\(standbyPort)&read_your_writes=off")]
        var totals = [Totals](repeating: Totals(), count: setups.count)
        for round in 0..<rounds {
            for turn in 0..<setups.count {
                let setup = (round + turn) % setups.count
                let extra = setups[setup].1
                let store = try PostgresStore(url: base + extra, schema: schema, readConnections: readers, key: key)
                let stop = Atomic<Bool>(false)
                let reads = Atomic<Int>(0)
                let failures = Atomic<Int>(0)
                let writer = Thread {
                    var n: Int64 = 0
                    while !stop.load(ordering: .relaxed) {
                        n += 1
                        do { try store.writeSync { try $0.save(["id": 0, "name": "item 0", "score": .int(n)], into: "Item") } } catch {
                            failures.add(1, ordering: .relaxed)
                        }
                        usleep(10_000)
                    }
                }
                let threads = (0..<readers).map { r in
                    Thread {
                        var key = Int64(r)
                        while !stop.load(ordering: .relaxed) {
                            key = (key &* 7 &+ 13) % Int64(items)
                            do {
                                _ = try store.read { try $0.get("Item", key: .int(key)) }
                                reads.add(1, ordering: .relaxed)
                            } catch {
                                failures.add(1, ordering: .relaxed)
                            }
                        }
                    }
                }
                writer.start()
                for thread in threads { thread.start() }
                // The clock starts once the readers run: a new store's first reads each start a
                // server backend, which is not what the row measures.
                usleep(250_000)
                let (primaryBefore, standbyBefore) = (committed(primaryPort), committed(standbyPort))
                let servedBefore = store.readsServed
                let readsBefore = reads.load(ordering: .relaxed)
                let start = ContinuousClock.now
                usleep(UInt32(seconds * 1_000_000))
                let readsAfter = reads.load(ordering: .relaxed)
                let elapsed = ContinuousClock.now - start
                let served = store.readsServed
                let (primaryAfter, standbyAfter) = (committed(primaryPort), committed(standbyPort))
                stop.store(true, ordering: .relaxed)
                while threads.contains(where: { !$0.isFinished }) || !writer.isFinished { usleep(1_000) }
                try store.close()
                precondition(failures.load(ordering: .relaxed) == 0, "\(failures.load(ordering: .relaxed)) reads or writes failed")
                totals[setup].reads += readsAfter - readsBefore
                totals[setup].seconds += Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                totals[setup].primaryReads += served.primary - servedBefore.primary
                totals[setup].standbyReads += served.standbys - servedBefore.standbys
                totals[setup].primaryCommits += primaryAfter - primaryBefore
                totals[setup].standbyCommits += standbyAfter - standbyBefore
            }
        }
        let alone = Double(totals[0].reads) / totals[0].seconds
        for ((label, _), total) in zip(setups, totals) {
            let rate = Double(total.reads) / total.seconds
            print(String(format: "| %@ | %.0f | %.2f | %.1f %% | %d | %d |", label, rate, rate / alone,
                         100 * Double(total.primaryReads) / Double(max(1, total.primaryReads + total.standbyReads)),
                         total.primaryCommits, total.standbyCommits))
        }
    }
}
