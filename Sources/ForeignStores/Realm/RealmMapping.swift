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
///   columns, are that inverse), cut to fit the name limit with a hash of the whole name. Deleting an object nullifies the links to it, as Realm does;
///   a link to an embedded object owns it (delete rule cascade).
/// - **Collections of values and `Mixed`** are string attributes holding JSON, Decimal128
///   decimal text (see ``RealmValues``).
///   A dictionary of links is such an attribute too, a JSON object of its targets' keys.
/// - **Refused** in one line naming class and property: typed link properties, a list that
///   holds one object twice, a null primary key, and a class or property name the stores here
///   cannot hold.
/// - **Chosen classes** (`tables=`, what `--entities` gives): only those classes are entities;
///   a link to a class left out keeps the target's key as a plain attribute, and a list or set
///   of links to one is left out (as a copy with `--entities` leaves out relationships to
///   entities it does not copy). A file of more classes than a store holds is copied this way,
///   in parts.
struct RealmMapping {
    let schema: Schema
    /// Each entity's records, in primary-key order.
    let records: [String: [Record]]
    let summary: String

    /// The attribute that keys a class without a primary key.
    static let objectKeyAttribute = "realm_key"

    /// - Parameter chosen: the classes to map (all of them when nil). Other names in it (the join
    ///   entities `--entities` may list beside the classes) are for the copy to check.
    /// - Throws: `unknownEntity` when no chosen name is a class of the file.
    init(_ model: RealmModel, classes chosen: [String]? = nil) throws {
        let file = model.file
        let allClasses = model.tables.filter { $0.name.hasPrefix("class_") && $0.name.utf8.count > 6 }
        let byTableKey = Dictionary(model.tables.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        func entityName(_ table: RealmModel.Table) -> String { String(table.name.dropFirst(6)) }
        let classes: [RealmModel.Table]
        if let chosen {
            classes = allClasses.filter { chosen.contains(entityName($0)) }
            if classes.isEmpty {
                throw StoreError(.unknownEntity, "\(file.path) has none of the classes " + chosen.sorted().joined(separator: ", ")
                    + " (it has " + allClasses.map(entityName).sorted().joined(separator: ", ") + ")")
            }
        } else {
            classes = allClasses
        }
        let chosenNames = Set(classes.map(entityName))
        func refuse(_ table: RealmModel.Table, _ column: RealmModel.Column, _ why: String) -> StoreError {
            StoreError(.invalidArgument, "property '\(entityName(table)).\(column.name)' of \(file.path) \(why)")
        }

        // The key of every object of every class, first: links name their targets by it.
        var keyOf: [String: ObjectKeyTable] = [:]
        var keyType: [String: ValueType] = [:]
        for table in allClasses {
            let name = entityName(table)
            if chosenNames.contains(name) { try Schema.checkName(name, what: "entity") }
            var keys = ObjectKeyTable()
            let primaryKey = table.primaryKey.map { table.columns[$0] }
            try model.forEachLeaf(of: table) { leaf, objectKeys in
                guard let column = primaryKey else {
                    for key in objectKeys { keys[key] = .int(key) }
                    return
                }
                let cell = try file.ref(leaf, column.leafIndex + 1, "the values of '\(name).\(column.name)'")
                let values = try Self.values(of: column, in: table, cell: cell, count: objectKeys.count, file: file,
                                             links: nil, refuse: { refuse(table, column, $0) })
                for (key, value) in zip(objectKeys, values) {
                    guard let value, !value.isNull else {
                        throw refuse(table, column, "is the primary key and is null in an object; stores here need "
                            + "a key in every item")
                    }
                    keys[key] = value
                }
            }
            keyOf[name] = keys
            keyType[name] = try primaryKey.map { column in
                try Self.attributeType(column, refuse: { refuse(table, column, $0) })
            } ?? .int
        }
        // A link in a Mixed or a dictionary: its target's class and key (none when it is gone).
        let links: RealmValues.Links = { tableKey, objectKey in
            guard let table = byTableKey[Int(tableKey)], table.name.hasPrefix("class_") else {
                throw file.damaged("a link names table \(tableKey), which is not a class of the file")
            }
            guard let key = keyOf[entityName(table)]?[objectKey] else { return .value(.null) }
            return .link(entityName(table), key)
        }
        var objects: [String: [(key: Int64, values: [Value?])]] = [:]
        for table in classes {
            let name = entityName(table)
            var decoded: [(key: Int64, values: [Value?])] = []
            try model.forEachLeaf(of: table) { leaf, keys in
                var columns: [[Value?]] = []
                for column in table.columns {
                    guard case let cell = try file.ref(leaf, column.leafIndex + 1,
                                                       "the values of '\(name).\(column.name)'"), cell != 0 else {
                        throw file.damaged("the objects of '\(name)' hold no values for '\(column.name)'")
                    }
                    columns.append(try Self.values(of: column, in: table, cell: cell, count: keys.count, file: file,
                                                   links: links, refuse: { refuse(table, column, $0) }))
                }
                for (position, key) in keys.enumerated() {
                    decoded.append((key, columns.map { $0[position] }))
                }
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
                if let targetKey = column.target, !column.isDictionary {
                    guard let target = byTableKey[targetKey], target.name.hasPrefix("class_") else {
                        throw refuse(table, column, "links to a table that is not a class of the file")
                    }
                    let targetName = entityName(target)
                    let isList = column.type == .linkList || column.isList || column.isSet
                    guard chosenNames.contains(targetName) else {
                        // A class left out: a link keeps its target's key; a list of them is left out.
                        if !isList {
                            attributes.append(Attribute(column.name, keyType[targetName] ?? .int, optional: true))
                            linkColumns.append((index, column, targetName, false))
                        }
                        continue
                    }
                    let inverse = Self.inverseName(of: column.name, in: name, target: targetName)
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
            let linkAt = Dictionary(uniqueKeysWithValues: linkColumns.map { ($0.index, $0) })
            let targetsAt = linkColumns.map { keyOf[$0.target] ?? ObjectKeyTable() }
            let linkPosition = Dictionary(uniqueKeysWithValues: linkColumns.enumerated().map { ($1.index, $0) })
            let owners = keyOf[name] ?? ObjectKeyTable()
            entityRecords.reserveCapacity(objects[name]?.count ?? 0)
            for object in objects[name] ?? [] {
                // In the attributes' order, so that the record needs no names looked up to be stored.
                var values: [(String, Value)] = []
                values.reserveCapacity(table.columns.count + 1)
                if table.primaryKey == nil { values.append((key, .int(object.key))) }
                let owner = owners[object.key] ?? .null
                for (index, column) in table.columns.enumerated() {
                    let raw = object.values[index] ?? .null
                    guard let link = linkAt[index], let position = linkPosition[index] else {
                        // A list of links to a class left out is not carried.
                        if column.target == nil || column.isDictionary { values.append((column.name, raw)) }
                        continue
                    }
                    let targets = targetsAt[position]
                    if !link.isList {
                        // A link to an object that is gone (a tombstone) is no link.
                        if case .int(let targetKey) = raw, let target = targets[targetKey] {
                            values.append((column.name, target))
                        } else {
                            values.append((column.name, .null))
                        }
                        continue
                    }
                    guard case .bytes(let encoded) = raw else { continue }
                    var seen = Set<Int64>()
                    var pairs: [(owner: Value, target: Value, position: Int)] = []
                    for targetKey in Self.decodeKeys(encoded) {
                        guard let target = targets[targetKey] else { continue }
                        guard seen.insert(targetKey).inserted else {
                            throw refuse(table, link.column, "holds '\(link.target)' \(target) twice in the list of "
                                + "'\(name)' \(owner); an ordered relationship here holds an item once")
                        }
                        pairs.append((owner, target, pairs.count))
                    }
                    joins.append((name, link.column.name, link.target, !link.column.isSet, pairs))
                }
                entityRecords.append(Record(pairs: values))
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
            var items = try (records[entity.name] ?? []).map { record -> (PrimaryKey, Record) in
                let normalized = try entity.normalize(record)
                return (try PrimaryKey(entity.primaryKeyValue(of: normalized)), normalized)
            }
            // Objects often come in key order (an int key that grows with the object key).
            if items.indices.dropFirst().contains(where: { items[$0].0 < items[$0 - 1].0 }) {
                items.sort { $0.0 < $1.0 }
            }
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

    /// The attribute type of a value column, or the refusal: collections and `Mixed` are JSON
    /// text (see ``RealmValues``), Decimal128 decimal text, ObjectId hex text.
    static func attributeType(_ column: RealmModel.Column, refuse: (String) -> StoreError) throws -> ValueType {
        if column.type == .typedLink { throw refuse("is a typed link, which this reader does not read yet") }
        if column.isDictionary || column.type == .mixed { return .string }
        if column.isList || column.isSet { return .string }
        switch column.type {
        case .int: return .int
        case .bool: return .bool
        case .float, .double: return .double
        case .string, .objectId, .decimal, .mixed: return .string
        case .binary: return .bytes
        case .timestamp: return .date
        case .uuid: return .uuid
        case .typedLink: throw refuse("is a typed link, which this reader does not read yet")
        case .link, .linkList, .backlink: throw refuse("is a link without a target table")
        }
    }

    /// The values of `column` in one cluster leaf (`cell` its leaf), one per object: a list of
    /// links' object keys come encoded in bytes.
    static func values(of column: RealmModel.Column, in table: RealmModel.Table, cell: Int, count: Int,
                       file: RealmFile, links: RealmValues.Links?,
                       refuse: (String) -> StoreError) throws -> [Value?] {
        let label = "the values of '\(table.name.dropFirst(6)).\(column.name)'"
        func checked(_ values: [Value?]) throws -> [Value?] {
            guard values.count == count else {
                throw file.damaged("\(label) hold \(values.count) values for \(count) objects")
            }
            return values
        }
        if column.target != nil, !column.isDictionary {
            if column.type == .linkList || column.isList || column.isSet {
                let lists = try file.node(cell, label)
                return try checked(try (0..<lists.count).map { i -> Value? in
                    let root = try file.ref(lists, i, label)
                    guard root != 0 else { return .bytes([]) }
                    var keys: [Int64] = []
                    for leaf in try file.bplusLeaves(root, label) { keys += try file.ints(leaf, label) }
                    return .bytes(encodeKeys(keys))
                })
            }
            // Object key + 1; 0 for none, below for a link to an object that is gone.
            return try checked(try file.ints(cell, label).map { $0 > 0 ? .int($0 - 1) : .null })
        }
        _ = try attributeType(column, refuse: refuse)
        if column.isList || column.isSet || column.isDictionary {
            let cells = try file.node(cell, label)
            return try checked(try (0..<cells.count).map { i -> Value? in
                let root = try file.ref(cells, i, label)
                let item = column.isDictionary
                    ? try RealmValues.dictionary(root, keyType: column.keyType, file: file, format: file.format,
                                                 label: label, links: links)
                    : try RealmValues.list(root, of: column.type, nullable: column.isNullable, file: file,
                                           format: file.format, label: label, links: links)
                return .string(item.json(tagged: column.type == .mixed))
            })
        }
        let items = try RealmValues.leaf(column.type, nullable: column.isNullable, ref: cell, file: file,
                                         format: file.format, label: label, links: links)
        if column.type == .mixed {
            return try checked(items.map { $0 == .value(.null) ? .null : .string($0.json(tagged: true)) })
        }
        return try checked(items.map { item -> Value? in
            switch item {
            case .value(let value): return value
            case .decimal(let text), .objectId(let text): return .string(text)
            default: return .string(item.json(tagged: false))
            }
        })
    }

    /// The name of the inverse a link gets on its target: `CLASS_PROPERTY`, shortened when a
    /// join entity named after it (`TARGET_CLASS_PROPERTY`) would pass the name limit: cut, with
    /// 8 hex digits of a hash of the whole name, so that two long names stay apart.
    static func inverseName(of property: String, in entity: String, target: String) -> String {
        let full = "\(entity)_\(property)"
        let room = Limits.maxNameLength - target.utf8.count - 1
        guard full.utf8.count > room, room >= 16 else { return full }
        var hash: UInt32 = 0x811C_9DC5
        for byte in full.utf8 { hash = (hash ^ UInt32(byte)) &* 0x0100_0193 }
        return String(full.prefix(room - 9)) + "_" + RealmValues.hex(withUnsafeBytes(of: hash.bigEndian) { Array($0) })
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

/// The key each object of a class has here, by its object key in the file: in an array while the
/// object keys run 0, 1, 2… (as compact cluster leaves number them), past that in a dictionary.
struct ObjectKeyTable {
    private var dense: [Value] = []
    private var sparse: [Int64: Value] = [:]

    subscript(objectKey: Int64) -> Value? {
        get {
            if objectKey >= 0, objectKey < dense.count { return dense[Int(objectKey)] }
            return sparse[objectKey]
        }
        set {
            guard let newValue else { return }  // a class's keys are only ever added
            if objectKey == dense.count, sparse.isEmpty {
                dense.append(newValue)
            } else if objectKey >= 0, objectKey < dense.count {
                dense[Int(objectKey)] = newValue
            } else {
                sparse[objectKey] = newValue
            }
        }
    }
}
