import BenchSupport
import DataStoreAPI
import ForeignStores
import Foundation
import StoreMigration

/// A Realm file of `n` items and `n / 1000` owners (Scripts/realm-make.py: each owner lists its
/// items in order) read through the `realm:` source and copied into LMDB and PostgreSQL, next to
/// a raw Swift loop over the file's bytes that knows the generator's layout (it walks the Item
/// table's cluster tree and decodes every column of every item, trusting every reference and
/// width, as a C program written for that one file would); and the same file encrypted, read
/// next to the plain one.
@MainActor func benchmarkRealm(n: Int) throws {
    let directory = scratch("realm")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let file = directory + "/items.realm", encrypted = directory + "/items-encrypted.realm"
    let key = directory + "/items.key"
    try Data((0..<64).map { UInt8($0 * 7 & 0xFF) }).write(to: URL(fileURLWithPath: key))
    let make = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Scripts/realm-make.py").path
    for (path, keyed) in [(file, false), (encrypted, true)] {
        let command = "python3 '\(make)' '\(path)' --items \(n)" + (keyed ? " --key-file '\(key)'" : "")
        precondition(system(command) == 0, "\(command) failed")
    }
    var rows = 0
    let raw = bestOf(3) { rows = rawRealmRead(file) }
    check(rows, n, "items the raw loop read")
    let source = StoreLocation(kind: .realm, path: file)
    var read = 0
    record("Realm", "open and read every item (forEach) vs raw Swift loop over the file", n, operations: n,
           api: try bestOf(3) {
               let store = try source.openSource()
               read = 0
               try store.read { try $0.forEach(FetchRequest("Item")) { _ in read += 1 } }
               try store.close()
           }, raw: raw, memory: false)
    check(read, n, "items read")
    let encryptedSource = StoreLocation(kind: .realm, path: encrypted + "?keyfile=" + key)
    let plainRead = try bestOf(3) { try source.openSource().close() }
    record("Realm", "open the encrypted file vs the same file unencrypted", n, operations: n,
           api: try bestOf(3) { try encryptedSource.openSource().close() }, raw: plainRead, memory: false)
    let copy = { (destination: StoreLocation, name: String) in
        try? destination.destroy()
        record("Realm", "-> \(name) (Migrator.copy, no verify) vs raw Swift loop over the file", n, operations: n,
               api: try time {
                   _ = try Migrator.copy(from: source, to: destination,
                                         options: MigrationOptions(batchSize: 10_000, verify: false, checkSource: false))
               }, raw: raw, memory: false)
        try destination.destroy()
    }
    try copy(StoreLocation(kind: .lmdb, path: directory + "/items.lmdb"), "LMDB")
    try killAndResume(encryptedSource, into: StoreLocation(kind: .lmdb, path: directory + "/killed.lmdb"), n: n)
    if !options.noPostgres { try copy(try StoreLocation(parsing: postgresURL("bench_realm")), "PostgreSQL") }
}

