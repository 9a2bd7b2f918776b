import DataStoreAPI
import DataStoreConformance
import DataStoreTestSupport
import Foundation
import StoreMigration
import Synchronization
import Testing

/// Damaged, foreign and wrong-kind stores, generated from two healthy ones.
struct DamageCorpus {
    struct Input: Sendable {
        var name: String
        var location: String
        /// The files whose bytes must not change (LMDB's lock file and SQLite's `-shm`, which
        /// every reader writes to coordinate with writers, are not among them).
        var files: [String]
    }

    let directory: String
    let pageSize = 4_096
    var inputs: [Input] = []
    private var rng: SplitMix64

    init(directory: String, seed: UInt64) {
        self.directory = directory
        rng = SplitMix64(seed: seed)
    }

    mutating func next(_ bound: Int) -> Int { Int(rng.next() % UInt64(max(1, bound))) }

    func data(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    mutating func add(_ name: String, kind: String, bytes: Data?, asDirectory: Bool) throws {
        let path = "\(directory)/\(inputs.count)-\(name)" + (kind == "lmdb" ? ".lmdb" : ".sqlite")
        var files: [String] = []
        if asDirectory {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            if let bytes {
                try bytes.write(to: URL(fileURLWithPath: path + "/data.mdb"))
                files.append(path + "/data.mdb")
            }
        } else if let bytes {
            try bytes.write(to: URL(fileURLWithPath: path))
            files.append(path)
        }
        inputs.append(Input(name: name, location: "\(kind):\(path)", files: files))
    }

    /// `count` random damages of each file, plus the fixed cases.
    mutating func generate(sqlite: String, lmdb: String, count: Int) throws {
        for (kind, file) in [("lmdb", lmdb + "/data.mdb"), ("sqlite", sqlite)] {
            let original = try data(file)
            let isLMDB = kind == "lmdb"
            let pages = original.count / pageSize
            for i in 0..<count {
                var damaged = original
                let name: String
                switch i % 5 {
                case 0:
                    let cut = next(pages) * pageSize
                    damaged = damaged.prefix(cut)
                    name = "truncated-at-page-\(cut / pageSize)"
                case 1:
                    let cut = next(original.count)
                    damaged = damaged.prefix(cut)
                    name = "truncated-at-\(cut)"
                case 2, 3:
                    let length = [1, 10, 100][next(3)]
                    let start = 2 * pageSize + next(original.count - 2 * pageSize - length)
                    let fill = next(3)
                    for j in start..<start + length {
                        damaged[j] = fill == 0 ? 0 : fill == 1 ? 0xFF : UInt8(truncatingIfNeeded: rng.next())
                    }
                    name = "overwritten-\(length)-at-\(start)"
                default:
                    let start = next(isLMDB ? 2 * pageSize : 100)
                    damaged[start] ^= UInt8(1 + next(255))
                    name = "header-byte-\(start)-flipped"
                }
                try add(name, kind: kind, bytes: damaged, asDirectory: isLMDB)
            }
            var garbage = Data(count: 3 * pageSize)
            for j in garbage.indices { garbage[j] = UInt8(truncatingIfNeeded: rng.next()) }
            try add("garbage", kind: kind, bytes: garbage, asDirectory: isLMDB)
            try add("empty", kind: kind, bytes: Data(), asDirectory: isLMDB)
            try add("text", kind: kind, bytes: Data("name,value\nalpha,1\n".utf8), asDirectory: isLMDB)
            try add("missing", kind: kind, bytes: nil, asDirectory: false)
        }
        var schemaFormat = try data(sqlite)
        schemaFormat[47] ^= 0x10
        try add("schema-format-number-damaged", kind: "sqlite", bytes: schemaFormat, asDirectory: false)
        try add("lmdb-without-data", kind: "lmdb", bytes: nil, asDirectory: true)
        inputs.append(
            Input(name: "lmdb-named-sqlite", location: "sqlite:\(lmdb)", files: [lmdb + "/data.mdb"]))
        inputs.append(Input(name: "sqlite-named-lmdb", location: "lmdb:\(sqlite)", files: [sqlite]))
        let foreign = "\(directory)/foreign.sqlite"
        _ = try runCommand("/usr/bin/sqlite3", [foreign, "CREATE TABLE t(x); INSERT INTO t VALUES (1);"])
        inputs.append(Input(name: "foreign-sqlite", location: "sqlite:\(foreign)", files: [foreign]))
        let renamed = "\(directory)/renamed-column.sqlite"
        try FileManager.default.copyItem(atPath: sqlite, toPath: renamed)
        _ = try runCommand(
            "/usr/bin/sqlite3", [renamed, "ALTER TABLE Customer RENAME COLUMN name TO fullName"])
        inputs.append(Input(name: "renamed-column", location: "sqlite:\(renamed)", files: [renamed]))
        let coerced = "\(directory)/bad-values.sqlite"
        try FileManager.default.copyItem(atPath: sqlite, toPath: coerced)
        _ = try runCommand(
            "/usr/bin/sqlite3",
            [
                coerced,
                "UPDATE \"Order\" SET note = CAST(X'C328' AS TEXT) "
                    + "WHERE id = (SELECT min(id) FROM \"Order\")",
            ])
        inputs.append(Input(name: "invalid-utf8", location: "sqlite:\(coerced)", files: [coerced]))
        let seven = "\(directory)/bool-seven.sqlite"
        try FileManager.default.copyItem(atPath: sqlite, toPath: seven)
        _ = try runCommand(
            "/usr/bin/sqlite3",
            [seven, "UPDATE Customer SET vip = 7 WHERE id = (SELECT min(id) FROM Customer)"])
        inputs.append(Input(name: "bool-seven", location: "sqlite:\(seven)", files: [seven]))
        try addCraftedCoreDataModels()
    }

    /// Core Data stores whose model names attributes like SQL: a quote, a semicolon, a comment,
    /// a parenthesis that would close the select list, a keyword. The reader quotes every name it
    /// puts into SQL, so none of them runs anything the file chose.
    mutating func addCraftedCoreDataModels() throws {
        let names = ["a\"b", "x;DROP TABLE ZNOTE", "c--d", "e) FROM Z_METADATA --", "f/*g*/", "select", "h' OR '1'='1"]
        for (index, name) in names.enumerated() {
            let path = "\(directory)/crafted-\(index).sqlite"
            let column = "\"Z" + name.uppercased().replacingOccurrences(of: "\"", with: "\"\"") + "\""
            _ = try runCommand("/usr/bin/sqlite3", [path, """
                CREATE TABLE Z_PRIMARYKEY (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER INTEGER, Z_MAX INTEGER);
                CREATE TABLE Z_METADATA (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255), Z_PLIST BLOB);
                CREATE TABLE ZNOTE (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, Z_OPT INTEGER, ZTITLE VARCHAR, \(column) VARCHAR);
                INSERT INTO Z_PRIMARYKEY VALUES (1, 'Note', 0, 1);
                INSERT INTO Z_METADATA VALUES (1, 'C0FFEE00-0000-4000-8000-000000000003', X'');
                INSERT INTO ZNOTE VALUES (1, 1, 1, 'title', 'value');
                """])
            let model = "\(directory)/crafted-\(index).xcdatamodel"
            try FileManager.default.createDirectory(atPath: model, withIntermediateDirectories: false)
            let escaped = name.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "\"", with: "&quot;")
                .replacingOccurrences(of: "<", with: "&lt;")
            try """
                <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
                <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
                    <entity name="Note" syncable="YES">
                        <attribute name="title" optional="YES" attributeType="String"/>
                        <attribute name="\(escaped)" optional="YES" attributeType="String"/>
                    </entity>
                </model>
                """.write(toFile: model + "/contents", atomically: true, encoding: .utf8)
            inputs.append(Input(name: "crafted-model-\(index)", location: "coredata:\(path)?model=\(model)", files: [path]))
        }
    }
}

