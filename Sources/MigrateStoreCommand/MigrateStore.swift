import ArgumentParser
@_spi(Backend) import DataStoreAPI
import Foundation
import ForeignStores
import StoreMigration

/// The `migrate-store` command, as a library so that a program (or a test) can run it with
/// store kinds of its own registered (`StoreBackends.register`).
public struct MigrateStore: ParsableCommand {
    public init() {}

    public static let configuration = CommandConfiguration(
        commandName: "migrate-store",
        abstract: "Copy, sync and verify DataStore stores between SQLite, LMDB, PostgreSQL, in-memory and JSON Lines "
            + "stores; read Core Data, SwiftData, Realm and plain SQLite files as sources.",
        discussion: """
            A store is named KIND:PATH: sqlite:app.sqlite (a SQLite file), lmdb:app.lmdb (an LMDB \
            environment directory), jsonl:app.jsonl or jsonl:app.jsonl.gz (a JSON Lines file, read as \
            a store and written whole by copy and sync), postgres:postgres://user@host/db?schema=app \
            or postgres:schema=app with the PG* variables (a PostgreSQL schema; in builds with the \
            Postgres trait), memory:NAME (an in-memory store of this process). Sources only: \
            coredata:Model.sqlite (a Core Data or SwiftData store; model=PATH when it keeps no \
            model), plain-sqlite:file.db (any SQLite database, tables as entities) and \
            realm:default.realm (a Realm file, read without realm-core). A bare PATH names what is there (a directory is LMDB, a file is \
            SQLite), or, for a store to be made, what its suffix says (out.lmdb). A bare KIND names the store by its \
            name: in a directory holding app.sqlite, \
            `migrate-store --from sqlite --to lmdb` copies app.sqlite into app.lmdb; --store \
            PATH/NAME chooses the name when there is not exactly one store.

            Exit codes:
              0    success
              1    verify or diff found differences
              2    bad input: a missing, damaged, unreadable or non-store source, an unknown kind, a \
            destination that exists, an unknown entity; `check` found damage
              3    the operation failed while running (I/O error, full disk, ...)
              64   invalid command-line usage
              130  interrupted (Ctrl-C): within a second, after a finished batch where there is one; the \
            message says how to go on (a copy: --resume)
            """,
        version: MigrateStore.version,
        subcommands: [Copy.self, Sync.self, Verify.self, Inspect.self, Check.self, Upgrade.self, Seed.self, Create.self, Import.self, Export.self, Diff.self, Rekey.self],
        defaultSubcommand: Copy.self
    )
}

extension MigrateStore {
    /// The version `--version` prints: the last release, and that this build may be past it.
    public static let version = "1.0.0+unreleased"

    /// Parses the command line and runs the command, with Ctrl-C caught from the start (see
    /// `InterruptHandler`): every command ends within a second of it, with exit 130.
    public static func main() {
        InterruptHandler.install()
        let arguments = Array(CommandLine.arguments.dropFirst())
        func refuse(_ mistake: String) -> Never {
            FileHandle.standardError.write(Data("migrate-store: error: \(LocationSecrets.redacted(mistake))\n".utf8))
            Foundation.exit(ExitCode.validationFailure.rawValue)
        }
        // Parsed once, then run, as the parser's own `main` does. A command line with a word no
        // command knows never parses, so the words are looked at only when the parser refuses
        // (rendering every option's help to learn their names costs a third of a run's start).
        var command: any ParsableCommand
        do {
            command = try parseAsRoot(arguments)
        } catch {
            if let mistake = mistakenWord(in: arguments) ?? invalidValue(error) { refuse(mistake) }
            exit(withError: error)
        }
        do {
            try command.run()
        } catch {
            // A command that printed its result and then exits 1 (differences found) is checked
            // as one that exits 0.
            if let code = error as? ExitCode, code.rawValue == 1 { exitIfOutputLost() }
            exit(withError: error)
        }
        exitIfOutputLost()
    }

    /// What a command printed may still wait in standard output's buffer: when writing it fails
    /// (a full disk, `/dev/full`), exit 3 naming it, rather than 0 or 1 with the output lost.
    private static func exitIfOutputLost() {
        guard let failure = StandardOutput.flushFailure() else { return }
        FileHandle.standardError.write(Data("migrate-store: error: could not write standard output: \(failure)\n".utf8))
        Foundation.exit(CommandFailure.exitCode(for: .io))
    }