/// Reads every column of every Item of a file Scripts/realm-make.py wrote, straight from its
/// bytes: the top array, the tables, the Item table's cluster tree, and in each leaf the eight
/// value columns (ints, strings of the medium form, doubles, bools, timestamps, nullable ints,
/// links). Returns the number of items.
func rawRealmRead(_ path: String) -> Int {
    let data = FileManager.default.contents(atPath: path)!
    return data.withUnsafeBytes { (file: UnsafeRawBufferPointer) -> Int in
        func header(_ ref: Int) -> (flags: UInt8, width: Int, count: Int) {
            let flags = file[ref + 4]
            return (flags, (1 << Int(flags & 7)) >> 1, Int(file[ref + 5]) << 16 | Int(file[ref + 6]) << 8 | Int(file[ref + 7]))
        }
        func element(_ ref: Int, _ i: Int) -> Int64 {
            let width = header(ref).width
            let at = ref + 8
            switch width {
            case 0: return 0
            case 1, 2, 4: return Int64(file[at + i * width / 8] >> UInt8(i * width % 8)) & ((1 << Int64(width)) - 1)
            case 8: return Int64(Int8(bitPattern: file[at + i]))
            case 16: return Int64(file.loadUnaligned(fromByteOffset: at + 2 * i, as: Int16.self))
            case 32: return Int64(file.loadUnaligned(fromByteOffset: at + 4 * i, as: Int32.self))
            default: return file.loadUnaligned(fromByteOffset: at + 8 * i, as: Int64.self)
            }
        }
        var sum: Int64 = 0, bytes = 0, real = 0.0, items = 0
        func strings(_ leaf: Int, _ count: Int) {
            let ends = Int(element(leaf, 0)), blob = Int(element(leaf, 1)), nulls = Int(element(leaf, 2))
            var start = 0
            for i in 0..<count {
                let end = Int(element(ends, i))
                if element(nulls, i) == 0 { bytes += end - start - 1; sum &+= Int64(file[blob + 8 + start]) }
                start = end
            }
        }
        func visit(_ node: Int) {
            let (flags, _, count) = header(node)
            if flags & 0x80 != 0 {
                for child in 3..<count { visit(Int(element(node, child))) }
                return
            }
            let n = Int(element(node, 0) >> 1)
            let ids = Int(element(node, 1)), prices = Int(element(node, 3)), active = Int(element(node, 4))
            let created = Int(element(node, 5)), counts = Int(element(node, 7)), owners = Int(element(node, 8))
            strings(Int(element(node, 2)), n)
            strings(Int(element(node, 6)), n)
            let seconds = Int(element(created, 0)), nanos = Int(element(created, 1))
            let noCount = element(counts, 0)
            for i in 0..<n {
                sum &+= element(ids, i) &+ element(active, i) &+ element(seconds, i + 1) &+ element(nanos, i)
                    &+ element(owners, i)
                let count = element(counts, i + 1)
                if count != noCount { sum &+= count }
                real += file.loadUnaligned(fromByteOffset: prices + 8 + 8 * i, as: Double.self)
            }
            items += n
        }
        let top = Int(file.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
        let tables = Int(element(top, 1))
        let itemTable = Int(element(tables, 0))
        visit(Int(element(itemTable, 2)))
        precondition(sum != 42 || bytes != 42 || real != 42)
        return items
    }
}

/// The encrypted file copied into LMDB by a child process (this program, `--realm-copy-child`),
/// killed with SIGKILL once it reports a quarter of the items committed, then resumed and
/// verified in this process: the copy must be exact.
@MainActor func killAndResume(_ source: StoreLocation, into destination: StoreLocation, n: Int) throws {
    let child = Process()
    child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    child.arguments = ["--realm-copy-child", source.description + "\n" + destination.description]
    let output = Pipe()
    child.standardOutput = output
    let started = Date()
    try child.run()
    var seen = "", committed = 0
    while committed < n / 4 {
        let chunk = output.fileHandleForReading.availableData
        precondition(!chunk.isEmpty, "the copy ended before it was killed: \(seen)")
        seen += String(decoding: chunk, as: UTF8.self)
        committed = seen.split(separator: "\n").compactMap { Int($0) }.last ?? 0
    }
    kill(child.processIdentifier, SIGKILL)
    child.waitUntilExit()
    let killedAfter = Date().timeIntervalSince(started)
    let resumeStarted = Date()
    let resumed = try Migrator.copy(from: source, to: destination,
                                    options: MigrationOptions(batchSize: 10_000, resume: true, checkSource: false))
    let resumeSeconds = Date().timeIntervalSince(resumeStarted)
    let verified = try Migrator.verify(from: source, to: destination, options: MigrationOptions(checkSource: false))
    precondition(resumed.verified && verified.differences == 0, "the resumed copy differs from the file")
    let items = verified.entities.map(\.itemsVerified).reduce(0, +)
    FileHandle.standardError.write(Data(String(format: "Realm %d items, encrypted, into LMDB: killed with SIGKILL "
        + "after %.1f s with %d Item committed; --resume finished in %.1f s; verify: %d items, 0 differences\n",
        n, killedAfter, committed, resumeSeconds, items).utf8))
    realmResumeLines.append(String(format: "| %d | %d | %.1f s | %.1f s | %d | 0 |", n, committed, killedAfter,
                                   resumeSeconds, items))
    try destination.destroy()
}

@MainActor var realmResumeLines: [String] = []

/// The child of ``killAndResume``: copies `SOURCE\nDESTINATION`, printing the items of Item
/// committed after each batch.
func runRealmCopyChild(_ arguments: String) -> Never {
    let parts = arguments.split(separator: "\n").map(String.init)
    do {
        _ = try Migrator.copy(from: try StoreLocation(parsing: parts[0]), to: try StoreLocation(parsing: parts[1]),
                              options: MigrationOptions(batchSize: 10_000, verify: false, checkSource: false),
                              progress: { if $0.phase == .copy, $0.entity == "Item" { FileHandle.standardOutput.write(Data("\($0.done)\n".utf8)) } })
    } catch {
        FileHandle.standardError.write(Data("realm copy child: \(error)\n".utf8))
        exit(1)
    }
    exit(0)
}
