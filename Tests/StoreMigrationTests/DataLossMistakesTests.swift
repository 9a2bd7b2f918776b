@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
import JSONLStore
@testable import StoreMigration
import Testing

/// The mistakes that lose data: an empty input imported, `--overwrite` pointed at a
/// user's files, one store under two names. Each is tried through the CLI as a user types it,
/// on every kind of store that is a file or a directory, and through the library where it has
/// the same operation: nothing deleted, one line naming what is wrong, exit 2.

private func items(_ location: StoreLocation) throws -> [String: Int] {
    let store = try location.openSource()
    defer { try? store.close() }
    return try store.read { r in
        var counts: [String: Int] = [:]
        for entity in store.schema.entities { counts[entity.name] = try r.count(FetchRequest(entity.name)) }
        return counts
    }
}

/// Every file under `path` (a file or a directory) with its bytes, sorted by path.
private func snapshot(_ path: String) -> [String: [UInt8]] {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return [:] }
    guard isDirectory.boolValue else { return [path: Array((try? Data(contentsOf: URL(fileURLWithPath: path))) ?? Data())] }
    var result: [String: [UInt8]] = [:]
    let entries = (FileManager.default.subpaths(atPath: path) ?? []).sorted()
    for entry in entries {
        let full = path + "/" + entry
        var sub: ObjCBool = false
        _ = FileManager.default.fileExists(atPath: full, isDirectory: &sub)
        result[entry] = sub.boolValue ? [] : Array((try? Data(contentsOf: URL(fileURLWithPath: full))) ?? Data())
    }
    return result
}

private func expectOneLineRefusal(_ result: CommandResult, naming: String, _ what: String,
                                  sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(result.status == 2, "\(what): exit \(result.status): \(result.errors)", sourceLocation: sourceLocation)
    let lines = result.errors.split(separator: "\n")
    #expect(lines.count == 1, "\(what): \(result.errors)", sourceLocation: sourceLocation)
    #expect(result.errors.contains(naming), "\(what): \(result.errors)", sourceLocation: sourceLocation)
}

// MARK: 1. An input with no JSON value

@Test(arguments: [StoreKind.sqlite, .lmdb])
func anEmptyImportIsRefusedAndDeletesNothing(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let store = dir.location(kind, "store")
    try DemoData.seed(store, items: 300, seed: 5)
    let before = try items(store)
    #expect(before["Product"] == 30)
    for (name, text) in [("empty.json", ""), ("blank.json", " \n\t\n  "), ("blank.jsonl", "\n\n")] {
        let file = dir.path(name)
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        for extra in [[], ["--dry-run"], ["--keep-missing"]] {
            let result = try runCLI(["import", file, "--to", store.description, "--entity", "Product"] + extra)
            expectOneLineRefusal(result, naming: "holds no JSON value", "\(name) \(extra)")
            #expect(result.errors.contains("[]"), "the message says how to delete every item: \(result.errors)")
        }
        #expect(try items(store) == before, "\(name): nothing deleted")
        // The library refuses it the same way.
        let opened = try store.open(schema: nil)
        defer { try? opened.close() }
        #expect {
            try JSONImport.run(file, into: opened, entity: "Product")
        } throws: { ($0 as? StoreError)?.code == .invalidValue && "\($0)".contains("holds no JSON value") }
    }
    #expect(try items(store) == before)
    // A folder given for the file is named as one.
    let folder = try runCLI(["import", dir.url.path, "--to", store.description, "--entity", "Product"])
    expectOneLineRefusal(folder, naming: "is a folder", "a folder")
    // An explicit empty array is the way to empty the entity: it still works.
    let emptyArray = dir.path("none.json")
    try Data("[]".utf8).write(to: URL(fileURLWithPath: emptyArray))
    let emptied = try runCLI(["import", emptyArray, "--to", store.description, "--entity", "Product"])
    #expect(emptied.status == 0, "\(emptied.errors)")
    #expect(try items(store)["Product"] == 0)
}

