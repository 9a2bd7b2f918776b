@_spi(Backend) import DataStoreAPI
import DataStoreTestSupport
import Foundation
import JSONLStore
import StoreMigration
import Testing

/// The files a command writes besides its store (`--report`, `export -o`, `diff -o`,
/// `--rejects`) replace what is at their path. Pointed by mistake at a store, at one of the
/// command's own inputs or key files, or at something that is not a regular file, they are refused
/// before anything is read or written (exit 2, the option and what is there named), and what was
/// there is left as it was. An outside try of the commands destroyed stores and a key file this way.
@Suite struct OutputFileMistakesTests {
    /// The bytes of every file under `path` (a file or a directory), by name.
    static func bytes(_ path: String) -> [String: Data] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return [:] }
        guard isDirectory.boolValue else { return [path: FileManager.default.contents(atPath: path) ?? Data()] }
        var result: [String: Data] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: path))?.sorted() ?? [] {
            result[name] = FileManager.default.contents(atPath: path + "/" + name) ?? Data()
        }
        return result
    }

    static func refused(_ result: CommandResult, _ naming: String, _ what: String,
                        sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.status == 2, "\(what): exit \(result.status): \(result.errors)", sourceLocation: sourceLocation)
        #expect(result.errors.contains(naming), "\(what): \(result.errors)", sourceLocation: sourceLocation)
    }

    @Test func anExportOrReportOverAStoreIsRefusedAndTheStoreKept() throws {
        let dir = try TemporaryDirectory()
        let sqlite = dir.location(.sqlite, "s"), lmdb = dir.location(.lmdb, "l"), jsonl = dir.location(.jsonl, "j")
        for store in [sqlite, lmdb] { try DemoData.seed(store, items: 100, seed: 2) }
        let made = try runCLI(["copy", "--from", sqlite.description, "--to", jsonl.description, "--progress", "none"])
        #expect(made.status == 0, "\(made.errors)")
        let stores = [sqlite.path, lmdb.path, jsonl.path]
        let before = stores.map(Self.bytes)
        let targets = [(sqlite.path, "holds a SQLite database"), (lmdb.path + "/data.mdb", "is inside the LMDB store"),
                       (jsonl.path, "holds a JSON Lines store")]
        for (target, naming) in targets {
            // Over another store, what is there is named; over the command's own store, that it
            // is the command's.
            for source in [sqlite, lmdb, jsonl] {
                let own = source.path == target
                Self.refused(try runCLI(["export", "--from", source.description, "--entity", "Product", "-o", target]),
                             "-o \(target) " + (own ? "is the file the command reads or writes" : naming),
                             "export \(source) -o \(target)")
            }
            let copy = dir.location(.sqlite, "copy")
            Self.refused(try runCLI(["copy", "--from", lmdb.description, "--to", copy.description, "--progress", "none",
                                     "--report", target]), "--report \(target) \(naming)", "copy --report \(target)")
            #expect(!FileManager.default.fileExists(atPath: copy.path), "nothing copied")
            Self.refused(try runCLI(["diff", "--from", sqlite.description, "--to", lmdb.description, "--progress", "none",
                                     "-o", target]), "-o \(target) " + (target == sqlite.path
                                         ? "is the file the command reads or writes" : naming), "diff -o \(target)")
        }
        #expect(stores.map(Self.bytes) == before, "every store as it was")
        // The library's export refuses it the same way.
        let opened = try sqlite.open(schema: nil)
        defer { try? opened.close() }
        #expect {
            try JSONExport.run(from: opened, entity: "Product", to: lmdb.path + "/data.mdb")
        } throws: { "\($0)".contains("inside the LMDB store") }
        #expect(stores.map(Self.bytes) == before)
    }

    @Test func anOutputOverTheCommandsOwnKeyOrInputFileIsRefused() throws {
        let dir = try TemporaryDirectory()
        let source = dir.location(.lmdb, "source")
        try DemoData.seed(source, items: 100, seed: 3)
        let key = dir.path("key")
        try Data(String(repeating: "ab", count: 32).utf8).write(to: URL(fileURLWithPath: key))
        let encrypted = dir.location(.lmdb, "encrypted")
        Self.refused(try runCLI(["copy", "--from", source.description, "--to", encrypted.description, "--progress", "none",
                                 "--to-key-file", key, "--report", key]), "is the file the command reads", "--report over the key")
        #expect(FileManager.default.contents(atPath: key) == Data(String(repeating: "ab", count: 32).utf8))
        #expect(!FileManager.default.fileExists(atPath: encrypted.path))
        // The rejects of an import written over its own input.
        let input = dir.path("products.json")
        let text = #"[{"sku": "SKU-000001", "title": "t", "price": "not a number", "stock": 1}]"#
        try Data(text.utf8).write(to: URL(fileURLWithPath: input))
        Self.refused(try runCLI(["import", input, "--to", source.description, "--entity", "Product", "--keep-missing",
                                 "--rejects", input]), "is the file the command reads", "--rejects over the input")
        #expect(FileManager.default.contents(atPath: input) == Data(text.utf8))
    }

    @Test func anOutputThatIsNotARegularFileIsRefused() throws {
        let dir = try TemporaryDirectory()
        let source = dir.location(.sqlite, "source")
        try DemoData.seed(source, items: 100, seed: 4)
        let target = dir.path("target.txt")
        try Data("kept".utf8).write(to: URL(fileURLWithPath: target))
        let link = dir.path("link.json")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        let fifo = dir.path("fifo.json")
        #expect(mkfifo(fifo, 0o600) == 0)
        for (path, naming) in [(link, "is a symbolic link"), (fifo, "is not a regular file")] {
            Self.refused(try runCLI(["export", "--from", source.description, "--entity", "Product", "-o", path]),
                         naming, "export -o \(path)")
        }
        var status = stat()
        #expect(lstat(link, &status) == 0 && status.st_mode & S_IFMT == S_IFLNK, "the link is still a link")
        #expect(lstat(fifo, &status) == 0 && status.st_mode & S_IFMT == S_IFIFO, "the FIFO is still a FIFO")
        #expect(FileManager.default.contents(atPath: target) == Data("kept".utf8))
        Self.refused(try runCLI(["export", "--from", source.description, "--entity", "Product", "-o", ""]),
                     "-o is empty", "export -o ''")
    }

    /// An import every value of which is rejected (here a required attribute of the wrong type in
    /// each) is not a list of the entity's items: what it leaves out is not deleted (exit 2).
    @Test func anImportWhoseEveryValueIsRejectedDeletesNothing() throws {
        let dir = try TemporaryDirectory()
        let store = dir.location(.sqlite, "store")
        try DemoData.seed(store, items: 300, seed: 6)
        let input = dir.path("wrong.json")
        try Data(#"[{"sku": "NEW-1", "title": 5}, {"sku": "NEW-2", "title": 6}]"#.utf8).write(to: URL(fileURLWithPath: input))
        let result = try runCLI(["import", input, "--to", store.description, "--entity", "Product"])
        #expect(result.status == 2, "\(result.errors)")
        #expect(result.errors.contains("every one of the 2 values was rejected"), "\(result.errors)")
        let opened = try store.openSource()
        defer { try? opened.close() }
        #expect(try opened.read { try $0.count(FetchRequest("Product")) } == 30)
    }

    /// A filter nested past the limit is refused naming the limit (20,000 parentheses overflowed
    /// the parser's stack), in the library and through the CLI.
    @Test func aFilterNestedPastTheLimitIsRefused() throws {
        let dir = try TemporaryDirectory()
        let store = dir.location(.lmdb, "store")
        try DemoData.seed(store, items: 100, seed: 7)
        let deep = String(repeating: "(", count: 20_000) + "vip == true" + String(repeating: ")", count: 20_000)
        let nots = String(repeating: "not ", count: 30_000) + "vip == true"
        let entity = DemoData.schema.entity(named: "Customer")!
        for text in [deep, nots] {
            #expect {
                _ = try Filter(parsing: text, for: entity, in: DemoData.schema)
            } throws: { "\($0)".contains("nested more than \(4 * Limits.maxFilterDepth) deep") }
        }
        let result = try runCLI(["export", "--from", store.description, "--entity", "Customer", "--where", deep])
        Self.refused(result, "nested more than", "export --where of 20,000 parentheses")
        #expect(result.errors.count < 1_000, "the message does not repeat the whole filter")
        let atLimit = String(repeating: "(", count: Limits.maxFilterDepth) + "vip == true"
            + String(repeating: ")", count: Limits.maxFilterDepth)
        #expect(throws: Never.self) { _ = try Filter(parsing: atLimit, for: entity, in: DemoData.schema) }
        // `not (` is two of the parser's nestings but one level of the filter: 33 levels parse.
        let notGroups = String(repeating: "not (", count: 33) + "vip == true" + String(repeating: ")", count: 33)
        #expect(throws: Never.self) { _ = try Filter(parsing: notGroups, for: entity, in: DemoData.schema) }
    }

    /// Standard output on a full device: every command that writes there ends with an error
    /// naming it (exit 3), not a trap in Foundation's write, nor exit 0 with its output lost.
    @Test func anExportToAFullStandardOutputEndsWithAnError() throws {
        let dir = try TemporaryDirectory()
        let store = dir.location(.sqlite, "store")
        try DemoData.seed(store, items: 300, seed: 8)
        let other = dir.location(.sqlite, "other")
        try DemoData.seed(other, items: 300, seed: 9)
        // Export and diff write through a handle that throws; inspect, check and verify print, and
        // their output waits in C's buffer until the command is over (they exited 0 or 1 with it
        // lost).
        for arguments in [["export", "--from", store.description, "--entity", "Customer"],
                          ["diff", "--from", store.description, "--to", other.description, "--progress", "none"],
                          ["inspect", store.description], ["check", store.description],
                          // Differences found: it prints them, then exits 1, checked all the same.
                          ["verify", "--from", store.description, "--to", other.description, "--progress", "none"]] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: migrateStore.path)
            process.arguments = arguments
            let full = try #require(FileHandle(forWritingAtPath: "/dev/full"))
            process.standardOutput = full
            let errors = Pipe()
            process.standardError = errors
            try process.run()
            let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationReason == .exit && process.terminationStatus == 3, "\(arguments[0]): \(message)")
            #expect(message.contains("standard output"), "\(arguments[0]): \(message)")
        }
    }

    /// Messages that named the wrong thing: a file given as a directory was "does not exist", a
    /// count past 64 bits "not a whole number", a directory read as another program's SQLite file
    /// "disk I/O error".
    @Test func aFileGivenAsADirectoryAndAHugeCountAreNamedAsSuch() throws {
        let dir = try TemporaryDirectory()
        let source = dir.location(.sqlite, "source")
        try DemoData.seed(source, items: 100, seed: 5)
        try Data("x".utf8).write(to: URL(fileURLWithPath: dir.path("file.txt")))
        for destination in ["sqlite:file.txt/x", "lmdb:file.txt/x"] {
            Self.refused(try runCLI(["copy", "--from", source.description, "--to", destination, "--progress", "none"],
                                    in: dir.url.path), "file.txt is a file, not a directory", destination)
        }
        // A directory read as another program's SQLite file: SQLite said "disk I/O error".
        for kind in ["coredata", "plain-sqlite"] {
            let read = try runCLI(["inspect", "\(kind):\(dir.url.path)"])
            #expect(read.status == 2 && read.errors.contains("\(dir.url.path) is a directory, not a SQLite database file"),
                    "\(kind): exit \(read.status): \(read.errors)")
        }
        let huge = try runCLI(["copy", "--from", source.description, "--to", dir.location(.lmdb, "d").description,
                               "--batch-size", "9223372036854775808"])
        #expect(huge.status == 64 && huge.errors.contains("--batch-size must be at most 9223372036854775807"),
                "\(huge.errors)")
    }

    /// A store named with the slash a shell's completion leaves after a directory is the store
    /// itself: what rekey and copy make beside it goes beside it.
    @Test func aTrailingSlashNamesTheStoreItself() throws {
        #expect(try StoreLocation(parsing: "lmdb:app.lmdb/").path == "app.lmdb")
        #expect(try StoreLocation(parsing: "sqlite:dir/app.sqlite//").path == "dir/app.sqlite")
        // A bare path, as a shell's completion gives it.
        #expect(try StoreLocation(parsing: "new-store.lmdb/").path == "new-store.lmdb")
        #expect(try StoreLocation(parsing: "memory:name/").path == "name/", "a memory store's name is kept as given")
    }

    /// A report named as the store the command makes, or as the diff it applies, is refused
    /// before anything is written (the store was made, then its file replaced by the report).
    @Test func aReportNamedAsTheStoreMadeOrTheDiffAppliedIsRefused() throws {
        let dir = try TemporaryDirectory()
        let source = dir.location(.sqlite, "source")
        try DemoData.seed(source, items: 100, seed: 11)
        for destination in ["sqlite:new.sqlite", "jsonl:new.jsonl", "lmdb:new.lmdb"] {
            let name = String(destination.split(separator: ":")[1])
            Self.refused(try runCLI(["copy", "--from", source.description, "--to", destination, "--progress", "none",
                                     "--report", "./" + name], in: dir.url.path),
                         "is the file the command reads or writes", "copy --to \(destination) --report ./\(name)")
            #expect(!FileManager.default.fileExists(atPath: dir.path(name)), "\(destination): nothing made")
        }
        let other = dir.location(.sqlite, "other")
        try DemoData.seed(other, items: 100, seed: 12)
        let changes = dir.path("changes.jsonl")
        let diffed = try runCLI(["diff", "--from", source.description, "--to", other.description, "--progress", "none",
                                 "-o", changes])
        #expect(diffed.status == 1, "\(diffed.errors)")
        let text = FileManager.default.contents(atPath: changes)
        Self.refused(try runCLI(["sync", "--from", "diff:" + changes, "--to", other.description, "--report", changes]),
                     "is the file the command reads or writes", "sync --from diff: --report over the diff")
        #expect(FileManager.default.contents(atPath: changes) == text)
        Self.refused(try runCLI(["diff", "--from", source.description, "--to", other.description, "--progress", "none",
                                 "-o", dir.path("again.jsonl"), "--report", dir.path("again.jsonl")]),
                     "is the file the command reads or writes", "diff -o X --report X")
    }

    /// A gzip-compressed JSON Lines store is a store too (its first bytes are gzip's): a report or
    /// an export over it is refused and the store kept. A gzip file that is no store (an import's
    /// compressed rejects) is still replaced.
    @Test func aCompressedJSONLinesStoreIsNotReplaced() throws {
        let dir = try TemporaryDirectory()
        let source = dir.location(.sqlite, "source")
        try DemoData.seed(source, items: 100, seed: 11)
        let compressed = try StoreLocation(parsing: "jsonl:" + dir.path("copy.jsonl.gz"))
        let made = try runCLI(["copy", "--from", source.description, "--to", compressed.description, "--progress", "none"])
        #expect(made.status == 0, "\(made.errors)")
        let before = Self.bytes(compressed.path)
        let naming = "\(compressed.path) holds a JSON Lines store (gzip-compressed)"
        Self.refused(try runCLI(["export", "--from", source.description, "--entity", "Product", "-o", compressed.path]),
                     "-o " + naming, "export -o over the compressed store")
        let copy = dir.location(.sqlite, "copy")
        Self.refused(try runCLI(["copy", "--from", source.description, "--to", copy.description, "--progress", "none",
                                 "--report", compressed.path]), "--report " + naming, "copy --report over it")
        #expect(!FileManager.default.fileExists(atPath: copy.path), "nothing copied")
        #expect(Self.bytes(compressed.path) == before, "the store as it was")
        let opened = try source.open(schema: nil)
        defer { try? opened.close() }
        #expect {
            try JSONExport.run(from: opened, entity: "Product", to: compressed.path)
        } throws: { "\($0)".contains("holds a JSON Lines store") }
        // A compressed file that is not a store is the user's to replace.
        let other = dir.path("notes.txt.gz")
        let gzip = Process()
        gzip.executableURL = URL(fileURLWithPath: "/bin/sh")
        gzip.arguments = ["-c", "echo 'not a store' | gzip > '\(other)'"]
        try gzip.run()
        gzip.waitUntilExit()
        #expect(gzip.terminationStatus == 0)
        let report = try runCLI(["copy", "--from", source.description, "--to", copy.description, "--progress", "none",
                                 "--report", other])
        #expect(report.status == 0, "\(report.errors)")
        #expect(FileManager.default.contents(atPath: other).map { $0.starts(with: [0x1f, 0x8b]) } == false,
                "the report replaced it")
    }
}
