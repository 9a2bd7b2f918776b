@_spi(Backend) import DataStoreAPI
import Foundation

/// Where a foreign store is and how to read it: `PATH`, then optionally `?model=MODEL` (a Core
/// Data `.xcdatamodeld`, `.xcdatamodel` or `contents` file) and `&key=ENTITY.ATTRIBUTE` (the
/// attribute that keys an entity's items; for a plain SQLite table, a unique non-null column or
/// `rowid`), any number of times, and for an encrypted Realm file `keyfile=PATH` (the file that
/// holds its key: the key itself is never part of a location).
///
/// `coredata:App.sqlite?model=App.xcdatamodeld&key=Note.id` reads a Core Data store with the
/// app's model, keying notes by their `id`. The options are part of the location, so that a
/// copy interrupted and resumed reads the source the same way.
public struct ForeignSource: Sendable, Hashable {
    public var path: String
    public var model: String?
    /// Entity (or table) name → the attribute (or column) that keys it.
    public var keys: [String: String]
    /// For a plain SQLite database, the only tables read (`tables=A,B`, what `--entities` gives
    /// a copy, sync, verify or diff), before any table is checked; `nil` for all of them.
    public var tables: [String]?
    /// For an encrypted Realm file, the file that holds its 64-byte key.
    public var keyFile: String?

    public init(path: String, model: String? = nil, keys: [String: String] = [:], tables: [String]? = nil,
                keyFile: String? = nil) {
        self.path = path
        self.model = model
        self.keys = keys
        self.tables = tables
        self.keyFile = keyFile
    }

    /// Parses `PATH[?model=M][&key=E.a…]`.
    /// - Throws: `invalidArgument` naming an option it does not know or a key without an entity.
    public init(parsing text: String) throws(StoreError) {
        guard let mark = text.lastIndex(of: "?"), text[text.index(after: mark)...].contains("=") else {
            self.init(path: text)
            return
        }
        var source = ForeignSource(path: String(text[..<mark]))
        for item in text[text.index(after: mark)...].split(separator: "&") {
            guard let equals = item.firstIndex(of: "=") else {
                throw StoreError(.invalidArgument, "'\(item)' in '\(text)' is not OPTION=VALUE (model=… or key=…)")
            }
            let name = item[..<equals], value = String(item[item.index(after: equals)...])
            switch name {
            case "model": source.model = value
            case "key":
                try source.addKey(value, spelled: "key=\(value) in '\(text)'")
            case "tables":
                source.tables = value.split(separator: ",").map(String.init)
            case "keyfile":
                source.keyFile = value
            default:
                throw StoreError(.invalidArgument, "'\(name)' in '\(text)' is not an option of a foreign store; they "
                    + "are model=PATH, key=ENTITY.ATTRIBUTE, tables=A,B and keyfile=PATH")
            }
        }
        self = source
    }

    /// Adds the key `text` names: `ENTITY.ATTRIBUTE`, or `ENTITY=ATTRIBUTE` as `--key` also
    /// takes it (the one reader of both spellings); `spelled` is how messages name it.
    /// - Throws: `invalidArgument` when it is neither, or names an entity that has a key already.
    public mutating func addKey(_ text: String, spelled: String) throws(StoreError) {
        let separator: Character = text.contains("=") ? "=" : "."
        let parts = text.split(separator: separator, maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw StoreError(.invalidArgument, "\(spelled) must be ENTITY.ATTRIBUTE (or ENTITY=ATTRIBUTE)")
        }
        if let other = keys[parts[0]], other != parts[1] {
            throw StoreError(.invalidArgument, "\(spelled) gives '\(parts[0])' a second key: it is keyed by "
                + "'\(other)' already")
        }
        keys[parts[0]] = parts[1]
    }

    /// Refuses `keyfile=` for a source that is never encrypted.
    func refuseKeyFile(kind: String) throws(StoreError) {
        guard keyFile != nil else { return }
        throw StoreError(.invalidArgument, "keyfile= (--key-file) is for encrypted realm: files; a \(kind): source "
            + "has no encryption key")
    }

    /// The text `init(parsing:)` reads.
    public var description: String {
        var options: [String] = []
        if let model { options.append("model=\(model)") }
        options += keys.sorted { $0.key < $1.key }.map { "key=\($0.key).\($0.value)" }
        if let tables { options.append("tables=" + tables.sorted().joined(separator: ",")) }
        if let keyFile { options.append("keyfile=\(keyFile)") }
        return options.isEmpty ? path : path + "?" + options.joined(separator: "&")
    }
}

/// A file this toolkit reads as a source and never writes (a Core Data store, a plain SQLite
/// database): what it is, for `inspect`, where a store of this toolkit shows its schema version,
/// state and history.
public protocol ForeignStore: DataStore {
    /// What the mapping did, in one line.
    var summary: String { get }
    /// What the file is, one fact per line.
    var facts: [String] { get }
}