/// An input none of whose values names an item (JSON `null`, an object wrapping the array, objects
/// without the key) is the wrong input: refused before anything is deleted, with or without a dry
/// run. With `--keep-missing` nothing would be deleted anyway, and the rejections are reported.
@Test func anImportWhoseValuesNameNoItemDeletesNothing() throws {
    let dir = try TemporaryDirectory()
    let store = dir.location(.sqlite, "store")
    try DemoData.seed(store, items: 300, seed: 6)
    let before = try items(store)
    let inputs = [
        ("null.json", "null"),
        ("wrapped.json", #"{"data": [{"sku": "P-0001", "title": "x"}]}"#),
        ("keyless.json", #"[{"title": "x"}, {"title": "y"}]"#),
        ("nulls.jsonl", "null\nnull\n"),
    ]
    for (name, text) in inputs {
        let file = dir.path(name)
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        for extra in [[], ["--dry-run"]] {
            let result = try runCLI(["import", file, "--to", store.description, "--entity", "Product"] + extra)
            expectOneLineRefusal(result, naming: "by its key", "\(name) \(extra)")
            #expect(result.errors.contains("nothing was imported or deleted") && result.errors.contains("[]"),
                    "\(name): \(result.errors)")
        }
        #expect(try items(store) == before, "\(name): nothing deleted")
        let kept = try runCLI(["import", file, "--to", store.description, "--entity", "Product", "--keep-missing"])
        #expect(kept.status != 0 || kept.output.contains("rejected"), "\(name): \(kept.output) \(kept.errors)")
        #expect(try items(store) == before, "\(name) --keep-missing: nothing deleted")
        // The library refuses it the same way.
        let opened = try store.open(schema: nil)
        #expect {
            try JSONImport.run(file, into: opened, entity: "Product")
        } throws: { ($0 as? StoreError)?.code == .invalidValue && "\($0)".contains("by its key") }
        try opened.close()
        #expect(try items(store) == before)
    }
}

