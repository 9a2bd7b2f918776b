@_spi(Backend) import DataStoreAPI
import Foundation

/// Writes an entity's items as JSON the way an app's API sends them: one array of objects, with
/// relationships nested, as keys, or left out, and keys as stored or in snake_case. What it
/// writes, ``JSONImport`` reads back into the same items.
///
/// - **nested**: each to-many relationship is an array of the related objects, themselves with
///   their to-many relationships nested, to any depth; a nested object leaves out the
///   relationship that leads back to its parent (the import sets it), and one that leads to an
///   entity already above it (a self-reference) is written as keys.
/// - **ids**: each to-many relationship is an array of the related items' keys (`notes_ids` in
///   snake_case).
/// - **none**: attributes only.
///
/// - A to-one is, in nested form, the related item as an object (its attributes and its own
///   to-ones, nested the same way, not its to-manys), so that an export of one entity imported
///   into an empty store brings the items it refers to and gives back the same links; it is the
///   related item's key when the relationship leads to an entity already above it (a
///   self-reference) or names no item. In ids form it is the key (`company_id` in snake_case).
/// Values are written as the JSON Lines kind writes them: dates in ISO 8601 with microseconds,
/// bytes in base64, uuids as text, infinities as the strings `"Infinity"` and `"-Infinity"`.
public enum JSONExport {
    /// How relationships are written.
    public enum Relationships: String, Sendable, CaseIterable {
        case nested, ids, none
    }

    /// What an export writes.
    public struct Options: Sendable {
        /// How relationships are written.
        public var relationships: Relationships
        /// Keys in snake_case (`createdAt` as `created_at`, `userID` as `user_id`), as most APIs
        /// send them; else as stored.
        public var snakeCase: Bool
        /// Which items to write (all by default).
        public var filter: Filter
        /// Items read per query.
        public var pageSize: PositiveInt

        public init(relationships: Relationships = .nested, snakeCase: Bool = false, filter: Filter = .all,
                    pageSize: PositiveInt = 500) {
            self.relationships = relationships
            self.snakeCase = snakeCase
            self.filter = filter
            self.pageSize = pageSize
        }
    }

    /// Writes the items of `entityName` matching the filter, read in one snapshot, to `path` as
    /// a JSON array, one object per line, in primary-key order; returns how many. The file
    /// appears only when complete.
    /// - Throws: `unknownEntity`; `notFound` when the file's directory does not exist, `readOnly`
    ///   when it cannot be written there, `io` when a write fails.
    @discardableResult
    public static func run(from store: any DataStore, entity entityName: String, options: Options = Options(),
                           to path: String) throws -> Int {
        try JSONLines.checkOutputFile(path, option: "the export file")
        let temporary = path + ".exporting"
        let directory = PathNames.directory(of: path)
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw StoreError(.invalidArgument, "\(path) is a directory; name a file to write (\(path)/export.json)")
        }
        guard FileManager.default.fileExists(atPath: directory.isEmpty ? "." : directory, isDirectory: &isDirectory),
              isDirectory.boolValue else {
            throw StoreError(.notFound, "\(path) cannot be written: the directory \(directory) does not exist")
        }
        guard FileManager.default.createFile(atPath: temporary, contents: nil),
              let handle = FileHandle(forWritingAtPath: temporary) else {
            throw StoreError(.readOnly, "\(path) cannot be written: \(directory.isEmpty ? "the current directory" : directory) "
                + "is not writable")
        }
        do {
            let count = try store.read { reader -> Int in
                guard let entity = reader.schema.entity(named: entityName) else {
                    throw StoreError(.unknownEntity, "the store has no entity '\(entityName)' (it has "
                        + reader.schema.entities.map(\.name).joined(separator: ", ") + ")")
                }
                let writer = ExportWriter(schema: reader.schema, options: options)
                let includes = writer.includes(for: entity, above: [entity.name])
                var out: [UInt8] = [0x5B]
                var count = 0
                // Pages in key order by the ordered key scan, which every engine answers from
                // where the last page ended; the filter, if any, applies to each page.
                let check = options.filter == .all ? nil : try PageFilter(options.filter, reader, entity)
                try reader.forEachPage(entity, pageSize: options.pageSize.value) { scanned in
                    let page = try check.map { try $0.matching(scanned) } ?? scanned
                    for item in try reader.related(to: page, of: entity.name, including: includes) {
                        out += count == 0 ? [0x0A] : [0x2C, 0x0A]
                        writer.append(item, of: entity, above: [entity.name], omit: nil, to: &out)
                        count += 1
                    }
                    try write(&out, to: handle, path)
                    return true
                }
                out += [0x0A, 0x5D, 0x0A]
                try write(&out, to: handle, path)
                return count
            }
            try handle.synchronize()
            try handle.close()
            guard rename(temporary, path) == 0 else {
                throw StoreError(.io, "\(path) cannot be written: \(String(cString: strerror(errno)))")
            }
            return count
        } catch {
            try? handle.close()
            unlink(temporary)
            throw error
        }
    }

    private static func write(_ out: inout [UInt8], to handle: FileHandle, _ path: String) throws {
        do {
            try handle.write(contentsOf: out)
        } catch {
            throw StoreError(.io, "\(path) cannot be written: \(error.localizedDescription)")
        }
        out.removeAll(keepingCapacity: true)
    }
}