    /// A mistake the parser or a command's `validate()` refuses (`--batch-size 0`, `--progress
    /// sometimes`, `--until-idle` without `--follow`, a missing `--to`), said in one line, or
    /// `nil` for another error of the parser's. The parser itself follows such a message with the
    /// option's help and the command's usage: four lines for one mistake.
    static func invalidValue(_ error: any Error) -> String? {
        // The parser's own exit code (a request for help or the version is no mistake).
        guard (MigrateStore.self as any ParsableCommand.Type).exitCode(for: error) == .validationFailure else {
            return nil
        }
        let message = self.message(for: error)
        var line = message.split(separator: "\n").first.map(String.init) ?? message
        if line.hasPrefix("Error: ") { line.removeFirst("Error: ".count) }
        // A refusal of our own (an option's transform) comes after the parser's "The value …': ".
        if line.hasPrefix("The value '"), let own = line.range(of: "': ") { return String(line[own.upperBound...]) }
        return line
    }

    /// A word of the command line that no command of migrate-store knows, said in one line with
    /// what the user probably meant, or `nil`. Checked before the parser's own error is shown,
    /// because the parser reports a misspelled option (`--form`) as the missing one it stands
    /// for (`--from`), and a word that is no command (`migrate`) as an unexpected argument of the
    /// default command, `copy`.
    static func mistakenWord(in arguments: [String]) -> String? {
        let commands = configuration.subcommands.map { $0._commandName }
        var command: any ParsableCommand.Type = Copy.self
        var rest = arguments[...]
        if let first = rest.first, !first.hasPrefix("-") {
            if first == "help" { return nil }
            if first == "adopt" {
                let store = rest.dropFirst().first { !$0.hasPrefix("-") } ?? "plain-sqlite:app.db"
                let path = store.split(separator: ":", maxSplits: 1).last.map(String.init) ?? store
                return "'adopt' is not a command of migrate-store: a database is not adopted in place (that would "
                    + "rewrite the user's file beyond undoing); copy it into a store instead, which leaves it as it "
                    + "was: migrate-store copy --from plain-sqlite:\(path) --to sqlite:\((path as NSString).deletingPathExtension).sqlite"
            }
            guard let named = configuration.subcommands.first(where: { $0._commandName == first }) else {
                let near = closest(first, among: commands).map { "did you mean '\($0)'? " } ?? ""
                return "'\(first)' is not a command of migrate-store; \(near)the commands are "
                    + commands.joined(separator: ", ") + " (copy when none is given: migrate-store --from A --to B)"
            }
            command = named
            rest = rest.dropFirst()
        }
        let help = helpMessage(for: command, includeHidden: true, columns: 1_000)
        var known: Set<String> = ["--help", "--version", "--generate-completion-script", "--experimental-dump-help"]
        for match in help.matches(of: /--[a-z][a-z0-9-]*/) { known.insert(String(match.output)) }
        for argument in rest {
            if argument == "--" { break }
            guard argument.hasPrefix("--") else { continue }
            let name = String(argument.prefix { $0 != "=" })
            if known.contains(name) { continue }
            let near = closest(name, among: known.sorted()).map { "; did you mean '\($0)'?" } ?? ""
            let commandName = command._commandName
            return "unknown option '\(name)' for \(commandName)\(near) (migrate-store \(commandName) --help lists them)"
        }
        return nil
    }

    /// The word among `candidates` within two edits of `word`, the nearest first.
    private static func closest(_ word: String, among candidates: [String]) -> String? {
        func distance(_ a: [Character], _ b: [Character]) -> Int {
            var previous = Array(0...b.count)
            for (i, x) in a.enumerated() {
                var current = [i + 1]
                for (j, y) in b.enumerated() {
                    current.append(Swift.min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
                }
                previous = current
            }
            return previous[b.count]
        }
        let scored = candidates.map { ($0, distance(Array(word), Array($0))) }.filter { $0.1 <= 2 }
        return scored.min { $0.1 < $1.1 }?.0
    }

    /// The exit code (and the one-line message on standard error) for an error of a command.
    public static func exitCode(for error: any Error) -> ExitCode { CommandFailure.exit(for: error) }
}

/// How progress is shown.
enum ProgressStyle: String, ExpressibleByArgument, CaseIterable {
    case auto, bar, plain, none
}

/// The options every source-to-destination command shares.
struct TransferOptions: ParsableArguments {
    @Option(help: "The source store: KIND:PATH, or a bare KIND for the store named by --store (it is never written).")
    var from: String

    @Option(help: "The destination store: KIND:PATH, or a bare KIND.")
    var to: String

    @Option(help: ArgumentHelp("The store's name (PATH/NAME) for a bare KIND: sqlite means NAME.sqlite, lmdb NAME.lmdb. "
        + "Default: the one store in the current directory.", valueName: "path/name"))
    var store: String?

    @Option(help: "Only these entities, comma-separated (default: all).")
    var entities: String?