/// An input in which only some values name an item by its key (a key misspelt in part of the
/// file, `null` or a number in the array) deletes nothing: any stored item may be the one such a
/// value meant. The keyed objects are imported, the rest reported, exit 2.
@Test func anImportWithSomeValuesWithoutTheKeyDeletesNothing() throws {
    let dir = try TemporaryDirectory()
    let store = dir.location(.sqlite, "store")
    try DemoData.seed(store, items: 300, seed: 6)
    let before = try items(store)
    let misspelt = ([#"{"sku": "SKU-000001", "title": "renamed"}"#]
        + (2...30).map { #"{"SKU": "SKU-\#($0)", "title": "x"}"# })
    let inputs = [
        ("misspelt.json", "[" + misspelt.joined(separator: ",") + "]"),
        ("mixed.json", #"[{"sku": "SKU-000001", "title": "renamed"}, null, 5, "x"]"#),
    ]
    for (name, text) in inputs {
        let file = dir.path(name)
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        let dry = try runCLI(["import", file, "--to", store.description, "--entity", "Product", "--dry-run"])
        #expect(dry.status == 2, "\(name) --dry-run: \(dry.errors)")
        #expect(dry.output.contains("0 would be deleted"), "\(name): \(dry.output)")
        #expect(dry.errors.contains("the Product items the input leaves out would not be deleted")
            && dry.errors.contains("by its key"), "\(dry.errors)")
        let result = try runCLI(["import", file, "--to", store.description, "--entity", "Product"])
        #expect(result.status == 2, "\(name): \(result.errors)")
        #expect(result.output.contains("0 deleted, 0 inserted, 1 updated")
                || result.output.contains("0 deleted, 0 inserted, 0 updated, 1 unchanged"), "\(name): \(result.output)")
        #expect(result.errors.contains("were not deleted") && result.errors.contains("--keep-missing"),
                "\(name): \(result.errors)")
        #expect(try items(store) == before, "\(name): nothing deleted")
        // The library reports it, and deletes nothing either.
        let opened = try store.open(schema: nil)
        let report = try JSONImport.run(file, into: opened, entity: "Product")
        try opened.close()
        #expect(report.deleted == 0 && report.deletesSkipped?.contains("by its key") == true, "\(report)")
        #expect(try items(store) == before)
    }
}

/// What delete rules delete with the items an import leaves out is counted under its own entity,
/// in the dry run and in the run.
@Test func anImportCountsWhatDeleteRulesDeleteWithTheItemsItLeavesOut() throws {
    let dir = try TemporaryDirectory()
    let store = dir.location(.sqlite, "store")
    try DemoData.seed(store, items: 500, seed: 8)
    let opened = try store.open(schema: nil)
    let (keep, orders): ([String], Int) = try opened.read { r in
        let customers = try r.fetch(FetchRequest("Customer", sort: [.ascending("id")]))
        let gone = customers.prefix(5).map { $0["id"] }
        let orders = try gone.reduce(0) { $0 + (try r.count(FetchRequest("Order", filter: .compare("customer", .equal, $1)))) }
        let kept = customers.dropFirst(5).map { customer -> String in
            guard case .uuid(let id) = customer["id"] else { return "" }
            return #"{"id": "\#(id.uuidString)"}"#
        }
        return (kept, orders)
    }
    try opened.close()
    #expect(orders > 0, "the customers left out have orders")
    let before = try items(store)
    let file = dir.path("customers.json")
    try Data(("[" + keep.joined(separator: ",") + "]").utf8).write(to: URL(fileURLWithPath: file))
    for extra in [["--dry-run"], []] {
        let would = extra.isEmpty ? "" : "would be "
        let result = try runCLI(["import", file, "--to", store.description, "--entity", "Customer"] + extra)
        #expect(result.status == 0, "\(extra): \(result.errors)")
        #expect(result.output.contains("5 \(would)deleted"), "\(extra): \(result.output)")
        #expect(result.output.contains("  Order: \(orders) \(would)deleted"), "\(extra): \(result.output)")
    }
    let after = try items(store)
    #expect(after["Customer"] == before["Customer"]! - 5 && after["Order"] == before["Order"]! - orders)
}

// MARK: 2. --overwrite on what is not a store

@Test(arguments: [StoreKind.sqlite, .lmdb, .jsonl])
func overwriteRefusesWhatIsNotAStoreOfItsKind(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    try DemoData.seed(source, items: 200, seed: 7)
    let fileKind = kind != .lmdb
    let notAFileStore = kind == .sqlite ? "does not open" : kind == .jsonl ? "not a jsonl store" : "is a file"
    // What a user may have at the path they mistyped.
    var cases: [(what: String, make: (String) throws -> Void, naming: String)] = [
        ("a text file", { path in try Data("my notes\n".utf8).write(to: URL(fileURLWithPath: path)) },
         notAFileStore),
        ("a folder of a user's files", { path in
            try FileManager.default.createDirectory(atPath: path + "/sub", withIntermediateDirectories: true)
            try Data("keep me".utf8).write(to: URL(fileURLWithPath: path + "/canary.txt"))
            try Data("x".utf8).write(to: URL(fileURLWithPath: path + "/sub/x"))
        }, "canary.txt"),
        ("a plain SQLite database of another program", { path in
            _ = try runCommand("/usr/bin/sqlite3", [path, "CREATE TABLE t(x); INSERT INTO t VALUES (1);"])
        }, notAFileStore),
    ]
    if kind == .lmdb {
        // A real store with a user's file put beside data.mdb.
        cases.append(("an LMDB store with a user's file in its folder", { path in
            _ = try Migrator.copy(from: source, to: StoreLocation(kind: .lmdb, path: path))
            try Data("keep me".utf8).write(to: URL(fileURLWithPath: path + "/canary.txt"))
        }, "canary.txt"))
    }
    for (index, mistake) in cases.enumerated() {
        let path = dir.path("target\(index).\(kind.rawValue)")
        try mistake.make(path)
        let before = snapshot(path)
        let result = try runCLI(["copy", "--from", source.description, "--to", "\(kind):\(path)", "--overwrite"])
        expectOneLineRefusal(result, naming: mistake.naming, mistake.what)
        #expect(result.errors.contains("not replaced"), "\(mistake.what): \(result.errors)")
        #expect(snapshot(path) == before, "\(mistake.what): untouched")
        // The library's copy refuses the same way.
        #expect {
            try Migrator.copy(from: source, to: StoreLocation(kind: kind, path: path),
                              options: MigrationOptions(overwrite: true))
        } throws: { ($0 as? StoreError)?.code == .invalidArgument }
        #expect(snapshot(path) == before, "\(mistake.what): untouched by the library")
        if kind != .jsonl {
            let seed = try runCLI(["seed", "--to", "\(kind):\(path)", "--items", "10", "--overwrite"])
            expectOneLineRefusal(seed, naming: "not replaced", "seed over \(mistake.what)")
            #expect(snapshot(path) == before, "\(mistake.what): untouched by seed")
        }
    }
    // What --overwrite does replace: a store of the kind, an empty file, an empty folder.
    let store = dir.location(kind, "store")
    _ = try Migrator.copy(from: source, to: store)
    let emptyFile = dir.path("empty-file.\(kind.rawValue)")
    let emptyFolder = dir.path("empty-folder.\(kind.rawValue)")
    if fileKind {
        _ = FileManager.default.createFile(atPath: emptyFile, contents: Data())
    } else {
        try FileManager.default.createDirectory(atPath: emptyFolder, withIntermediateDirectories: false)
    }
    for target in [store.path, fileKind ? emptyFile : emptyFolder] {
        let result = try runCLI(["copy", "--from", source.description, "--to", "\(kind):\(target)", "--overwrite"])
        #expect(result.status == 0, "\(target): \(result.errors)")
        #expect(try items(StoreLocation(kind: kind, path: target)) == items(source))
    }
}

