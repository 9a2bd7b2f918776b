@_spi(Backend) import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
@_spi(Backend) @testable import SQLiteStore
import Synchronization
import Testing

@Test func readsBeyondTheReaderPoolWaitABoundedTimeThenFailWithBusy() throws {
    let dir = try TemporaryDirectory()
    let store = try SQLiteStore(
        path: dir.path("pool.sqlite"), schema: itemSchema,
        options: SQLiteOptions(maxReaders: 2, readerTimeout: .milliseconds(200)))
    try seed(store, 5)
    let release = DispatchSemaphore(value: 0)
    let holding = DispatchSemaphore(value: 0)
    let finished = DispatchSemaphore(value: 0)
    for _ in 0..<2 {
        Thread {
            _ = try? store.read { _ in
                holding.signal()
                release.wait()
            }
            finished.signal()
        }.start()
    }
    holding.wait()
    holding.wait()
    let started = Date()
    #expect {
        try store.read { try $0.count(FetchRequest("Item")) }
    } throws: { ($0 as? StoreError)?.code == .busy && "\($0)".contains("maxReaders") }
    #expect(Date().timeIntervalSince(started) < 5, "the wait is bounded by readerTimeout")
    release.signal()
    release.signal()
    finished.wait()
    finished.wait()
    #expect(
        try store.read { try $0.count(FetchRequest("Item")) } == 5, "reads work again once readers finish")
    try store.close()
}

@Test func requestsOfManyShapesKeepTheStatementCacheBounded() throws {
    let dir = try TemporaryDirectory()
    let store = try SQLiteStore(path: dir.path("cache.sqlite"), schema: itemSchema)
    try seed(store, 20)
    let before = store.sqlite.cachedStatementCount
    try store.writeSync { writer in
        for n in 1...2_000 {
            let request = FetchRequest("Item", filter: Field("score").among((0..<n).map { .int(Int64($0)) }))
            #expect(try writer.count(request) == min(n, 20))
            _ = try writer.fetch(
                FetchRequest("Item", filter: Field("name").hasPrefix(String(repeating: "n", count: n))))
        }
    }
    #expect(store.sqlite.cachedStatementCount <= before + SQLiteConnection.requestStatementLimit,
            "the cache of per-request statements stays at its bound")
    try store.close()
}

/// Closing closes every connection, the writer included: SQLite then removes the WAL and
/// shared-memory files, as it does when the last connection to a WAL database closes (before,
/// the writer stayed open and they stayed behind).
@Test func closingClosesTheWriterSoTheWALFilesGo() throws {
    let dir = try TemporaryDirectory()
    let path = dir.path("closed.sqlite")
    let store = try SQLiteStore(path: path, schema: itemSchema)
    try seed(store, 50)
    #expect(try store.read { try $0.count(FetchRequest("Item")) } == 50)
    try store.close()
    #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
    #expect(try runCommand("/usr/bin/sqlite3", [path, "SELECT count(*) FROM Item"]) == "50\n")
}
