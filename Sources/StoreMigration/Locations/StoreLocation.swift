@_spi(Backend) import DataStoreAPI
import Foundation

/// Where a store lives: `KIND:PATH`.
///
/// `sqlite:app.sqlite` is a SQLite file, `lmdb:app.lmdb` an LMDB environment directory,
/// `memory:NAME` an in-memory store of this process; any registered kind works the same way
/// (``StoreBackends``). A bare path names what is there (the kind that recognizes it: a
/// directory is LMDB, a file SQLite). A bare kind names a store by its name: see
/// ``resolve(_:store:directory:)``.
public struct StoreLocation: Sendable, Hashable, CustomStringConvertible {
    /// The kind of store: `sqlite`, `lmdb`, `memory`, `jsonl`, `postgres` or a registered one.
    public var kind: StoreKind
    /// Its path (for `memory`, its name; for `postgres`, the URL after `postgres:`).
    public var path: String
    /// The key of an encrypted store (never part of the location's text: `migrate-store` takes
    /// it from a file, `--key-file`), or `nil` for a store without encryption.
    public var key: StoreKey?

    /// The store of `kind` at `path`.
    public init(kind: StoreKind, path: String, key: StoreKey? = nil) {
        self.kind = kind
        self.path = path
        self.key = key
    }

    /// The same location, opened with `key`.
    public func with(key: StoreKey?) -> StoreLocation { StoreLocation(kind: kind, path: path, key: key) }

    /// Parses `KIND:PATH` or a bare path.
    /// - Throws: `invalidArgument` naming the text for an unknown kind, a kind without a path,
    ///   or a bare path whose kind cannot be told.
    public init(parsing text: String) throws(StoreError) {
        // libpq's other scheme, as hosting providers hand it out: the postgres kind.
        if text.hasPrefix("postgresql://") {
            try self.init(parsing: "postgres:" + text.dropFirst("postgresql:".count))
            return
        }
        let shown = LocationSecrets.redacted(text)
        if let colon = text.firstIndex(of: ":") {
            let kind = StoreKind(rawValue: String(text[..<colon]))
            var path = String(text[text.index(after: colon)...])
            let backend = try StoreBackends.backend(kind)
            guard !path.isEmpty else {
                throw StoreError(.invalidArgument, "'\(shown)' names no path; write \(kind):PATH")
            }
            // A store kept in files is named without the slashes a shell's completion leaves
            // after a directory (`lmdb:app.lmdb/`): the files made beside it (`.rekeyed`,
            // `.migrating`) go beside it, not into it.
            if backend.fileExtension != nil {
                while path.count > 1, path.hasSuffix("/") { path.removeLast() }
            }
            self.init(kind: kind, path: path)
            return
        }
        // A bare path names a store kept in files: without the slashes that end it (see above).
        var text = text
        while text.count > 1, text.hasSuffix("/") { text.removeLast() }
        if StoreBackends.kinds.contains(StoreKind(rawValue: text)) {
            throw StoreError(
                .invalidArgument,
                "'\(text)' names no store; write \(text):PATH, or give the store's "
                    + "name with --store")
        }
        if !FileManager.default.fileExists(atPath: text), let backend = Self.backend(namedBySuffixOf: text) {
            // A store to be made (a destination): its suffix names its kind.
            self.init(kind: backend.kind, path: text)
            return
        }
        guard FileManager.default.fileExists(atPath: text),
            let backend = StoreBackends.all.first(where: { $0.recognizes(text) })
        else {
            throw StoreError(
                .invalidArgument,
                "'\(shown)' has no kind and does not exist; write KIND:\(shown) with "
                    + "KIND one of " + StoreBackends.kinds.map(\.rawValue).joined(separator: ", "))
        }
        self.init(kind: backend.kind, path: text)
    }

    /// Resolves store arguments that may be bare kinds (`--from sqlite --to lmdb`): a store has
    /// a name, and its kind decides the file (`app` is `app.sqlite` for SQLite, `app.lmdb` for
    /// LMDB). `store` names it (`PATH/NAME`); without it, the one store found in `directory`
    /// (a file or directory with a registered kind's extension) gives the name.
    /// - Throws: `invalidArgument` when no store or several are found (listing them), and what
    ///   ``init(parsing:)`` throws for the other arguments.
    public static func resolve(
        _ texts: [String], store: String?,
        directory: String = FileManager.default.currentDirectoryPath
    ) throws -> [StoreLocation] {
        try resolve(texts, store: store, directory: directory, takesStoreOption: true)
    }