/// One run of the CLI with a watchdog: how it ended.
struct GuardedRun: Sendable {
    var status: Int32
    var signaled: Bool
    var hung: Bool
    var errors: String
}

func runGuarded(_ arguments: [String], seconds: Double = 60) throws -> GuardedRun {
    let (process, _, errorPipe) = try startCLI(arguments, capturingOutput: true)
    let hung = Mutex(false)
    let watchdog = DispatchWorkItem {
        hung.withLock { $0 = true }
        process.terminate()
    }
    DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: watchdog)
    let errors = errorPipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    watchdog.cancel()
    return GuardedRun(
        status: process.terminationStatus,
        signaled: process.terminationReason == .uncaughtSignal && !hung.withLock { $0 },
        hung: hung.withLock { $0 }, errors: String(decoding: errors, as: UTF8.self))
}

/// Random damages per kind of store: `DATASTORE_CORPUS` in the environment, else 50 in the test
/// command (123 inputs and 492 runs) and 200 in Scripts/release-check.sh (`DATASTORE_THOROUGH=1`);
/// docs/damage-and-durability.md's longer run uses 500.
var corpusDamagesPerKind: Int {
    ProcessInfo.processInfo.environment["DATASTORE_CORPUS"].flatMap(Int.init) ?? (runsThoroughTests ? 200 : 50)
}