/// A copy stages its destination at `PATH.migrating`: a user's file of that name is refused in one
/// line and left as it was (with or without --overwrite); a leftover of an interrupted copy there
/// is replaced as before.
@Test(arguments: [StoreKind.sqlite, .lmdb, .jsonl])
func aUsersFileAtTheStagingPathIsNotReplaced(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    try DemoData.seed(source, items: 100, seed: 4)
    let destination = dir.location(kind, "target")
    let staging = destination.path + ".migrating"
    try Data("my notes, not a store\n".utf8).write(to: URL(fileURLWithPath: staging))
    let before = snapshot(staging)
    for extra in [[], ["--overwrite"]] {
        let result = try runCLI(["copy", "--from", source.description, "--to", destination.description] + extra)
        expectOneLineRefusal(result, naming: ".migrating is not replaced", "\(kind) \(extra)")
        #expect(snapshot(staging) == before, "\(kind) \(extra): the user's file is untouched")
        #expect(!FileManager.default.fileExists(atPath: destination.path))
    }
    // An empty file there (or a copy's leftover, which a JSON Lines copy takes for an unfinished
    // one) is replaced.
    try Data().write(to: URL(fileURLWithPath: staging))
    let result = try runCLI(["copy", "--from", source.description, "--to", destination.description, "--overwrite"])
    #expect(result.status == 0, "\(result.errors)")
    #expect(try items(destination) == items(source))
}

/// `sqlite3` on `path` running `statements` in a transaction, then killed with SIGKILL by its own
/// `.system` command before it commits: a process that died while it wrote. Its page cache of
/// two pages spills, so SQLite has synced the journal's header and written pages of the
/// database before the kill: the journal it leaves is hot (a journal whose header was never
/// synced is not, and is ignored).
private func sqlite3KilledMidTransaction(_ path: String, _ statements: String) throws {
    let spilling = "PRAGMA cache_size=2; BEGIN; " + statements
        + " CREATE TABLE spill(x); INSERT INTO spill VALUES (zeroblob(200000));"
    _ = try runCommand("/usr/bin/sqlite3", [path, spilling, ".system kill -9 $PPID"], allowingFailure: true)
    let journal = (try? Data(contentsOf: URL(fileURLWithPath: path + "-journal"))) ?? Data()
    #expect(journal.prefix(8) == Data([0xD9, 0xD5, 0x05, 0xF9, 0x20, 0xA1, 0x63, 0xD7]), "\(path): a hot journal is left")
}

/// A copy killed while it created its destination leaves what the next copy replaces: its
/// staged store with the hot journal of a transaction cut short (the switch to WAL mode, which a
/// read-only open cannot roll back), a file whose creating transaction never committed, an LMDB
/// environment no transaction wrote to. Until 7 December 2026 each was refused as "not a store
/// of this toolkit" by every later copy, a switch of a running app included. A user's database
/// with a hot journal is rolled back to its last commit and still refused.
@Test func whatAKilledCopyLeftAtTheStagingPathIsReplaced() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    try DemoData.seed(source, items: 100, seed: 4)
    func copy(to destination: StoreLocation) throws -> CommandResult {
        try runCLI(["copy", "--from", source.description, "--to", destination.description])
    }
    // A store of this toolkit at the staging path, in rollback mode as a new one is until its
    // tables exist, killed in the middle of a write.
    let staged = dir.location(.sqlite, "staged")
    let stagedStore = StoreLocation(kind: .sqlite, path: staged.path + ".migrating")
    try DemoData.seed(stagedStore, items: 10, seed: 1)
    _ = try runCommand("/usr/bin/sqlite3", [stagedStore.path, "PRAGMA journal_mode=DELETE"])
    try sqlite3KilledMidTransaction(stagedStore.path, "DELETE FROM _ds_meta;")
    var result = try copy(to: staged)
    #expect(result.status == 0, "a staged store with a hot journal: \(result.errors)")
    #expect(try items(staged) == items(source))
    #expect(!FileManager.default.fileExists(atPath: stagedStore.path + "-journal"))
    // A new file whose first transaction was killed.
    let unborn = dir.location(.sqlite, "unborn")
    try sqlite3KilledMidTransaction(unborn.path + ".migrating", "CREATE TABLE t(x);")
    result = try copy(to: unborn)
    #expect(result.status == 0, "a file whose creation was killed: \(result.errors)")
    #expect(try items(unborn) == items(source))
    // An LMDB environment created with no transaction committed in it but an empty one.
    let empty = dir.location(.lmdb, "empty")
    let environment = empty.path + ".migrating"
    try FileManager.default.createDirectory(atPath: environment, withIntermediateDirectories: false)
    let input = dir.path("empty.dump")
    try Data("VERSION=3\nformat=bytevalue\ntype=btree\nHEADER=END\nDATA=END\n".utf8).write(to: URL(fileURLWithPath: input))
    _ = try runCommand("/usr/bin/mdb_load", ["-f", input, environment])
    result = try copy(to: empty)
    #expect(result.status == 0, "an LMDB environment with no database: \(result.errors)")
    #expect(try items(empty) == items(source))
    // A user's database with a row, killed in the middle of a write, at the staging path: rolled
    // back, refused, its committed row kept.
    let users = dir.location(.sqlite, "users")
    let usersFile = users.path + ".migrating"
    _ = try runCommand("/usr/bin/sqlite3", [usersFile, "CREATE TABLE mine(x); INSERT INTO mine VALUES ('precious');"])
    try sqlite3KilledMidTransaction(usersFile, "DELETE FROM mine;")
    result = try copy(to: users)
    expectOneLineRefusal(result, naming: ".migrating is not replaced", "a user's database")
    #expect(try runCommand("/usr/bin/sqlite3", [usersFile, "SELECT x FROM mine; SELECT count(*) FROM sqlite_master;"])
            == "precious\n1\n")
}