    /// ``resolve(_:store:directory:)`` for a command that does (`takesStoreOption`) or does not
    /// take `--store`: the advice of its errors names only what the command takes.
    package static func resolve(
        _ texts: [String], store: String?, directory: String = FileManager.default.currentDirectoryPath,
        takesStoreOption: Bool
    ) throws -> [StoreLocation] {
        var name: String?
        func storeName() throws -> String {
            if let name { return name }
            if let store {
                // `--store app.sqlite` names the store `app`, as `--store app` does.
                let named = backend(namedBySuffixOf: store) != nil ? (store as NSString).deletingPathExtension : store
                name = named
                return named
            }
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            let names = Set(
                entries.compactMap { entry -> String? in
                    let path = (directory as NSString).appendingPathComponent(entry)
                    guard let backend = backend(namedBySuffixOf: entry), backend.recognizes(path) else { return nil }
                    return (entry as NSString).deletingPathExtension
                }
            ).sorted()
            guard names.count == 1, let only = names.first else {
                throw StoreError(
                    .invalidArgument,
                    (names.isEmpty
                        ? "no store in \(directory) to name; "
                        : "\(directory) holds several stores (\(names.joined(separator: ", "))); ")
                        + (takesStoreOption
                            ? (names.isEmpty ? "give one with --store PATH/NAME" : "choose one with --store NAME")
                            : "name one as KIND:PATH (for example sqlite:\(names.first ?? "app").sqlite)")
                )
            }
            name = (directory as NSString).appendingPathComponent(only)
            return name ?? only
        }
        return try texts.map { text in
            let kind = StoreKind(rawValue: text)
            guard !text.contains(":"), StoreBackends.kinds.contains(kind) else {
                return try StoreLocation(parsing: text)
            }
            let backend = try StoreBackends.backend(kind)
            let base = try storeName()
            return StoreLocation(kind: kind, path: backend.fileExtension.map { "\(base).\($0)" } ?? base)
        }
    }

    /// The registered backend whose file extension ends `path` (`app.lmdb`: LMDB).
    static func backend(namedBySuffixOf path: String) -> (any StoreBackend)? {
        let suffix = (path as NSString).pathExtension
        guard !suffix.isEmpty else { return nil }
        return StoreBackends.all.first { $0.fileExtension == suffix }
    }

    public var description: String { "\(kind):\(path)" }

    var backend: any StoreBackend {
        get throws(StoreError) { try StoreBackends.backend(kind) }
    }

    /// Whether something (a store or not) is at the location.
    public var exists: Bool { (try? backend.exists(at: path)) ?? false }

    /// Opens the store for reading and writing; with `schema == nil`, an existing store with the
    /// schema it holds.
    public func open(schema: Schema?, durability: Durability = .full) throws -> any DataStore {
        try backend.open(at: path, schema: schema, upgrades: SchemaUpgrades(), durability: durability, key: key)
    }

    /// Deletes the store's files (or in-memory database).
    public func destroy() throws { try backend.destroy(at: path) }

    /// Moves the store to `other` (same kind), replacing nothing: `other` must not exist.
    func move(to other: StoreLocation) throws { try backend.move(from: path, to: other.path) }

    /// Bytes on disk (0 for memory).
    public var sizeOnDisk: Int64 { (try? backend.sizeOnDisk(at: path)) ?? 0 }
}

extension StoreLocation {
    /// Whether the location is a file of another program read as a source (`coredata:`,
    /// `plain-sqlite:`): read from a snapshot, never written, without a change feed.
    public var isForeignSource: Bool { kind == .coreData || kind == .plainSQLite || kind == .realm }

    /// Whether `other` names this very store: the same location, or, for stores kept in files,
    /// the same file or directory under another spelling (`./b.sqlite`, a symbolic or hard
    /// link), told by its device and inode.
    public func isSameStore(as other: StoreLocation) -> Bool {
        if self == other { return true }
        if kind == other.kind, let backend = try? backend, backend.isSameStore(path, as: other.path) { return true }
        guard let mine = try? backend.fileSystemPath(of: path), let theirs = try? other.backend.fileSystemPath(of: other.path)
        else { return false }
        var a = stat()
        var b = stat()
        guard stat(mine, &a) == 0, stat(theirs, &b) == 0 else {
            // Neither exists yet (or one does not): one spelling of one path is still one store.
            return (mine as NSString).standardizingPath == (theirs as NSString).standardizingPath
        }
        return a.st_dev == b.st_dev && a.st_ino == b.st_ino
    }

    /// Throws `invalidArgument` when `destination` is this store (``isSameStore(as:)``).
    public func requireDistinct(from destination: StoreLocation) throws {
        guard isSameStore(as: destination) else { return }
        throw StoreError(.invalidArgument, "source and destination are the same store: \(self)"
            + (self == destination ? "" : " and \(destination) name one store"))
    }

