import DataStoreAPI
import DataStoreTestSupport
@testable import MigrateStoreCommand
import Foundation
import StoreMigration
import Testing

/// A mistake a new user makes, what migrate-store must answer: the documented exit code (2 for
/// bad input, 64 for invalid usage) and, on the first line of standard error, the thing that
/// is wrong.
private struct Mistake: CustomTestStringConvertible {
    var what: String
    var arguments: [String]
    var naming: String
    var status: Int32 = 2
    var testDescription: String { what }
}

/// What no message may show: Swift's own descriptions of errors and values, and the names of
/// staging locations the user never gave.
private let internals = ["DecodingError", "PSQLError", "Optional(", "Debug description", "Index ", ".migrating",
                         "__migrating", "Swift.", "NIOCore", "Error(", "codingPath",
                         "The operation could not be completed", "You don’t have permission", "NSCocoaErrorDomain",
                         "sqlite error"]

@Test func aNewUsersMistakesGetOneLineNamingWhatIsWrongAndTheDocumentedExitCode() throws {
    let dir = try TemporaryDirectory()
    let path = { (name: String) in dir.url.appendingPathComponent(name).path }
    let good = dir.location(.sqlite, "good")
    try DemoData.seed(good, items: 200, seed: 3)
    let other = dir.location(.lmdb, "other")
    _ = try Migrator.copy(from: good, to: other)
    let add = #"{"versions":[{"version":2,"steps":[{"addAttribute":{"entity":"Customer","attribute":{"name":"x","#
        + #""type":"int","isOptional":true}}}]}]}"#
    try Data(add.utf8).write(to: URL(fileURLWithPath: path("add.json")))
    _ = try runCLI(["upgrade", other.description, "--plan", path("add.json")])
    _ = try runCommand("/usr/bin/sqlite3", [path("plain.sqlite"), "CREATE TABLE t(x); INSERT INTO t VALUES (1);"])
    // A store whose orders were deleted in the sqlite3 shell: its pairs of products dangle.
    let edited = dir.location(.sqlite, "edited")
    _ = try Migrator.copy(from: good, to: edited)
    _ = try runCommand("/usr/bin/sqlite3", [edited.path, #"DELETE FROM "Order" WHERE "id" IN (1, 2);"#])
    // A store whose stored schema lists no entities (the tables are still there).
    let emptied = dir.location(.sqlite, "emptied")
    _ = try Migrator.copy(from: good, to: emptied)
    try emptyTheStoredSchema(emptied)
    let files: [String: String] = [
        "misspelled.json": #"{"versions":[{"version":2,"steps":[{"addAtribute":{"entity":"Product"}}]}]}"#,
        "badtype.json": #"{"versions":[{"version":2,"steps":[{"addAttribute":{"entity":"Product","attribute":"#
            + #"{"name":"x","type":"intt"}}}]}]}"#,
        "notjson.json": "{\"versions\": [",
        "unknownattribute.json": #"{"versions":[{"version":2,"steps":[{"renameAttribute":{"entity":"Product","#
            + #""from":"colour","to":"color"}}]}]}"#,
        "stringversion.json": #"{"versions":[{"version":"2","steps":[]}]}"#,
        "mapping-unknown.json": #"{"product_title":"headline"}"#,
        "mapping-number.json": #"{"bogus": 1}"#,
        "users.json": #"[{"sku": "s-1", "title": "t", "price": 1.5, "stock": 2}]"#,
        "broken.json": #"[{"sku": "s-1", "#,
        "syntax.json": "[\n  {\"sku\": \"s-1\", \"title\": \"t\", \"price\": 1.5, \"stock\": 2},\n  {\"sku\": s-2}\n]\n",
    ]
    for (name, text) in files { try Data(text.utf8).write(to: URL(fileURLWithPath: path(name))) }

    let from = ["--from", good.description]
    let mistakes: [Mistake] = [
        Mistake(what: "a missing source", arguments: ["--from", "sqlite:" + path("nope.sqlite"), "--to",
                                                      "lmdb:" + path("a.lmdb")], naming: "nope.sqlite"),
        Mistake(what: "an unknown kind", arguments: ["--from", "oracle:db", "--to", "lmdb:" + path("a.lmdb")],
                naming: "oracle"),
        Mistake(what: "a suffix that names no kind", arguments: from + ["--to", path("out.db")], naming: "out.db"),
        Mistake(what: "--store naming no store", arguments: ["--from", "sqlite", "--to", "lmdb", "--store",
                                                            path("ghost.sqlite")], naming: "ghost.sqlite"),
        Mistake(what: "a destination that exists", arguments: from + ["--to", other.description],
                naming: "--overwrite"),
        Mistake(what: "the same store twice", arguments: from + ["--to", good.description], naming: "same store"),
        Mistake(what: "an unknown entity", arguments: from + ["--to", "lmdb:" + path("b.lmdb"), "--entities",
                                                              "Customer,Nope"], naming: "Nope"),
        Mistake(what: "a resume with nothing to resume", arguments: from + ["--to", "lmdb:" + path("c.lmdb"),
                                                                            "--resume"], naming: "nothing to resume"),
        Mistake(what: "a follow into JSON Lines", arguments: from + ["--to", "jsonl:" + path("f.jsonl"), "--follow"],
                naming: "cannot follow"),
        Mistake(what: "a follow of some entities", arguments: from + ["--to", "lmdb:" + path("d.lmdb"), "--follow",
                                                                      "--entities", "Customer"], naming: "--entities"),
        Mistake(what: "a plan into JSON Lines", arguments: from + ["--to", "jsonl:" + path("p.jsonl"), "--plan",
                                                                   path("add.json")],
                naming: "cannot be upgraded"),
        Mistake(what: "a missing plan", arguments: ["upgrade", good.description, "--plan", path("absent.json")],
                naming: "absent.json"),
        Mistake(what: "a misspelled step", arguments: ["upgrade", good.description, "--plan", path("misspelled.json")],
                naming: "unknown step 'addAtribute' at versions[0].steps[0]"),
        Mistake(what: "an unknown type", arguments: ["upgrade", good.description, "--plan", path("badtype.json")],
                naming: "'intt'"),
        Mistake(what: "a plan that is not JSON", arguments: ["upgrade", good.description, "--plan",
                                                             path("notjson.json")], naming: "is not JSON"),
        Mistake(what: "a version given as text", arguments: ["upgrade", good.description, "--plan",
                                                             path("stringversion.json")],
                naming: "versions[0].version: expected an integer"),
        Mistake(what: "a step on an unknown attribute", arguments: ["upgrade", good.description, "--plan",
                                                                    path("unknownattribute.json")], naming: "colour"),
        Mistake(what: "a mapping onto an unknown attribute",
                arguments: ["import", "--to", good.description, "--entity", "Product", path("users.json"),
                            "--mapping", path("mapping-unknown.json"), "--dry-run"], naming: "headline"),
        Mistake(what: "a mapping that is not strings",
                arguments: ["import", "--to", good.description, "--entity", "Product", path("users.json"),
                            "--mapping", path("mapping-number.json"), "--dry-run"], naming: "at bogus"),
        Mistake(what: "an import into an unknown entity",
                arguments: ["import", "--to", good.description, "--entity", "Products", path("users.json")],
                naming: "Products"),
        Mistake(what: "an import of a missing file",
                arguments: ["import", "--to", good.description, "--entity", "Product", path("absent.json")],
                naming: "absent.json"),
        Mistake(what: "an import of broken JSON",
                arguments: ["import", "--to", good.description, "--entity", "Product", path("broken.json")],
                naming: "broken.json"),
        Mistake(what: "a verify of stores whose schemas differ",
                arguments: ["verify"] + from + ["--to", other.description], naming: "'Customer'"),
        Mistake(what: "a check of a database that is not a store", arguments: ["check", path("plain.sqlite")],
                naming: "not a DataStore store (no _ds_meta table); to copy its data, read it as a plain SQLite database, plain-sqlite:"),
        Mistake(what: "an inspect of nothing", arguments: ["inspect", "sqlite:" + path("nothing.sqlite")],
                naming: "nothing.sqlite"),
        Mistake(what: "a batch size of 0", arguments: from + ["--to", "lmdb:" + path("e.lmdb"), "--batch-size", "0"],
                naming: "--batch-size must be at least 1 (it is 0)", status: 64),
        Mistake(what: "a batch size that is no number",
                arguments: from + ["--to", "lmdb:" + path("e.lmdb"), "--batch-size", "many"],
                naming: "--batch-size must be a whole number (it is 'many')", status: 64),
        Mistake(what: "--until-idle without --follow",
                arguments: from + ["--to", "lmdb:" + path("g.lmdb"), "--until-idle", "3"], naming: "--until-idle",
                status: 64),
        Mistake(what: "an idle wait longer than a Duration holds",
                arguments: ["sync"] + from + ["--to", "lmdb:" + path("g2.lmdb"), "--follow", "--until-idle", "1e21"],
                naming: "--until-idle must be a number of seconds from 0 to 31536000", status: 64),
        Mistake(what: "a seed of more items than an Int counts in its arithmetic",
                arguments: ["seed", "--to", "sqlite:" + path("seeded.sqlite"), "--items", "9223372036854775807"],
                naming: "--items must be from 1 to 1000000000", status: 64),
        Mistake(what: "a misspelled option", arguments: ["--form", good.description, "--to", "lmdb:" + path("h.lmdb")],
                naming: "unknown option '--form' for copy; did you mean '--from'?", status: 64),
        Mistake(what: "a misspelled option of a command",
                arguments: ["verify", "--from", good.description, "--to", other.description, "--cheksum"],
                naming: "did you mean '--checksum'?", status: 64),
        Mistake(what: "a command that does not exist", arguments: ["migrate", "--from", good.description, "--to",
                                                                    "lmdb:" + path("i.lmdb")],
                naming: "'migrate' is not a command of migrate-store", status: 64),
        Mistake(what: "a misspelled command", arguments: ["verfy", "--from", good.description, "--to", other.description],
                naming: "did you mean 'verify'?", status: 64),
        Mistake(what: "an export into a directory", arguments: ["export", "--from", good.description, "--entity",
                                                                 "Customer", "-o", dir.url.path],
                naming: "is a directory"),
        Mistake(what: "an export into a missing directory",
                arguments: ["export", "--from", good.description, "--entity", "Customer", "-o", path("no/x.json")],
                naming: "does not exist"),
        Mistake(what: "a report in a missing directory",
                arguments: from + ["--to", "lmdb:" + path("j.lmdb"), "--report", path("nodir/r.json")],
                naming: "--report \(path("nodir/r.json")) cannot be written: the directory"),
        Mistake(what: "a report that is a directory",
                arguments: ["verify"] + from + ["--to", good.description, "--report", dir.url.path],
                naming: "is a directory"),
        Mistake(what: "a destination in a missing directory",
                arguments: from + ["--to", "sqlite:" + path("nodir/k.sqlite")], naming: "does not exist"),
        Mistake(what: "an import with a JSON syntax error on line 3",
                arguments: ["import", "--to", good.description, "--entity", "Product", path("syntax.json")],
                naming: "line 3, column 11"),
        Mistake(what: "a verify of a source whose schema lists no entities",
                arguments: ["verify", "--from", emptied.description, "--to", good.description],
                naming: "the destination has entities that \(emptied) does not: 'Customer'"),
        Mistake(what: "a sync from a source whose schema lists no entities",
                arguments: ["sync", "--from", emptied.description, "--to", good.description], naming: "'Customer'"),
        Mistake(what: "an import into a store that does not exist",
                arguments: ["import", "--to", "sqlite:" + path("users.sqlite"), "--entity", "User", path("users.json")],
                naming: "create it with: migrate-store create sqlite:\(path("users.sqlite")) --schema"),
        Mistake(what: "a create without a schema", arguments: ["create", "sqlite:" + path("new.sqlite")],
                naming: "--schema", status: 64),
        Mistake(what: "a create from a schema file that is not JSON",
                arguments: ["create", "sqlite:" + path("new.sqlite"), "--schema", path("notjson.json")],
                naming: "is not JSON"),
        Mistake(what: "a copy into JSON Lines, unchecked, of a source with dangling references",
                arguments: ["copy", "--no-check", "--from", edited.description, "--to", "jsonl:" + path("d.jsonl.gz")],
                naming: "dangling reference"),
        // postgresql:// is libpq's other scheme, read as postgres://: this one lacks the schema.
        Mistake(what: "a copy of a postgresql:// URL without a schema",
                arguments: ["--from", "postgresql://db.example/app", "--to", "lmdb:" + path("pg.lmdb")],
                naming: "names no schema"),
        Mistake(what: "an unknown epoch unit",
                arguments: ["import", "--to", good.description, "--entity", "Product", path("users.json"),
                            "--epoch", "hours"], naming: "--epoch", status: 64),
    ]
    #expect(mistakes.count >= 20)
    let before = [good.path, other.path + "/data.mdb"].map(fileDigest)
    for mistake in mistakes {
        let withoutProgress: Set = ["check", "inspect", "upgrade", "import", "export", "create"]
        let result = try runCLI(mistake.arguments
            + (withoutProgress.contains(mistake.arguments[0]) ? [] : ["--progress", "none"]))
        let lines = result.errors.split(separator: "\n")
        #expect(result.status == mistake.status, "\(mistake.what): exit \(result.status): \(result.errors)")
        #expect(lines.count == 1 && lines[0].hasPrefix("migrate-store: error: "), "\(mistake.what): \(result.errors)")
        #expect(lines.first?.contains(mistake.naming) == true, "\(mistake.what): \(result.errors)")
        for word in internals {
            #expect(!result.errors.contains(word), "\(mistake.what) shows '\(word)': \(result.errors)")
        }
    }
    #expect([good.path, other.path + "/data.mdb"].map(fileDigest) == before, "no mistake wrote a store")
    for name in ["h.lmdb", "i.lmdb", "j.lmdb", "g2.lmdb", "seeded.sqlite"] {
        #expect(!FileManager.default.fileExists(atPath: path(name)), "\(name): no mistake made a destination")
    }
}

/// The exit code comes from the error's code in one place: 2 for every code that means the
/// input is at fault, 3 for a failure while running.
@Test func everyErrorCodeHasItsDocumentedExitCode() {
    let badInput: [StoreError.Code] = [.notFound, .keyExists, .uniqueViolation, .typeMismatch, .schemaMismatch,
                                       .invalidValue, .unknownEntity, .unknownAttribute, .limitExceeded,
                                       .invalidArgument, .corrupt, .conflict, .notAStore, .incompatibleFormat,
                                       .incompleteMigration, .readOnly, .newerSchemaVersion, .changesExpired,
                                       .referenceViolation]
    let failures: [StoreError.Code] = [.storeFull, .io, .closed, .reentrantCall, .accessorExpired, .busy]
    for code in badInput { #expect(CommandFailure.exitCode(for: code) == 2, "\(code)") }
    for code in failures { #expect(CommandFailure.exitCode(for: code) == 3, "\(code)") }
}

/// `import --dry-run` writes nothing (the store's files stay byte for byte as they were) and
/// prints the counts the real import then reports, deletions first.
@Test(arguments: [StoreKind.sqlite, .lmdb])
func anImportDryRunWritesNothingAndCountsWhatTheImportDoes(_ kind: StoreKind) throws {
    let dir = try TemporaryDirectory()
    let store = dir.location(kind, "store")
    try DemoData.seed(store, items: 300, seed: 5)
    let json = dir.path("products.json")
    try Data(#"[{"sku": "new-1", "title": "t", "price": 1.5, "stock": 2}, {"sku": "new-2", "price": "cheap"}]"#.utf8)
        .write(to: URL(fileURLWithPath: json))
    let files = kind == .lmdb ? [store.path + "/data.mdb"] : [store.path, store.path + "-wal"]
    let before = files.map(fileDigest)
    let arguments = ["import", "--to", store.description, "--entity", "Product", json]
    let dryRun = try runCLI(arguments + ["--dry-run"])
    #expect(dryRun.status == 0, "\(dryRun.errors)")
    #expect(files.map(fileDigest) == before, "the dry run wrote nothing")
    let real = try runCLI(arguments)
    #expect(real.status == 0, "\(real.errors)")
    func counts(_ output: String) -> String {
        output.split(separator: "\n")[0].components(separatedBy: ": ").last?
            .replacingOccurrences(of: "would be ", with: "") ?? ""
    }
    #expect(counts(dryRun.output) == counts(real.output), "\(dryRun.output) / \(real.output)")
    #expect(counts(real.output).hasPrefix("30 deleted, 1 inserted, 0 updated, 0 unchanged, 1 rejected"),
            "\(real.output)")
}

/// Ctrl-C during `copy --overwrite`'s source check leaves the old, complete destination in place:
/// the hint runs the copy again with --overwrite, never `verify` against the store it was to
/// replace. Without --overwrite a complete destination is the copy's own, which verify checks.
@Test func anInterruptedOverwriteIsRunAgainNotVerified() throws {
    let dir = try TemporaryDirectory()
    let source = dir.location(.sqlite, "source")
    try DemoData.seed(source, items: 100, seed: 2)
    let old = dir.location(.lmdb, "old")
    try DemoData.seed(StoreLocation(kind: .sqlite, path: dir.path("other.sqlite")), items: 50, seed: 9)
    _ = try Migrator.copy(from: StoreLocation(kind: .sqlite, path: dir.path("other.sqlite")), to: old)
    let overwrite = finishHint("copy", source, old, resumeHint: true, overwrite: true)
    #expect(overwrite.contains("copy --from") && overwrite.hasSuffix(" --overwrite") && !overwrite.contains("verify"),
            "\(overwrite)")
    #expect(finishHint("copy", source, old, resumeHint: true, overwrite: false).hasPrefix("migrate-store verify"))
    let missing = dir.location(.lmdb, "missing")
    #expect(!finishHint("copy", source, missing, resumeHint: true, overwrite: true).contains("--overwrite"))
}

/// What a stranger's try found in the messages: a JSON file with a byte order mark imports; `-`
/// for standard input is told what to do; a key=value location without a schema is told the
/// key=value way to add one; a file beside an LMDB store is one file ("which is not"); a
/// cause already quoted in the message is not repeated.
@Test func theStrangersSmallerFindingsAreMended() throws {
    let dir = try TemporaryDirectory()
    let store = dir.location(.sqlite, "store")
    try DemoData.seed(store, items: 100, seed: 3)
    let bom = dir.path("bom.json")
    try Data([0xEF, 0xBB, 0xBF] + Array(#"[{"sku": "SKU-000001", "title": "with a BOM"}]"#.utf8))
        .write(to: URL(fileURLWithPath: bom))
    let imported = try runCLI(["import", bom, "--to", store.description, "--entity", "Product", "--keep-missing"])
    #expect(imported.status == 0 && imported.output.contains("1 updated"), "\(imported.output) \(imported.errors)")
    let bomLines = dir.path("bom.jsonl")
    try Data([0xEF, 0xBB, 0xBF] + Array(#"{"sku": "SKU-000002", "title": "a BOM too"}"#.utf8) + [0x0A])
        .write(to: URL(fileURLWithPath: bomLines))
    let lines = try runCLI(["import", bomLines, "--to", store.description, "--entity", "Product", "--keep-missing"])
    #expect(lines.status == 0 && lines.output.contains("1 updated"), "\(lines.output) \(lines.errors)")
    let stdin = try runCLI(["import", "-", "--to", store.description, "--entity", "Product"])
    #expect(stdin.status == 2 && stdin.errors.contains("not standard input"), "\(stdin.errors)")
    if StoreBackends.kinds.contains("postgres") {
        let keyValue = try runCLI(["inspect", "postgres:host=/nonexistent dbname=d"])
        #expect(keyValue.status == 2 && keyValue.errors.contains("add schema=NAME")
            && !keyValue.errors.contains("?schema"), "\(keyValue.errors)")
        let secret = try runCLI(["inspect", "postgres:host=/nonexistent dbname=d schema=s passwd=x"])
        #expect(secret.errors.contains("a PostgreSQL location must not hold a password"), "\(secret.errors)")
    }
    let lmdb = dir.location(.lmdb, "kept")
    _ = try Migrator.copy(from: store, to: lmdb)
    try Data("mine".utf8).write(to: URL(fileURLWithPath: lmdb.path + "/canary.txt"))
    let one = try runCLI(["copy", "--from", store.description, "--to", lmdb.description, "--overwrite"])
    #expect(one.errors.contains("canary.txt, which is not the store's"), "\(one.errors)")
    // A message that quotes its cause shows the cause's code only, once.
    let cause = StoreError.Cause.postgres(sqlState: "2BP01", message: "view v depends on table t")
    let error = StoreError(.invalidArgument, "not dropped: something depends on it (view v depends on table t)", cause: cause)
    #expect("\(error)" == "invalidArgument: not dropped: something depends on it (view v depends on table t) "
        + "(postgresql error 2BP01)")
}