/// What `--overwrite` finds at a destination is never written to, a dry run's included: a
/// user's database with a hot journal (which a copy's own staged file has rolled back), a store
/// whose first page lost its schema table (it is not taken to hold nothing), an LMDB store whose
/// second meta page names another page size (liblmdb, which trusts it, never opens it).
@Test func overwriteWritesNothingToWhatItRefuses() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    try DemoData.seed(source, items: 100, seed: 4)
    /// Each destination, what its refusal names, and the options it is tried with (a dry run
    /// stages nothing, so what is at a staging path is met by the copies that write).
    var refused: [(StoreLocation, String, [[String]])] = []
    let atTheDestination = [["--overwrite"], ["--overwrite", "--dry-run"]]
    // A user's database, killed mid-write.
    let journaled = dir.location(.sqlite, "journaled")
    _ = try runCommand("/usr/bin/sqlite3", [journaled.path, "CREATE TABLE mine(x); INSERT INTO mine VALUES ('precious');"])
    try sqlite3KilledMidTransaction(journaled.path, "DELETE FROM mine;")
    refused.append((journaled, "is not replaced", atTheDestination))
    // A store of this toolkit whose first page says its schema table is empty.
    let emptied = dir.location(.sqlite, "emptied")
    try DemoData.seed(emptied, items: 100, seed: 2)
    var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: emptied.path)))
    (bytes[103], bytes[104]) = (0, 0)
    try Data(bytes).write(to: URL(fileURLWithPath: emptied.path))
    refused.append((emptied, "is not replaced", atTheDestination))
    // An LMDB store whose second meta page names another page size, at the destination and at
    // the staging path of another destination.
    for (name, staged) in [("damaged", false), ("staged", true)] {
        let store = dir.location(.lmdb, name)
        let at = StoreLocation(kind: .lmdb, path: store.path + (staged ? ".migrating" : ""))
        try DemoData.seed(at, items: 50, seed: 3)
        let file = at.path + "/data.mdb"
        var meta = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        let pageSize = Int(meta[40]) | Int(meta[41]) << 8
        meta[pageSize + 41] ^= 0xFF
        try Data(meta).write(to: URL(fileURLWithPath: file))
        refused.append(staged ? (store, ".migrating is not replaced", [[], ["--overwrite"]])
                              : (store, "is not replaced", atTheDestination))
    }
    for (destination, naming, options) in refused {
        let files = [destination.path, destination.path + "-journal", destination.path + ".migrating"]
        let before = files.map(snapshot)
        for extra in options {
            let result = try runCLI(["copy", "--from", source.description, "--to", destination.description] + extra)
            expectOneLineRefusal(result, naming: naming, "\(destination) \(extra)")
            #expect(files.map(snapshot) == before, "\(destination) \(extra): nothing written")
        }
    }
}

/// LMDB's destroy deletes the store's two files and never a file beside them.
@Test func destroyingAnLMDBStoreKeepsOtherFilesInItsFolder() throws {
    let dir = try TemporaryDirectory()
    let store = dir.location(.lmdb, "store")
    try DemoData.seed(store, items: 50, seed: 1)
    try Data("keep me".utf8).write(to: URL(fileURLWithPath: store.path + "/canary.txt"))
    let before = snapshot(store.path)
    #expect {
        try store.destroy()
    } throws: { ($0 as? StoreError)?.code == .invalidArgument && "\($0)".contains("canary.txt") }
    #expect(snapshot(store.path) == before, "nothing deleted: the store and the user's file")
    try FileManager.default.removeItem(atPath: store.path + "/canary.txt")
    try store.destroy()
    #expect(!FileManager.default.fileExists(atPath: store.path), "an empty folder goes with the store")
}

