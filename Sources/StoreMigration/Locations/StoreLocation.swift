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

    /// The store of `kind` at `path`.
    public init(kind: StoreKind, path: String) {
        self.kind = kind
        self.path = path
    }

    /// Parses `KIND:PATH` or a bare path.
    /// - Throws: `invalidArgument` naming the text for an unknown kind, a kind without a path,
    ///   or a bare path whose kind cannot be told.
    public init(parsing text: String) throws(StoreError) {
        if let colon = text.firstIndex(of: ":") {
            let kind = StoreKind(rawValue: String(text[..<colon]))
            let path = String(text[text.index(after: colon)...])
            _ = try StoreBackends.backend(kind)
            guard !path.isEmpty else {
                throw StoreError(.invalidArgument, "'\(text)' names no path; write \(kind):PATH")
            }
            self.init(kind: kind, path: path)
            return
        }
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
                "'\(text)' has no kind and does not exist; write KIND:\(text) with "
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
                    names.isEmpty
                        ? "no store in \(directory) to name; give one with --store PATH/NAME"
                        : "\(directory) holds several stores (\(names.joined(separator: ", "))); "
                            + "choose one with --store NAME"
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
        try backend.open(at: path, schema: schema, durability: durability)
    }

    /// Deletes the store's files (or in-memory database).
    public func destroy() throws { try backend.destroy(at: path) }

    /// Moves the store to `other` (same kind), replacing nothing: `other` must not exist.
    func move(to other: StoreLocation) throws { try backend.move(from: path, to: other.path) }

    /// Bytes on disk (0 for memory).
    public var sizeOnDisk: Int64 { (try? backend.sizeOnDisk(at: path)) ?? 0 }
}
