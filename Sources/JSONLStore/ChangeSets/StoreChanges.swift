@_spi(Backend) import DataStoreAPI
import Foundation

/// One item-level difference between two stores: what `sync` would do to the destination.
public enum StoreChange: Sendable, Hashable {
    /// The source holds an item the destination does not.
    case insert(entity: String, item: Record)
    /// Both hold the key with different values: `old` is the destination's item, `new` the
    /// source's.
    case update(entity: String, old: Record, new: Record)
    /// The destination holds an item the source does not.
    case delete(entity: String, item: Record)

    /// The entity the change is in.
    public var entity: String {
        switch self {
        case .insert(let entity, _), .update(let entity, _, _), .delete(let entity, _): return entity
        }
    }
}

/// The JSON Lines form of a list of ``StoreChange``s (`migrate-store diff`), lossless like
/// ``JSONLineCodec``:
///
/// ```
/// {"datastore":"diff","format":1,"from":"sqlite:a.sqlite","to":"lmdb:b.lmdb","schema":{...}}
/// {"op":"insert","entity":"Customer","key":7,"item":{"id":7,"name":"Ann",...}}
/// {"op":"update","entity":"Customer","key":8,"changes":{"name":{"old":"Bo","new":"Bob"}},"item":{...}}
/// {"op":"delete","entity":"Customer","key":9,"item":{"id":9,"name":"Cy",...}}
/// ```
///
/// An update lists each changed attribute with the destination's (`old`) and the source's
/// (`new`) value, and the whole new item; a delete carries the item deleted. Applying a diff
/// checks each line against the destination first (``StoreChanges/apply(_:to:)``).
public enum StoreChanges {
    static let format = 1