/// A switch that drops its old LMDB store when it opens keeps one whose directory also holds a
/// user's file (the store no longer serves), rather than failing to open.
@Test func aSwitchKeepsARetiredStoreWhoseDirectoryHoldsAUsersFile() throws {
    let dir = try TemporaryDirectory()
    let store = dir.location(.lmdb, "old")
    try DemoData.seed(store, items: 20, seed: 1)
    try Data("keep me".utf8).write(to: URL(fileURLWithPath: store.path + "/notes.txt"))
    let before = snapshot(store.path)
    try SwitchOpening.dropLeftover(store)
    #expect(snapshot(store.path) == before)
    try FileManager.default.removeItem(atPath: store.path + "/notes.txt")
    try SwitchOpening.dropLeftover(store)
    #expect(!FileManager.default.fileExists(atPath: store.path))
}

/// A destination that is a symbolic link to a store: `--overwrite` replaces the store at that
/// name (the link becomes the new store) and never deletes what the link points to.
@Test(arguments: [StoreKind.sqlite, .lmdb])
func overwritingASymbolicLinkReplacesTheLinkNotItsTarget(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    try DemoData.seed(source, items: 200, seed: 3)
    let target = dir.location(kind, "target")
    try DemoData.seed(target, items: 50, seed: 4)
    let targetItems = try items(target)
    let link = dir.path("link.\(kind.rawValue)")
    try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target.path)
    let result = try runCLI(["copy", "--from", source.description, "--to", "\(kind):\(link)", "--overwrite"])
    #expect(result.status == 0, "\(result.errors)")
    #expect(try items(StoreLocation(kind: kind, path: link)) == items(source))
    #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: link)) == nil, "the link became the store")
    #expect(try items(target) == targetItems, "what the link pointed to is left as it was, on every kind")
}

// MARK: 3. One store under two names

@Test(arguments: [StoreKind.sqlite, .lmdb, .jsonl])
func oneStoreUnderTwoNamesIsRefused(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let seeded = dir.location(.sqlite, "seeded")
    try DemoData.seed(seeded, items: 200, seed: 9)
    let store = dir.location(kind, "b")
    _ = try Migrator.copy(from: seeded, to: store)
    let link = dir.path("link.\(kind.rawValue)")
    try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: store.path)
    var names = ["./b.\(kind.rawValue)", dir.path("sub/../b.\(kind.rawValue)"), link]
    try FileManager.default.createDirectory(atPath: dir.path("sub"), withIntermediateDirectories: false)
    if kind != .lmdb {
        let hard = dir.path("hard.\(kind.rawValue)")
        try FileManager.default.linkItem(atPath: store.path, toPath: hard)
        names.append(hard)
    }
    let before = snapshot(store.path)
    for other in names {
        for command in [["copy", "--overwrite"], ["sync"], ["verify"], ["diff"]] {
            let arguments = [command[0], "--from", "\(kind):\(store.path)", "--to", "\(kind):\(other)"]
                + command.dropFirst()
            let result = try runCLI(arguments, in: dir.url.path)
            expectOneLineRefusal(result, naming: "same store", "\(command[0]) to \(other)")
        }
        // The library, given the same names (a relative one is relative to the process's directory).
        let absolute = other.hasPrefix("/") ? other : dir.path(String(other.dropFirst(2)))
        #expect {
            try Migrator.copy(from: store, to: StoreLocation(kind: kind, path: absolute),
                              options: MigrationOptions(overwrite: true))
        } throws: { ($0 as? StoreError)?.code == .invalidArgument && "\($0)".contains("same store") }
    }
    #expect(snapshot(store.path) == before, "nothing written")
    #expect(StoreLocation(kind: kind, path: store.path).isSameStore(as: StoreLocation(kind: kind, path: link)))
    #expect(!store.isSameStore(as: dir.location(kind, "other")))
}

// MARK: 4. --entities on verify, sync and diff