/// The seed of the random damages: `DATASTORE_CORPUS_SEED` in the environment, else a new one
/// each run, which the run prints (with it, the same corpus is made again).
let corpusSeed: UInt64 =
    ProcessInfo.processInfo.environment["DATASTORE_CORPUS_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 0...UInt64.max)

@Test(.enabled(if: runsSlowTests, "slow: Scripts/test.sh --quick leaves it out"))
func everyCommandOnEveryDamagedStoreEndsWithADocumentedExitAndLeavesTheSourceUnchanged() throws {
    let dir = try TemporaryDirectory()
    let sqlite = dir.path("base.sqlite")
    let lmdb = dir.path("base.lmdb")
    #expect(
        try runCLI(["seed", "--to", "sqlite:\(sqlite)", "--items", "800", "--progress", "none"]).status == 0)
    #expect(
        try runCLI(["copy", "--from", "sqlite:\(sqlite)", "--to", "lmdb:\(lmdb)", "--progress", "none"])
            .status == 0)
    let corpusDirectory = dir.path("corpus")
    try FileManager.default.createDirectory(atPath: corpusDirectory, withIntermediateDirectories: false)
    var corpus = DamageCorpus(directory: corpusDirectory, seed: corpusSeed)
    print("damaged-store corpus: seed \(corpusSeed) (DATASTORE_CORPUS_SEED=\(corpusSeed) makes the same inputs again)")
    try corpus.generate(sqlite: sqlite, lmdb: lmdb, count: corpusDamagesPerKind)
    let inputs = corpus.inputs

    struct Outcome: Sendable {
        var input: String
        var command: String
        var run: GuardedRun
        var sourceChanged: Bool
    }
    let outcomes = Mutex<[Outcome]>([])
    let failures = Mutex<[String]>([])
    DispatchQueue.concurrentPerform(iterations: inputs.count) { i in
        let input = inputs[i]
        let intact = input.location.hasPrefix("lmdb:") ? "sqlite:\(sqlite)" : "lmdb:\(lmdb)"
        let commands: [(String, [String])] = [
            ("inspect", ["inspect", input.location]),
            ("check", ["check", input.location]),
            ("verify", ["verify", "--from", input.location, "--to", intact, "--progress", "none"]),
            (
                "copy",
                [
                    "copy", "--from", input.location, "--to", "lmdb:\(corpusDirectory)/out-\(i).lmdb",
                    "--progress", "none",
                ]
            ),
        ]
        let before = input.files.map { try? Data(contentsOf: URL(fileURLWithPath: $0)) }
        for (name, arguments) in commands {
            do {
                let run = try runGuarded(arguments)
                let after = input.files.map { try? Data(contentsOf: URL(fileURLWithPath: $0)) }
                outcomes.withLock {
                    $0.append(
                        Outcome(
                            input: input.name, command: name, run: run,
                            sourceChanged: after != before))
                }
            } catch {
                failures.withLock { $0.append("\(input.name) \(name): cannot run: \(error)") }
            }
            try? FileManager.default.removeItem(atPath: "\(corpusDirectory)/out-\(i).lmdb")
        }
    }
    for failure in failures.withLock({ $0 }) { Issue.record(Comment(rawValue: failure)) }
    let all = outcomes.withLock { $0 }
    #expect(all.count == inputs.count * 4)
    for outcome in all {
        let what = "\(outcome.command) of \(outcome.input)"
        let lines = outcome.run.errors.split(separator: "\n")
        let seed = "DATASTORE_CORPUS_SEED=\(corpusSeed)"
        #expect(!outcome.run.signaled, "\(what) died of a signal (\(seed)): \(outcome.run.errors)")
        #expect(!outcome.run.hung, "\(what) hung (\(seed))")
        #expect(
            [0, 1, 2].contains(outcome.run.status),
            "\(what) exited \(outcome.run.status) (\(seed)): \(outcome.run.errors)")
        if outcome.run.status != 0 {
            #expect(
                lines.count == 1 && lines[0].hasPrefix("migrate-store: "),
                "\(what) should print one line (\(seed)), printed: \(outcome.run.errors)")
        }
        #expect(!outcome.sourceChanged, "\(what) changed its source (\(seed))")
    }
    // A crafted model's names are read as the columns they name (quoted), never run as SQL.
    for crafted in all where crafted.input.hasPrefix("crafted-model") && ["inspect", "check"].contains(crafted.command) {
        #expect(crafted.run.status == 0, "\(crafted.command) of \(crafted.input): \(crafted.run.errors)")
    }
    let byCommand = Dictionary(grouping: all, by: \.command).mapValues { runs in
        Dictionary(grouping: runs, by: \.run.status).mapValues(\.count).sorted { $0.key < $1.key }
            .map { "exit \($0.key): \($0.value)" }.joined(separator: ", ")
    }
    print(
        "damaged-store corpus: \(inputs.count) inputs, \(all.count) runs, "
            + "\(all.filter(\.run.signaled).count) signals, \(all.filter(\.run.hung).count) hangs, "
            + "\(all.filter(\.sourceChanged).count) changed sources; "
            + byCommand.sorted { $0.key < $1.key }.map { "\($0.key) [\($0.value)]" }.joined(separator: "; "))
    for odd in all where odd.command == "copy" && odd.run.status == 1 {
        print("damaged-store corpus: copy of \(odd.input) found differences after copying: \(odd.run.errors)")
    }
    let missed = all.filter { $0.command == "check" && $0.run.status == 0 }.map(\.input)
    print(
        "damaged-store corpus: check passed \(missed.count) inputs: "
            + missed.prefix(40).joined(separator: " ")
    )
}