    /// The header line.
    public static func header(schema: Schema, from source: String, to destination: String) throws -> [UInt8] {
        var out = Array(#"{"datastore":"diff","format":\#(format),"from":"#.utf8)
        JSONLineCodec.appendString(source, to: &out)
        out += Array(#","to":"#.utf8)
        JSONLineCodec.appendString(destination, to: &out)
        out += Array(#","schema":"#.utf8) + (try JSONLHeader.schemaJSON(schema)) + [0x7D]
        return out
    }

    /// One change's line, without the newline.
    public static func encode(_ change: StoreChange, of entity: EntitySchema) -> [UInt8] {
        var out = Array(#"{"op":""#.utf8)
        let item: Record
        switch change {
        case .insert(_, let record):
            out += Array("insert".utf8)
            item = record
        case .update:
            out += Array("update".utf8)
            guard case .update(_, _, let new) = change else { return [] }
            item = new
        case .delete(_, let record):
            out += Array("delete".utf8)
            item = record
        }
        out += Array(#"","entity":"#.utf8)
        JSONLineCodec.appendString(entity.name, to: &out)
        out += Array(#","key":"#.utf8)
        JSONLineCodec.appendValue(item[entity.primaryKey], to: &out)
        if case .update(_, let old, let new) = change {
            out += Array(#","changes":{"#.utf8)
            var first = true
            for attribute in entity.attributes where old[attribute.name] != new[attribute.name] {
                if !first { out.append(0x2C) }
                first = false
                JSONLineCodec.appendString(attribute.name, to: &out)
                out += Array(#":{"old":"#.utf8)
                JSONLineCodec.appendValue(old[attribute.name], to: &out)
                out += Array(#","new":"#.utf8)
                JSONLineCodec.appendValue(new[attribute.name], to: &out)
                out.append(0x7D)
            }
            out.append(0x7D)
        }
        out += Array(#","item":"#.utf8)
        JSONLineCodec.appendItem(item, of: entity, to: &out)
        out.append(0x7D)
        return out
    }

    /// Reads a diff file: its header, then each change in order.
    /// - Throws: one-line `corrupt` errors naming the file and the line.
    @discardableResult
    public static func read(_ path: String, _ body: (EntitySchema, StoreChange) throws -> Void) throws
        -> (schema: Schema, from: String, to: String)
    {
        let reader = try JSONLLineReader(path: path)
        guard let first = try reader.next() else { throw StoreError(.notAStore, "\(path) is empty") }
        struct Header: Decodable {
            var datastore: String
            var format: Int
            var from: String
            var to: String
            var schema: Schema
        }
        guard let header = try? JSONDecoder().decode(Header.self, from: Data(first)), header.datastore == "diff" else {
            throw StoreError(.notAStore, "\(path): line 1 is not the header of a diff written by migrate-store diff")
        }
        guard header.format <= format else {
            throw StoreError(.incompatibleFormat, "\(path) is diff format \(header.format); this version reads up "
                + "to \(format)")
        }
        try header.schema.validate()
        while let line = try reader.next() {
            let (entity, change) = try decode(line, schema: header.schema, path: path, lineNumber: reader.lineNumber)
            try body(entity, change)
        }
        return (header.schema, header.from, header.to)
    }

    /// One change's line.
    static func decode(_ line: [UInt8], schema: Schema, path: String, lineNumber: Int) throws
        -> (EntitySchema, StoreChange)
    {
        let fail = { (what: String) in StoreError(.corrupt, "\(path): line \(lineNumber): \(what)") }
        guard case .object(let fields) = try JSONLineCodec.parse(line, fail),
            case .string(let op)? = fields.first(where: { $0.key == "op" })?.value,
            case .string(let entityName)? = fields.first(where: { $0.key == "entity" })?.value,
            case .object(let values)? = fields.first(where: { $0.key == "item" })?.value
        else { throw fail(#"expected {"op":...,"entity":...,"key":...,"item":{...}}"#) }
        guard let entity = schema.entity(named: entityName) else { throw fail("unknown entity '\(entityName)'") }
        let item = try JSONLineCodec.item(values, of: entity, fail)
        if let problem = normalizationProblem(item, entity) { throw fail(problem) }
        guard let keyJSON = fields.first(where: { $0.key == "key" })?.value,
            let pkType = entity.attributes.first(where: { $0.name == entity.primaryKey })?.type,
            JSONLineCodec.value(keyJSON, as: pkType) == item[entity.primaryKey]
        else { throw fail("its key is missing or is not the item's") }
        switch op {
        case "insert": return (entity, .insert(entity: entity.name, item: item))
        case "delete": return (entity, .delete(entity: entity.name, item: item))
        case "update":
            guard case .object(let changes)? = fields.first(where: { $0.key == "changes" })?.value else {
                throw fail("an update without its changes")
            }
            var old = item
            for (name, change) in changes {
                guard let attribute = entity.attributes.first(where: { $0.name == name }) else {
                    throw fail("'\(entity.name)' has no attribute '\(name)'")
                }
                guard case .object(let sides) = change,
                    let oldJSON = sides.first(where: { $0.key == "old" })?.value,
                    let newJSON = sides.first(where: { $0.key == "new" })?.value,
                    let oldValue = JSONLineCodec.value(oldJSON, as: attribute.type),
                    JSONLineCodec.value(newJSON, as: attribute.type) == item[name]
                else { throw fail("the change of '\(name)' is not {\"old\":...,\"new\":...} of the item's type") }
                old[name] = oldValue
            }
            if let problem = normalizationProblem(old, entity) { throw fail(problem) }
            return (entity, .update(entity: entity.name, old: old, new: item))
        default: throw fail("unknown op '\(op)' (insert, update or delete)")
        }
    }

    /// Why the schema does not allow `item`, if it does not.
    private static func normalizationProblem(_ item: Record, _ entity: EntitySchema) -> String? {
        do {
            _ = try entity.normalize(item)
            return nil
        } catch {
            return error.message
        }
    }

    /// Writes changes as a diff file (gzip-compressed when `path` ends in `.gz`), which appears
    /// only when complete.
    public final class Writer {
        private let stream: JSONLStreamWriter?
        private let output: FileHandle?
        private var pending: [UInt8] = []

        /// A diff into `path`, or to standard output when `path` is `nil` or `-`.
        public init(path: String?, schema: Schema, from source: String, to destination: String) throws {
            if let path, path != "-" {
                stream = try JSONLStreamWriter.lines(at: path)
                output = nil
            } else {
                stream = nil
                output = FileHandle.standardOutput
            }
            try write(header(schema: schema, from: source, to: destination))
        }

        /// Writes one change as a line.
        public func write(_ change: StoreChange, of entity: EntitySchema) throws {
            try write(encode(change, of: entity))
        }

        private func write(_ line: [UInt8]) throws {
            if let stream { return try stream.write(line: line) }
            pending += line
            pending.append(0x0A)
            if pending.count >= 1 << 16 { try flush() }
        }

        /// Writes the lines kept so far to the output handle (standard output): a write that
        /// fails (a full disk, a closed pipe) throws `io` naming the cause (the non-throwing
        /// write trapped on it).
        private func flush() throws {
            guard let output, !pending.isEmpty else { return }
            do {
                try output.write(contentsOf: pending)
            } catch {
                throw StoreError(.io, "cannot write the changes to standard output: \(error.localizedDescription)")
            }
            pending.removeAll(keepingCapacity: true)
        }

        /// Makes the file durable and moves it into place.
        public func finish() throws {
            try flush()
            try stream?.finish()
        }

        /// Stops writing and removes the unfinished file.
        public func abandon() { stream?.abandon() }
    }
}