    /// Throws, naming what is there, unless `--overwrite` may replace what is at this location:
    /// nothing, an empty file or directory, or a store of this kind that opens (finished or
    /// not) and holds nothing else. A user's text file named like a store, a directory of their
    /// files, a database of another program, a damaged store: all are refused, never deleted.
    /// - Throws: `invalidArgument`.
    public func requireReplaceable() throws {
        try requireReplaceable(staging: false)
    }

    /// ``requireReplaceable()`` for `staging: true`, the path where a copy creates its
    /// destination before it moves it into place (`PATH.migrating`): only what an interrupted
    /// copy left there is replaced, even without `--overwrite`.
    func requireReplaceable(staging: Bool) throws {
        func refusal(_ what: String) -> StoreError { self.refusal(what, staging: staging) }
        guard exists else { return }
        let backend = try self.backend
        if let file = backend.fileSystemPath(of: path) {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory) else { return }
            if isDirectory.boolValue {
                let entries = ((try? FileManager.default.contentsOfDirectory(atPath: file)) ?? []).sorted()
                if entries.isEmpty { return }
                if !backend.recognizes(file) {
                    throw refusal("it is a directory holding " + Self.list(entries))
                }
                let others = backend.otherFiles(at: file)
                if !others.isEmpty {
                    throw refusal("its directory also holds " + Self.list(others) + Self.notTheStores(others))
                }
            } else {
                let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int64) ?? nil
                if size == 0 { return }
                if !backend.recognizes(file) { throw refusal("it is a file, not a \(kind) store") }
            }
        }
        func openedSchema() throws -> Schema {
            let store = try Migrator.acceptingUnfinished { try openSource() }
            defer { try? store.close() }
            return store.schema
        }
        let schema: Schema
        do {
            do {
                schema = try openedSchema()
            } catch {
                // At the staging path, a copy killed while it created the store may have left a
                // hot journal, which the read-only open cannot roll back; rolled back, it opens.
                // Only there: the staging path is the copy's own, where a destination given
                // `--overwrite` (in a dry run too) is the user's, and is not written to.
                guard staging, backend.rollBackInterruptedWrite(at: path) else { throw error }
                schema = try openedSchema()
            }
        } catch let error as StoreError where ![.unavailable, .io, .busy].contains(error.code) {
            // A store whose creation was killed before its first commit (an empty SQLite
            // database, an LMDB environment with no database) holds nothing: replaced as an
            // empty file is. A server that does not answer, a failed read, a lock held: not
            // "this is not a store", which would tell the user to delete what may be their store.
            if backend.holdsNothing(at: path) { return }
            throw refusal("it does not open as a \(kind) store of this toolkit (\(error.message))")
        }
        // A store that is not files (a PostgreSQL schema) may hold what is not the store's; what
        // cannot be told is refused too.
        if backend.fileSystemPath(of: path) == nil {
            let others: [String]
            do {
                others = try backend.objectsBeside(storeAt: path, schema: schema)
            } catch {
                throw refusal("what else it holds cannot be told (\(error))")
            }
            if !others.isEmpty {
                throw refusal("it also holds " + Self.list(others) + Self.notTheStores(others))
            }
        }
    }

    private func refusal(_ what: String, staging: Bool) -> StoreError {
        if staging {
            return StoreError(.invalidArgument, "\(self) is not replaced: \(what); a copy creates its destination "
                + "there before it moves it into place, and replaces only a \(kind) store an interrupted copy left. "
                + "Move or delete what is there yourself if it is to go, or choose another destination")
        }
        return StoreError(.invalidArgument, "\(self) is not replaced: \(what); --overwrite replaces only a \(kind) "
            + "store (or an empty file or directory). Move or delete what is there yourself if it is to go, or "
            + "choose another destination")
    }

    private static func notTheStores(_ names: [String]) -> String {
        names.count == 1 ? ", which is not the store's" : ", which are not the store's"
    }

    private static func list(_ names: [String]) -> String {
        names.prefix(3).joined(separator: ", ") + (names.count > 3 ? " and \(names.count - 3) more" : "")
    }
}

extension Store {
    /// `store` as the package's ``Store``, which what `what` needs (the reference checks a
    /// switch suspends and restores, the change hub a follow waits on) belongs to; a conformer of
    /// `DataStore` that is not one is refused in one line, never served by a silent fallback
    /// that does less.
    /// - Throws: `invalidArgument` naming `location` and the type.
    package static func required(_ store: any DataStore, at location: StoreLocation, for what: String) throws -> Store {
        guard let engineStore = store as? Store else {
            throw StoreError(.invalidArgument, "\(location) opened as a \(type(of: store)), not a store of this "
                + "toolkit's engine: \(what) needs its reference checks and change hub; a backend opens its stores "
                + "as Store(engine:) (see WritingABackend)")
        }
        return engineStore
    }
}