    @Option(help: ArgumentHelp("Items per write transaction and checkpoint (default: 1000; a copy into postgres "
        + "writes up to 10000, as many as fit in 32 MiB)."), transform: { try positiveCount($0, "--batch-size") })
    var batchSize: PositiveInt?

    @Option(help: "Progress display: auto (a bar on a terminal, plain lines otherwise), bar, plain or none.")
    var progress: ProgressStyle = .auto

    @Option(help: "Write the summary as JSON to this file.")
    var report: String?

    @OptionGroup var foreign: ForeignSourceOptions

    @Option(help: ArgumentHelp("Encrypt the destination with the key in this file: 64 hexadecimal digits (openssl rand "
        + "-hex 32) or a passphrase. The key is never printed.", valueName: "path"))
    var toKeyFile: String?

    var entityList: [String]? {
        entities.map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
    }

    func locations() throws -> (StoreLocation, StoreLocation) {
        let resolved = try StoreLocation.resolve([from, to], store: store)
        return (try foreign.apply(to: resolved[0]), try resolved[1].with(key: toKeyFile.map { try StoreKey(contentsOfFile: $0) }))
    }
}

/// `--key-file` of the commands that write one store (`import`, `upgrade`).
struct StoreKeyOption: ParsableArguments {
    @Option(help: ArgumentHelp("The file that holds the store's key, if it is encrypted: 64 hexadecimal digits or a "
        + "passphrase. The key is never printed.", valueName: "path"))
    var keyFile: String?

    /// `location`, opened with the key of the file.
    func apply(to location: StoreLocation) throws -> StoreLocation {
        try location.with(key: keyFile.map { try StoreKey(contentsOfFile: $0) })
    }
}

/// How to read a Core Data or plain SQLite source: its model and the attributes that key its
/// entities (``ForeignSource``'s `model=` and `key=`, as options).
struct ForeignSourceOptions: ParsableArguments {
    @Option(help: ArgumentHelp("For a coredata: source, the app's model (.xcdatamodeld, .xcdatamodel or its contents "
        + "file) instead of the one the store keeps.", valueName: "model"))
    var model: String?

    @Option(help: ArgumentHelp("For a coredata: or plain-sqlite: source, the attribute (column) that keys an entity's "
        + "(table's) items instead of Z_PK or the primary key (ENTITY=ATTRIBUTE or ENTITY.ATTRIBUTE); repeat it for "
        + "more entities.",
        valueName: "entity=attribute"))
    var key: [String] = []

    @Option(help: ArgumentHelp("The file that holds the key of an encrypted store (64 hexadecimal digits or a "
        + "passphrase), or of an encrypted realm: source (64 bytes or 128 hexadecimal digits). The key is never printed.",
        valueName: "path"))
    var keyFile: String?

    /// `location` with the options in its path.
    /// - Throws: a usage error when an option is given for a source of another kind or `--key`
    ///   is neither ENTITY=ATTRIBUTE nor ENTITY.ATTRIBUTE.
    func apply(to location: StoreLocation) throws -> StoreLocation {
        guard model != nil || !key.isEmpty || keyFile != nil else { return location }
        if let keyFile, model == nil, key.isEmpty, !location.isForeignSource {
            return location.with(key: try StoreKey(contentsOfFile: keyFile))
        }
        guard location.isForeignSource else {
            throw StoreError(.invalidArgument, "--model and --key read coredata:, plain-sqlite: and realm: sources "
                + "(--key-file alone opens an encrypted store of any kind); \(location) is a \(location.kind) store")
        }
        var source = try ForeignSource(parsing: location.path)
        if let keyFile {
            guard location.kind == "realm" else {
                throw StoreError(.invalidArgument, "--key-file is for encrypted realm: sources; \(location) is a "
                    + "\(location.kind): source")
            }
            // An absolute path, so that a copy resumed from another directory reads the same key.
            source.keyFile = URL(fileURLWithPath: keyFile).standardizedFileURL.path
        }
        if let model { source.model = model }
        for pair in key { try source.addKey(pair, spelled: "--key \(pair)") }
        return StoreLocation(kind: location.kind, path: source.description)
    }
}

/// A count read from the command line: a whole number of at least 1, or a one-line refusal
/// naming the option.
func positiveCount(_ text: String, _ option: String) throws -> PositiveInt {
    guard let number = Int(text) else {
        if !text.isEmpty, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) {
            throw ValidationError("\(option) must be at most \(Int.max) (it is \(text))")
        }
        throw ValidationError("\(option) must be a whole number (it is '\(text)')")
    }
    do {
        return try PositiveInt(number, naming: option)
    } catch {
        throw ValidationError(error.message)
    }
}
