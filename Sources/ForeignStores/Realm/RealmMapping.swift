@_spi(Backend) import DataStoreAPI
import Foundation

/// A Realm file's classes as entities, and their objects as records, read once when the file is
/// opened.
///
/// - **Classes** are the tables named `class_NAME`; the entity is `NAME`. Other tables (the
///   schema version in `metadata`, a synced Realm's internal tables) are not the app's data.
/// - **Keys.** A class with a primary key (int, string, ObjectId, UUID) is keyed by it; one
///   without is keyed by the object's key in the file, an int attribute `realm_key` (stable for
///   the file: a copy resumed or verified later reads the same keys).
/// - **Values.** int → int; bool → bool; float and double → double; string → string; data →
///   bytes; date → date (Realm keeps seconds and nanoseconds; the date keeps whole
///   microseconds, the nanoseconds below them dropped); ObjectId → string of its 24 hex digits;
///   UUID → uuid; optional properties → optional attributes.
/// - **Links.** A link is a to-one holding the target's key; a list of links an ordered
///   to-many, a set of links an unordered one, their pairs in a join entity. Each gets an inverse
///   on the target, named `CLASS_PROPERTY` (Realm's backlinks, which the file keeps as hidden
///   columns, are that inverse). Deleting an object nullifies the links to it, as Realm does;
///   a link to an embedded object owns it (delete rule cascade).
/// - **Refused** in one line naming class and property: Decimal128, Mixed, typed links, lists,
///   sets and dictionaries of values, dictionaries of links, a list that holds one object twice,
///   a null primary key, and a class or property name the stores here cannot hold.
struct RealmMapping {
    let schema: Schema
    /// Each entity's records, in primary-key order.
    let records: [String: [Record]]
    let summary: String

    /// The attribute that keys a class without a primary key.
    static let objectKeyAttribute = "realm_key"