/// Two equal stores compare equal with `--entities` naming entities related to one left out,
/// and each command restricted to those entities does what the full run does to them.
@Test func entitiesOnVerifySyncAndDiffCompareTheChosenEntitiesOwnSchemas() throws {
    let dir = try TemporaryDirectory()
    let a = dir.location(.sqlite, "a")
    try DemoData.seed(a, items: 400, seed: 11)
    let c = dir.location(.lmdb, "c")
    _ = try Migrator.copy(from: a, to: c)
    for chosen in ["Customer,Order", "Order", "Product", "Customer"] {
        let verify = try runCLI(["verify", "--from", a.description, "--to", c.description, "--entities", chosen])
        #expect(verify.status == 0, "verify --entities \(chosen): \(verify.errors)")
        let diff = try runCLI(["diff", "--from", a.description, "--to", c.description, "--entities", chosen])
        #expect(diff.status == 0, "diff --entities \(chosen): \(diff.errors)")
        let sync = try runCLI(["sync", "--from", a.description, "--to", c.description, "--entities", chosen])
        #expect(sync.status == 0, "sync --entities \(chosen): \(sync.errors)")
        #expect(sync.output.contains("total"), "\(sync.output)")
    }
    // A change in the source: the restricted sync writes it, as the full sync would, and leaves
    // the other entities alone.
    let source = try a.open(schema: nil)
    try source.writeSync { w in
        let order = try #require(try w.fetch(FetchRequest("Order", limit: 1)).first)
        _ = try w.update("Order", key: order["id"], set: ["quantity": 999])
        let customer = try #require(try w.fetch(FetchRequest("Customer", limit: 1)).first)
        _ = try w.update("Customer", key: customer["id"], set: ["name": "Renamed"])
    }
    try source.close()
    let full = dir.location(.lmdb, "full")
    _ = try Migrator.copy(from: c, to: full)
    let restricted = try runCLI(["verify", "--from", a.description, "--to", c.description, "--entities", "Order"])
    #expect(restricted.status == 1, "the changed order is a difference: \(restricted.output)")
    let sync = try runCLI(["sync", "--from", a.description, "--to", c.description, "--entities", "Order"])
    #expect(sync.status == 0, "\(sync.errors)")
    _ = try Migrator.sync(from: a, to: full)
    let synced = try contents(c)
    let whole = try contents(full)
    #expect(synced["Order"] == whole["Order"], "the restricted sync did to Order what the full one did")
    #expect(synced["Customer"] != whole["Customer"], "and left Customer alone")
    let after = try runCLI(["verify", "--from", a.description, "--to", c.description, "--entities", "Order"])
    #expect(after.status == 0, "\(after.output) \(after.errors)")
}

// MARK: 5. A stopped copy's summary

@Test func aStoppedCopysReportCountsTheBatchesItWrote() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    try DemoData.seed(source, items: 3_000, seed: 2)
    let destination = dir.location(.lmdb, "destination")
    var batches = 0
    let stopped = #expect(throws: MigrationInterrupted.self) {
        try Migrator.copy(from: source, to: destination, options: MigrationOptions(batchSize: 100, verify: false),
                          shouldStop: { batches += 1; return batches >= 3 })
    }
    let report = try #require(stopped?.report)
    let written = report.entities.reduce(0) { $0 + $1.itemsWritten }
    #expect(written > 0, "the stopped run wrote batches and says so: \(report.entities)")
    let store = try Migrator.acceptingUnfinished { try destination.open(schema: nil) }
    let stored = try store.read { r in try store.schema.entities.reduce(0) { $0 + (try r.count(FetchRequest($1.name))) } }
    try store.close()
    #expect(written == stored, "the report counts what the destination holds")
}

// MARK: 6. The CLI's smaller promises