/// The export's filter applied to a page of items: the items among them the filter matches,
/// found by one query on their keys.
struct PageFilter {
    let filter: Filter
    let reader: ReadAccessor
    let entity: EntitySchema

    init(_ filter: Filter, _ reader: ReadAccessor, _ entity: EntitySchema) throws {
        self.filter = filter
        self.reader = reader
        self.entity = entity
        // A filter that names what the entity does not have fails before anything is written.
        _ = try reader.count(FetchRequest(entity.name, filter: filter, limit: 1))
    }

    func matching(_ records: [Record]) throws -> [Record] {
        guard let first = records.first?[entity.primaryKey], let last = records.last?[entity.primaryKey] else {
            return []
        }
        // The page's key range, so that the query reads only the page.
        return try reader.fetch(FetchRequest(entity.name, filter: .and([
            filter, .compare(entity.primaryKey, .greaterOrEqual, first),
            .compare(entity.primaryKey, .lessOrEqual, last),
        ]), sort: [.ascending(entity.primaryKey)]))
    }
}

/// Writes one item and what is nested in it.
struct ExportWriter {
    let schema: Schema
    let options: JSONExport.Options

    /// The relationships loaded with `entity`'s items: the to-manys but `omit` (the one that
    /// leads back to the parent an item is nested in), each with what is nested in it when it
    /// does not lead back to an entity above; in nested form, the to-ones that do not lead to an
    /// entity above, with their own to-ones (`toOnesOnly`: a to-one's object carries no to-many).
    func includes(for entity: EntitySchema, above: [String], omit: String? = nil,
                  toOnesOnly: Bool = false) -> [Include] {
        guard options.relationships != .none else { return [] }
        var includes: [Include] = []
        for relationship in entity.relationships where relationship.name != omit {
            let destination = schema.entity(named: relationship.destination)
            let nests = options.relationships == .nested && !above.contains(relationship.destination)
            switch relationship.cardinality {
            case .toOne:
                guard nests, let destination else { continue }
                includes.append(Include(relationship.name, including: self.includes(
                    for: destination, above: above + [destination.name], toOnesOnly: true)))
            case .toMany:
                guard !toOnesOnly else { continue }
                guard nests, let destination else {
                    includes.append(Include(relationship.name))
                    continue
                }
                includes.append(Include(relationship.name, including: self.includes(
                    for: destination, above: above + [destination.name], omit: relationship.inverse)))
            }
        }
        return includes
    }

    func key(_ name: String, keys: Bool = false, many: Bool = false) -> String {
        guard options.snakeCase else { return name }
        let snake = ImportNames.snakeCase(name)
        return keys ? snake + (many ? "_ids" : "_id") : snake
    }

    /// Appends `item`'s object; `omit` is the relationship that leads back to the object it is
    /// nested in, which is left out; `toOnesOnly` leaves out the to-manys (a to-one's object).
    func append(_ item: RelatedRecord, of entity: EntitySchema, above: [String], omit: String?,
                toOnesOnly: Bool = false, to out: inout [UInt8]) {
        out.append(0x7B)
        var first = true
        func field(_ name: String) {
            if !first { out.append(0x2C) }
            first = false
            JSONLineCodec.appendString(name, to: &out)
            out.append(0x3A)
        }
        for attribute in entity.attributes {
            if let relationship = entity.relationship(named: attribute.name) {
                guard options.relationships != .none, relationship.name != omit else { continue }
                if options.relationships == .nested, !above.contains(relationship.destination),
                   let destination = schema.entity(named: relationship.destination) {
                    if let target = item.related[relationship.name]?.first {
                        field(key(attribute.name))
                        append(target, of: destination, above: above + [destination.name], omit: nil,
                               toOnesOnly: true, to: &out)
                        continue
                    }
                    if item.record[attribute.name].isNull {
                        field(key(attribute.name))
                        out += Array("null".utf8)
                        continue
                    }
                }
                field(key(attribute.name, keys: true))
            } else {
                field(key(attribute.name))
            }
            JSONLineCodec.appendValue(item.record[attribute.name], to: &out)
        }
        guard options.relationships != .none, !toOnesOnly else {
            out.append(0x7D)
            return
        }
        for relationship in entity.relationships where relationship.cardinality == .toMany && relationship.name != omit {
            guard let destination = schema.entity(named: relationship.destination) else { continue }
            let related = item.related[relationship.name] ?? []
            let nests = options.relationships == .nested && !above.contains(destination.name)
            field(key(relationship.name, keys: !nests, many: true))
            out.append(0x5B)
            for (index, child) in related.enumerated() {
                if index > 0 { out.append(0x2C) }
                if nests {
                    append(child, of: destination, above: above + [destination.name], omit: relationship.inverse,
                           to: &out)
                } else {
                    JSONLineCodec.appendValue(child.record[destination.primaryKey], to: &out)
                }
            }
            out.append(0x5D)
        }
        out.append(0x7D)
    }
}