    init(_ model: RealmModel) throws {
        let file = model.file
        let classes = model.tables.filter { $0.name.hasPrefix("class_") && $0.name.utf8.count > 6 }
        let byTableKey = Dictionary(model.tables.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        func entityName(_ table: RealmModel.Table) -> String { String(table.name.dropFirst(6)) }
        func refuse(_ table: RealmModel.Table, _ column: RealmModel.Column, _ why: String) -> StoreError {
            StoreError(.invalidArgument, "property '\(entityName(table)).\(column.name)' of \(file.path) \(why)")
        }

        // The key of every object of every class, first: links name their targets by it.
        var objects: [String: [(key: Int64, values: [Value?])]] = [:]
        var keyOf: [String: [Int64: Value]] = [:]
        var keyType: [String: ValueType] = [:]
        for table in classes {
            let name = entityName(table)
            try Schema.checkName(name, what: "entity")
            var decoded: [(key: Int64, values: [Value?])] = []
            try model.forEachLeaf(of: table) { leaf, keys in
                var columns: [[Value?]] = []
                for column in table.columns {
                    guard case let cell = try file.ref(leaf, column.leafIndex + 1,
                                                       "the values of '\(name).\(column.name)'"), cell != 0 else {
                        throw file.damaged("the objects of '\(name)' hold no values for '\(column.name)'")
                    }
                    columns.append(try Self.values(of: column, in: table, cell: cell, count: keys.count, file: file,
                                                   refuse: { refuse(table, column, $0) }))
                }
                for (position, key) in keys.enumerated() {
                    decoded.append((key, columns.map { $0[position] }))
                }
            }
            if let primaryKey = table.primaryKey {
                let column = table.columns[primaryKey]
                var keys: [Int64: Value] = [:]
                for object in decoded {
                    guard let value = object.values[primaryKey], !value.isNull else {
                        throw refuse(table, column, "is the primary key and is null in an object; stores here need "
                            + "a key in every item")
                    }
                    keys[object.key] = value
                }
                keyOf[name] = keys
                keyType[name] = try Self.attributeType(column, refuse: { refuse(table, column, $0) })
            } else {
                keyOf[name] = Dictionary(decoded.map { ($0.key, Value.int($0.key)) }, uniquingKeysWith: { a, _ in a })
                keyType[name] = .int
            }
            objects[name] = decoded
        }

        var entities: [EntitySchema] = []
        var records: [String: [Record]] = [:]
        var relationships: [String: [Relationship]] = [:]
        var joins: [(owner: String, property: String, target: String, ordered: Bool,
                     pairs: [(owner: Value, target: Value, position: Int)])] = []
        for table in classes {
            let name = entityName(table)
            var attributes: [Attribute] = []
            let key: String
            if let primaryKey = table.primaryKey {
                key = table.columns[primaryKey].name
            } else {
                key = Self.objectKeyAttribute
                attributes.append(Attribute(key, .int))
            }
            var linkColumns: [(index: Int, column: RealmModel.Column, target: String, isList: Bool)] = []
            for (index, column) in table.columns.enumerated() {
                try Schema.checkName(column.name, what: "attribute")
                if let targetKey = column.target {
                    guard let target = byTableKey[targetKey], target.name.hasPrefix("class_") else {
                        throw refuse(table, column, "links to a table that is not a class of the file")
                    }
                    let targetName = entityName(target)
                    let isList = column.type == .linkList || column.isList || column.isSet
                    if column.isDictionary {
                        throw refuse(table, column, "is a dictionary of links, which stores here cannot hold")
                    }
                    let inverse = "\(name)_\(column.name)"
                    if target.columns.contains(where: { $0.name == inverse }) {
                        throw refuse(table, column, "has no inverse here: the name '\(inverse)' this reader gives it "
                            + "is a property of '\(targetName)'")
                    }
                    let owns = target.kind == 1
                    if isList {
                        relationships[name, default: []].append(.toMany(
                            column.name, to: targetName, inverse: inverse, deleteRule: owns ? .cascade : .nullify,
                            ordered: !column.isSet))
                        relationships[targetName, default: []].append(.toMany(inverse, to: name, inverse: column.name))
                    } else {
                        attributes.append(Attribute(column.name, keyType[targetName] ?? .int, optional: true))
                        relationships[name, default: []].append(.toOne(
                            column.name, to: targetName, inverse: inverse, deleteRule: owns ? .cascade : .nullify))
                        relationships[targetName, default: []].append(.toMany(inverse, to: name, inverse: column.name))
                    }
                    linkColumns.append((index, column, targetName, isList))
                    continue
                }
                let type = try Self.attributeType(column, refuse: { refuse(table, column, $0) })
                attributes.append(Attribute(column.name, type, optional: column.isNullable && index != table.primaryKey))
            }
            var entityRecords: [Record] = []
            for object in objects[name] ?? [] {
                var record = Record()
                if table.primaryKey == nil { record[key] = .int(object.key) }
                for (index, column) in table.columns.enumerated() where column.target == nil {
                    record[column.name] = object.values[index] ?? .null
                }
                let owner = keyOf[name]?[object.key] ?? .null
                for link in linkColumns {
                    let targets = keyOf[link.target] ?? [:]
                    let raw = object.values[link.index] ?? .null
                    if !link.isList {
                        // A link to an object that is gone (a tombstone) is no link.
                        if case .int(let targetKey) = raw, let target = targets[targetKey] {
                            record[link.column.name] = target
                        } else {
                            record[link.column.name] = .null
                        }
                        continue
                    }
                    guard case .bytes(let encoded) = raw else { continue }
                    var seen = Set<Value>()
                    var pairs: [(owner: Value, target: Value, position: Int)] = []
                    for targetKey in Self.decodeKeys(encoded) {
                        guard let target = targets[targetKey] else { continue }
                        guard seen.insert(target).inserted else {
                            throw refuse(table, link.column, "holds '\(link.target)' \(target) twice in the list of "
                                + "'\(name)' \(owner); an ordered relationship here holds an item once")
                        }
                        pairs.append((owner, target, pairs.count))
                    }
                    joins.append((name, link.column.name, link.target, !link.column.isSet, pairs))
                }
                entityRecords.append(record)
            }
            entities.append(EntitySchema(name, primaryKey: key, attributes: attributes))
            records[name] = entityRecords
        }
        for position in entities.indices {
            entities[position].relationships = relationships[entities[position].name] ?? []
        }
        let result = Result { [entities] () throws(StoreError) -> Schema in
            let schema = try Schema(version: 1, entities: entities).resolved()
            try schema.validate()
            return schema
        }
        let resolved: Schema
        switch result {
        case .success(let schema): resolved = schema
        case .failure(let error):
            throw StoreError(error.code, "the classes of \(file.path) cannot be carried: \(error.message)")
        }
        // The pairs of lists and sets of links, in their join entities: keyed by the owner's
        // object key and the position, so that keys are stable for the file.
        var pairRecords: [String: [Record]] = [:]
        for join in joins {
            guard let owner = resolved.entity(named: join.owner),
                  let relationship = owner.relationship(named: join.property) else { continue }
            let joinName = Schema.joinEntityName(join.owner, relationship)
            let isSource = joinName == "\(join.owner)_\(join.property)"
            let (column, otherColumn) = isSource ? ("source", "target") : ("target", "source")
            let position = Schema.positionAttribute(join.owner, relationship, inverseIsToOne: false)
            for pair in join.pairs {
                var record = Record()
                record["id"] = Self.pairKey(owner: pair.owner, position: pair.position)
                record[column] = pair.owner
                record[otherColumn] = pair.target
                if join.ordered { record[position] = .int(Int64(pair.position + 1) * 65_536) }
                pairRecords[joinName, default: []].append(record)
            }
        }
        for (name, pairs) in pairRecords { records[name] = pairs }
        var sorted: [String: [Record]] = [:]
        for entity in resolved.entities {
            let items = try (records[entity.name] ?? []).map { record -> (PrimaryKey, Record) in
                let normalized = try entity.normalize(record)
                return (try PrimaryKey(entity.primaryKeyValue(of: normalized)), normalized)
            }.sorted { $0.0 < $1.0 }
            for index in items.indices.dropFirst() where items[index].0 == items[index - 1].0 {
                throw StoreError(.invalidValue, "'\(entity.name)' of \(file.path) holds two objects with the key "
                    + "\(items[index].0)")
            }
            sorted[entity.name] = items.map(\.1)
        }
        self.schema = resolved
        self.records = sorted
        let objectCount = classes.reduce(0) { $0 + (objects[entityName($1)]?.count ?? 0) }
        summary = "Realm: format \(file.format)\(file.isStreaming ? " (streaming form)" : ""), \(classes.count) "
            + "classes, \(objectCount) objects"
    }

    /// The attribute type of a value column, or the refusal.
    static func attributeType(_ column: RealmModel.Column, refuse: (String) -> StoreError) throws -> ValueType {
        if column.isList || column.isSet || column.isDictionary {
            throw refuse("is a \(column.isDictionary ? "dictionary" : column.isSet ? "set" : "list") of values, which "
                + "this reader does not read yet")
        }
        switch column.type {
        case .int: return .int
        case .bool: return .bool
        case .float, .double: return .double
        case .string, .objectId: return .string
        case .binary: return .bytes
        case .timestamp: return .date
        case .uuid: return .uuid
        case .decimal: throw refuse("is a Decimal128, which this reader does not read yet")
        case .mixed: throw refuse("is a Mixed (AnyRealmValue), which this reader does not read yet")
        case .typedLink: throw refuse("is a typed link, which this reader does not read yet")
        case .link, .linkList, .backlink: throw refuse("is a link without a target table")
        }
    }

    /// The values of `column` in one cluster leaf (`cell` its leaf), one per object: nil where
    /// the column is not a value (a list's ints come encoded in bytes).
    static func values(of column: RealmModel.Column, in table: RealmModel.Table, cell: Int, count: Int,
                       file: RealmFile, refuse: (String) -> StoreError) throws -> [Value?] {
        let label = "the values of '\(table.name.dropFirst(6)).\(column.name)'"
        func checked(_ values: [Value?]) throws -> [Value?] {
            guard values.count == count else {
                throw file.damaged("\(label) hold \(values.count) values for \(count) objects")
            }
            return values
        }
        if column.target != nil, column.type == .linkList || column.isList || column.isSet {
            let lists = try file.node(cell, label)
            return try checked(try (0..<lists.count).map { i -> Value? in
                let root = try file.ref(lists, i, label)
                guard root != 0 else { return .bytes([]) }
                var keys: [Int64] = []
                for leaf in try file.bplusLeaves(root, label) { keys += try file.ints(leaf, label) }
                return .bytes(encodeKeys(keys))
            })
        }
        if column.type == .link {
            // Object key + 1; 0 for none, below for a link to an object that is gone.
            return try checked(try file.ints(cell, label).map { $0 > 0 ? .int($0 - 1) : .null })
        }
        _ = try attributeType(column, refuse: refuse)
        switch column.type {
        case .int:
            let ints = try file.ints(cell, label)
            guard column.isNullable else { return try checked(ints.map { .int($0) }) }
            guard let null = ints.first else { throw file.damaged("\(label) are missing their null marker") }
            return try checked(ints.dropFirst().map { $0 == null ? .null : .int($0) })
        case .bool:
            return try checked(try file.ints(cell, label).map { $0 == 3 ? .null : .bool($0 != 0) })
        case .float, .double:
            let node = try file.node(cell, label)
            let size = column.type == .float ? 4 : 8
            guard node.widthType == 1, node.width == size || node.count == 0 else {
                throw file.damaged("\(label) at offset \(cell) are not \(size)-byte numbers")
            }
            return try checked((0..<node.count).map { i -> Value? in
                var bits: UInt64 = 0
                for k in (0..<size).reversed() { bits = bits << 8 | UInt64(file.bytes[node.payload + i * size + k]) }
                if size == 4 {
                    if bits == 0x7FC0_00AA { return .null }
                    return .double(Double(Float(bitPattern: UInt32(bits))))
                }
                if bits == 0x7FF8_0000_0000_00AA { return .null }
                return .double(Double(bitPattern: bits))
            })
        case .string:
            return try checked(try file.byteStrings(cell, isString: true, label).map { bytes -> Value? in
                guard let bytes else { return .null }
                guard let text = String(validating: bytes, as: UTF8.self) else {
                    throw file.damaged("\(label) hold text that is not UTF-8")
                }
                return .string(text)
            })
        case .binary:
            return try checked(try file.byteStrings(cell, isString: false, label).map { $0.map { .bytes($0) } ?? .null })
        case .timestamp:
            let pair = try file.node(cell, label)
            let seconds = try file.ints(try file.ref(pair, 0, label), label)
            let nanoseconds = try file.ints(try file.ref(pair, 1, label), label)
            guard let null = seconds.first, nanoseconds.count == seconds.count - 1 else {
                throw file.damaged("\(label) hold \(seconds.count - 1) seconds and \(nanoseconds.count) nanoseconds")
            }
            return try checked(try zip(seconds.dropFirst(), nanoseconds).map { second, nano -> Value? in
                if second == null { return .null }
                let (micros, overflow) = second.multipliedReportingOverflow(by: 1_000_000)
                guard !overflow else { throw file.damaged("\(label) hold the date \(second) s, out of range") }
                return .date(Timestamp(microsecondsSinceEpoch: micros + nano / 1_000))
            })
        case .objectId:
            return try checked(try file.fixedBytes(cell, size: 12, label).map { bytes -> Value? in
                bytes.map { .string($0.map { String(format: "%02x", $0) }.joined()) } ?? .null
            })
        case .uuid:
            return try checked(try file.fixedBytes(cell, size: 16, label).map { bytes -> Value? in
                guard let b = bytes else { return .null }
                return .uuid(UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                                         b[12], b[13], b[14], b[15])))
            })
        default:
            throw refuse("cannot be read")
        }
    }

    /// Object keys kept in bytes while the lists are decoded (8 bytes each, little-endian).
    static func encodeKeys(_ keys: [Int64]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(keys.count * 8)
        for key in keys { withUnsafeBytes(of: key.littleEndian) { bytes += $0 } }
        return bytes
    }

    static func decodeKeys(_ bytes: [UInt8]) -> [Int64] {
        stride(from: 0, to: bytes.count - 7, by: 8).map { start in
            var value: UInt64 = 0
            for k in (0..<8).reversed() { value = value << 8 | UInt64(bytes[start + k]) }
            return Int64(bitPattern: value)
        }
    }

    /// The uuid key of the pair at `position` of `owner`'s list: the owner's key encoded, then
    /// the position, hashed into 16 bytes that keep no order (the pairs' order is their
    /// positions).
    static func pairKey(owner: Value, position: Int) -> Value {
        var bytes = (try? KeyEncoding.encodeKey(owner)) ?? []
        withUnsafeBytes(of: Int64(position).bigEndian) { bytes += $0 }
        // Two FNV-1a hashes with different offsets make the 16 bytes.
        var first: UInt64 = 0xCBF2_9CE4_8422_2325, second: UInt64 = 0x8422_2325_CBF2_9CE4
        for byte in bytes {
            first = (first ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
            second = (second ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
        }
        var b = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 {
            b[i] = UInt8(truncatingIfNeeded: first >> UInt64(56 - 8 * i))
            b[8 + i] = UInt8(truncatingIfNeeded: second >> UInt64(56 - 8 * i))
        }
        return .uuid(UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                                 b[13], b[14], b[15])))
    }
}