@Test func theCLIKeepsItsSmallerPromises() throws {
    let dir = try TemporaryDirectory()
    let a = dir.location(.sqlite, "a")
    try DemoData.seed(a, items: 300, seed: 3)
    _ = try Migrator.copy(from: a, to: dir.location(.lmdb, "b"))
    // Several stores in the folder: inspect and check, which take no --store, do not advise it.
    for command in ["inspect", "check"] {
        let result = try runCLI([command, "sqlite"], in: dir.url.path)
        #expect(result.status == 2, "\(command): \(result.errors)")
        #expect(!result.errors.contains("--store") && result.errors.contains("KIND:PATH"), "\(command): \(result.errors)")
    }
    let copy = try runCLI(["copy", "--from", "sqlite", "--to", "lmdb"], in: dir.url.path)
    #expect(copy.errors.contains("--store"), "copy takes --store and says so: \(copy.errors)")
    // --version.
    let version = try runCLI(["--version"])
    #expect(version.status == 0 && version.output.hasPrefix("1."), "\(version.output) \(version.errors)")
    // The top-level help names every kind.
    let help = try runCLI(["--help"])
    for kind in ["sqlite:", "lmdb:", "jsonl:", "memory:", "postgres:", "coredata:", "plain-sqlite:"] {
        #expect(help.output.contains(kind), "--help names \(kind)")
    }
    // copy --dry-run says it is one.
    let dry = try runCLI(["copy", "--from", a.description, "--to", dir.location(.lmdb, "dry").description, "--dry-run"])
    #expect(dry.status == 0, "\(dry.errors)")
    #expect(dry.output.split(separator: "\n").first?.contains("(dry run: nothing written)") == true, "\(dry.output)")
    #expect(!FileManager.default.fileExists(atPath: dir.location(.lmdb, "dry").path))
    // import takes --progress, as every long command does.
    let json = dir.path("products.json")
    try Data(#"[{"sku": "new-1", "title": "t", "price": 1.5, "stock": 2}]"#.utf8).write(to: URL(fileURLWithPath: json))
    let imported = try runCLI(["import", json, "--to", a.description, "--entity", "Product", "--keep-missing",
                               "--progress", "plain"])
    #expect(imported.status == 0, "\(imported.errors)")
    #expect(imported.errors.contains("Product") || imported.output.contains("1/1"), "\(imported.output) \(imported.errors)")
}

/// An import says which of its updates rewrote an item an earlier object of the input had
/// written (a product nested in two orders).
@Test func anImportSaysWhatItUpdatedAgain() throws {
    let dir = try TemporaryDirectory()
    let store = dir.location(.sqlite, "store")
    try DemoData.seed(store, items: 300, seed: 3)
    let opened = try store.open(schema: nil)
    let (orders, sku) = try opened.read { r in
        (try r.fetch(FetchRequest("Order", limit: 2)), try r.fetch(FetchRequest("Product", limit: 1))[0]["sku"])
    }
    try opened.close()
    guard case .string(let product) = sku else { Issue.record("no product"); return }
    let objects = orders.enumerated().map { index, order -> String in
        guard case .int(let id) = order["id"] else { return "" }
        return #"{"id": \#(id), "products": [{"sku": "\#(product)", "title": "title \#(index)", "price": 1, "stock": 1}]}"#
    }
    let json = dir.path("orders.json")
    try Data(("[" + objects.joined(separator: ",") + "]").utf8).write(to: URL(fileURLWithPath: json))
    let result = try runCLI(["import", json, "--to", store.description, "--entity", "Order", "--keep-missing"])
    #expect(result.status == 0, "\(result.errors)")
    #expect(result.output.contains("Product: 0 deleted, 0 unlinked, 0 inserted, 2 updated (1 of them again"),
            "\(result.output)")
}

/// Ctrl-C during a copy through the CLI: the summary it prints counts what the stopped copy
/// wrote (it printed 0 for the entity in progress), the same as the destination holds.
@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func aCopyStoppedWithCtrlCPrintsWhatItWrote() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    try DemoData.seed(source, items: 20_000, seed: 8)
    let destination = dir.location(.lmdb, "destination")
    let (process, output, errors) = try startCLI(["copy", "--no-check", "--from", source.description, "--to",
                                                  destination.description, "--batch-size", "200", "--progress", "plain"],
                                                 capturingOutput: true)
    // Stopped once its first batches are written (its progress line says so), not after a time.
    var seen = Data()
    while !String(decoding: seen, as: UTF8.self).contains("copy ") {
        let chunk = errors.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        seen.append(chunk)
    }
    try #require(process.isRunning, "the copy ended before Ctrl-C: the test needs a larger store")
    kill(process.processIdentifier, SIGINT)
    let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    #expect(process.terminationStatus == 130)
    let total = try #require(printed.split(separator: "\n").first { $0.hasPrefix("total") }, "\(printed)")
    let written = Int(total.split(separator: " ", omittingEmptySubsequences: true)[2]) ?? -1
    let store = try Migrator.acceptingUnfinished { try destination.open(schema: nil) }
    let stored = try store.read { r in try store.schema.entities.reduce(0) { $0 + (try r.count(FetchRequest($1.name))) } }
    try store.close()
    #expect(written > 0 && written == stored, "summary: \(total); the destination holds \(stored)")
}

// MARK: 7. The documentation

/// docs/migrate-store.md quotes `copy --help` as the command prints it.
@Test func theQuotedCopyHelpIsTheCommandsOwn() throws {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    let text = try String(contentsOf: root.appendingPathComponent("docs/migrate-store.md"), encoding: .utf8)
    let quoted = try #require(text.components(separatedBy: "`migrate-store copy --help`:\n\n```text\n").dropFirst().first?
        .components(separatedBy: "\n```").first)
    let help = try runCLI(["copy", "--help"])
    #expect(help.output.trimmingCharacters(in: .newlines) == quoted, "regenerate the block from `migrate-store copy --help`")
    #expect(text.contains("docs/file-formats.md") && !text.contains("(see above)"))
}
