@_spi(Backend) import DataStoreAPI
import Foundation

/// Maps a Core Data store (its model and its tables) onto entities of this toolkit.
///
/// - **Entities.** An inheritance hierarchy is one table in Core Data (`Z` + the root entity's
///   name in capitals, rows told apart by `Z_ENT`), and becomes one entity here, named after the
///   root: it holds the attributes of every entity of the hierarchy (those of subentities
///   optional) and, when there are subentities, a string attribute `entity` naming each item's
///   Core Data entity (the model's name of the entity whose number `Z_ENT` holds).
/// - **Keys.** An item's key is its `Z_PK` (unique within its hierarchy's table) in an int
///   attribute `pk`, unless the user names an attribute (`key=Entity.attribute`): a required,
///   unique int, string or uuid attribute of the hierarchy's root. References carry the key.
/// - **Attributes.** Column `Z` + the name in capitals. Integers → int; Double, Float and
///   Decimal → double; String and URI → string; Boolean → bool; Date (seconds since 2001) →
///   date; Binary and Transformable → bytes (external storage read from
///   `.NAME_SUPPORT/_EXTERNAL_DATA`); UUID → uuid. Transient properties and fetched properties
///   hold no data and are left out. ObjectID attributes are refused.
/// - **Composite attributes** (SwiftData's stored structs and enums, type 2100): each element,
///   nested ones too, is an attribute of its own named by its path with `_` (`author_person`),
///   read from its own column (see ``StoredAttribute``), optional when it or a composite
///   holding it is.
/// - **Relationships.** A to-one is its `Z`+NAME column; a to-many is the inverse of a to-one
///   or, with a to-many inverse, the pairs of the join table `Z_<n>NAME`. An ordered to-many
///   is an ordered relationship here: a one-to-many's places are the destination's
///   `Z_FOK_<INVERSE>` column, a many-to-many's the join table's `Z_FOK_<n><NAME>` (named after
///   the column of the items it orders). A to-many without an inverse is refused. Delete rules
///   carry over; No Action becomes Nullify (Deny where the other side is required), since a
///   store here never keeps a reference to a deleted item.
enum CoreDataMapping {
    static func map(_ database: ForeignDatabase, model: CoreDataModel, keys: [String: String]) throws -> ForeignMapping {
        var model = model
        let tables = Set(try database.tableNames())
        guard tables.contains("Z_PRIMARYKEY") else {
            throw StoreError(.notAStore, "\(database.path) is not a Core Data store: it has no Z_PRIMARYKEY table")
        }
        var stored: [String: Int64] = [:]
        for row in try database.rows("SELECT Z_ENT, Z_NAME FROM Z_PRIMARYKEY") {
            if let number = row[0].intValue, let name = row[1].stringValue { stored[name] = number }
        }
        // Each entity's number: by its name, or by the name it had when the store was made (a renamed
        // entity keeps its old name in Z_PRIMARYKEY).
        var numbers: [String: Int64] = [:]
        for entity in model.entities {
            guard let number = stored[entity.name] ?? entity.renamingIdentifier.flatMap({ stored[$0] }) else {
                throw StoreError(.schemaMismatch, "entity '\(entity.name)' of the model is not in the store's "
                    + "Z_PRIMARYKEY: the model is not the store's (pass the model of the store's version with "
                    + "--model)")
            }
            numbers[entity.name] = number
        }
        try addInverses(to: &model, numbers: numbers, database: database)
        // Every unknown name at once, in a fixed order (never a dictionary's).
        let unknown = keys.sorted { $0.key < $1.key }.filter { model.entity($0.key) == nil }
        if !unknown.isEmpty {
            throw StoreError(.unknownEntity, unknown.map { "key=\($0.key).\($0.value)" }.joined(separator: ", ")
                + ": the model has no entit\(unknown.count == 1 ? "y" : "ies") "
                + unknown.map { "'\($0.key)'" }.joined(separator: ", "))
        }
        let supportDirectory: String = {
            let directory = PathNames.directory(of: database.path)
            let name = ((database.path as NSString).lastPathComponent as NSString).deletingPathExtension
            return ((directory.isEmpty ? "." : directory) as NSString)
                .appendingPathComponent(".\(name)_SUPPORT/_EXTERNAL_DATA")
        }()
        let roots = model.entities.filter { $0.parent == nil }.map(\.name)

        func table(of root: String) -> String { "Z" + root.uppercased() }
        /// The table's columns in order, the hierarchy's stored values (a composite's elements
        /// each one of their own) and the column of each.
        func storedColumns(of root: String) throws
            -> (table: [(name: String, type: String)], stored: [StoredAttribute], columns: [String]) {
            let tableColumns = try database.rows("SELECT name, type FROM pragma_table_info(?) ORDER BY cid",
                                                 [.string(table(of: root))])
                .compactMap { row in row[0].stringValue.map { (name: $0, type: row[1].stringValue ?? "") } }
            let stored = try model.hierarchy(of: root).flatMap { entity in
                try entity.attributes.filter { !$0.isTransient }.flatMap { try StoredAttribute.flatten($0, of: entity.name) }
            }
            return (tableColumns, stored,
                    try StoredAttribute.columns(of: stored, table: tableColumns, tableName: table(of: root)))
        }

        // Each hierarchy's key: its name, type and the column that holds it.
        var keyOf: [String: (attribute: String, type: ValueType, column: String)] = [:]
        for root in roots {
            let hierarchy = model.hierarchy(of: root)
            // One key per hierarchy: two (key=Vehicle.vin and key=Car.plate) are refused, since which
            // one a dictionary hands out first differs from process to process.
            let given = keys.filter { key, _ in hierarchy.contains { $0.name == key } }.sorted { $0.key < $1.key }
            if given.count > 1 {
                throw StoreError(.invalidArgument, given.map { "key=\($0.key).\($0.value)" }.joined(separator: " and ")
                    + " name keys of one hierarchy (rooted at '\(root)'), whose items share one key: give one")
            }
            if let named = given.first?.value {
                guard let attribute = model.entity(root)?.attributes.first(where: { $0.name == named }) else {
                    throw StoreError(.invalidArgument, "key=…\(named): '\(named)' is not an attribute of '\(root)', the "
                        + "root of its entity's hierarchy")
                }
                let type = try attributeConversion(attribute, entity: root, supportDirectory: supportDirectory).type
                guard [.int, .string, .uuid].contains(type), !attribute.isOptional else {
                    throw StoreError(.invalidArgument, "key=\(root).\(named): a key is a required int, string or uuid "
                        + "attribute; '\(named)' is \(attribute.isOptional ? "optional " : "")\(type)")
                }
                let (_, stored, columns) = try storedColumns(of: root)
                let column = stored.firstIndex { $0.entity == root && $0.attribute.name == named }.map { columns[$0] }
                keyOf[root] = (named, type, column ?? "Z" + named.uppercased())
            } else {
                keyOf[root] = ("pk", .int, "Z_PK")
            }
        }
        func keyExpression(of root: String, pkExpression: String) -> String {
            guard let key = keyOf[root], key.column != "Z_PK" else { return pkExpression }
            return "(SELECT d.\(ForeignDatabase.quoted(key.column)) FROM \(ForeignDatabase.quoted(table(of: root))) AS d "
                + "WHERE d.Z_PK = "
                + "\(pkExpression))"
        }

        var schemas: [EntitySchema] = []
        var foreign: [String: ForeignEntity] = [:]
        var orderColumns: [String: [(attribute: String, column: String)]] = [:]
        var manyToMany: [(root: String, relationship: CoreDataModel.Relationship, destinationRoot: String)] = []
        for root in roots {
            let tableName = table(of: root)
            guard tables.contains(tableName) else {
                throw StoreError(.schemaMismatch, "entity '\(root)' has no table \(tableName) in the store: the model "
                    + "is not the store's (pass the model of the store's version with --model)")
            }
            let (tableColumns, stored, columnOf) = try storedColumns(of: root)
            let columns = Set(tableColumns.map(\.name))
            let hierarchy = model.hierarchy(of: root)
            guard let key = keyOf[root] else { continue }
            var attributes: [Attribute] = []
            var foreignColumns: [ForeignColumn] = []
            var relationships: [Relationship] = []
            var names: [String: String] = [:]
            var indexes: [Index] = []
            /// The attribute each column of the table holds, for the uniqueness constraints.
            var columnAttributes: [String: String] = [key.column: key.attribute]
            func claim(_ name: String, by entity: String) throws {
                if let other = names[name], other != entity {
                    throw StoreError(.invalidArgument, "'\(other).\(name)' and '\(entity).\(name)' share a hierarchy "
                        + "and a name: the store keeps them in two columns this reader cannot tell apart")
                }
                names[name] = entity
            }
            if key.column == "Z_PK" {
                if hierarchy.contains(where: { entity in entity.attributes.contains { $0.name == "pk" } }) {
                    throw StoreError(.invalidArgument, "'\(root)' has an attribute 'pk', the name of the key this "
                        + "reader adds: name the key attribute instead with key=\(root).ATTRIBUTE")
                }
                attributes.append(Attribute("pk", .int))
                names["pk"] = root
            }
            if hierarchy.count > 1 {
                if hierarchy.contains(where: { entity in entity.attributes.contains { $0.name == "entity" } }) {
                    throw StoreError(.invalidArgument, "'\(root)' has subentities and an attribute 'entity', the name "
                        + "of the attribute this reader adds to name each item's entity")
                }
                attributes.append(Attribute("entity", .string))
                let cases = hierarchy.compactMap { entity in
                    numbers[entity.name].map { "WHEN \($0) THEN '\(entity.name.replacingOccurrences(of: "'", with: "''"))'" }
                }
                foreignColumns.append(ForeignColumn(
                    attribute: "entity", expression: "CASE t.Z_ENT \(cases.joined(separator: " ")) END",
                    conversion: .string, origin: "\(tableName).Z_ENT"))
                names["entity"] = root
            }
            for entity in hierarchy {
                let inherited = entity.name != root
                for (index, storedAttribute) in stored.enumerated() where storedAttribute.entity == entity.name {
                    let attribute = storedAttribute.attribute
                    try claim(attribute.name, by: entity.name)
                    let column = columnOf[index]
                    guard columns.contains(column) else {
                        throw StoreError(.schemaMismatch, "attribute '\(entity.name).\(storedAttribute.path)' has no "
                            + "column \(column) in \(tableName): the model is not the store's")
                    }
                    let conversion = try attributeConversion(attribute, entity: entity.name,
                                                             supportDirectory: supportDirectory)
                    columnAttributes[column] = attribute.name
                    let isKey = attribute.name == key.attribute && !inherited
                    attributes.append(Attribute(attribute.name, conversion.type,
                                                optional: !isKey && (attribute.isOptional || inherited)))
                    if !isKey {
                        foreignColumns.append(ForeignColumn(attribute: attribute.name,
                                                            expression: "t." + ForeignDatabase.quoted(column),
                                                            conversion: conversion,
                                                            origin: "\(tableName).\(column) (\(entity.name).\(attribute.name))"))
                    }
                }
                for relationship in entity.relationships where !relationship.isTransient {
                    try claim(relationship.name, by: entity.name)
                    guard model.entity(relationship.destination) != nil else {
                        throw StoreError(.schemaMismatch, "relationship '\(entity.name).\(relationship.name)' leads to "
                            + "'\(relationship.destination)', which is not in the model")
                    }
                    let destinationRoot = model.root(of: relationship.destination)
                    let inverse = relationship.inverse.flatMap { name in
                        model.hierarchy(of: model.root(of: relationship.destination)).lazy
                            .compactMap { $0.relationships.first { $0.name == name } }.first
                    }
                    let label = "relationship '\(entity.name).\(relationship.name)'"
                    let rule = deleteRule(relationship.deleteRule, otherSideRequired: inverse.map {
                        !$0.isToMany && !$0.isOptional } ?? false)
                    // A one-to-one (both sides to-one, each with a column): one side holds the reference,
                    // with a unique index, and the other is its to-many inverse, which the index keeps to
                    // one item. The side whose (root, name) sorts first holds it.
                    if !relationship.isToMany, let inverse, !inverse.isToMany, let inverseName = relationship.inverse,
                       (destinationRoot, inverseName) < (root, relationship.name) {
                        relationships.append(.toMany(relationship.name, to: destinationRoot, inverse: inverseName,
                                                     deleteRule: rule))
                        continue
                    }
                    if !relationship.isToMany {
                        let column = relationship.column ?? "Z" + relationship.name.uppercased()
                        guard columns.contains(column) else {
                            throw StoreError(.schemaMismatch, "\(label) has no column \(column) in \(tableName): "
                                + "the model is not the store's")
                        }
                        let optional = relationship.isOptional || inherited
                        let destinationKey = keyOf[destinationRoot]
                        attributes.append(Attribute(relationship.name, destinationKey?.type ?? .int, optional: optional))
                        foreignColumns.append(ForeignColumn(
                            attribute: relationship.name,
                            expression: keyExpression(of: destinationRoot,
                                                      pkExpression: "t." + ForeignDatabase.quoted(column)),
                            conversion: valueConversion(destinationKey?.type ?? .int),
                            origin: "\(tableName).\(column) (\(entity.name).\(relationship.name))"))
                        let keepsInverse = inverse != nil
                        relationships.append(.toOne(relationship.name, to: destinationRoot,
                                                    inverse: keepsInverse ? relationship.inverse : nil,
                                                    optional: optional, deleteRule: rule))
                        if inverse?.isToMany == false {
                            indexes.append(Index(relationship.name, on: [relationship.name], unique: true))
                        }
                        columnAttributes[column] = relationship.name
                        continue
                    }
                    guard let inverse, let inverseName = relationship.inverse else {
                        throw StoreError(.invalidArgument, "\(label) is to-many without an inverse; stores here find a "
                            + "to-many's items through its inverse (give it one in the model)")
                    }
                    if inverse.isToMany {
                        if relationship.name == inverseName && destinationRoot == root {
                            throw StoreError(.invalidArgument, "\(label) is its own inverse; stores here need two "
                                + "named sides for a many-to-many")
                        }
                        manyToMany.append((root, relationship, destinationRoot))
                    } else if relationship.isOrdered {
                        orderColumns[destinationRoot, default: []].append(
                            ("\(inverseName)_position", "Z_FOK_" + inverseName.uppercased()))
                    }
                    relationships.append(.toMany(relationship.name, to: destinationRoot, inverse: inverseName,
                                                 deleteRule: rule, ordered: relationship.isOrdered))
                }
            }
            var from = ForeignDatabase.quoted(tableName) + " AS t", keyExpression = "t." + ForeignDatabase.quoted(key.column)
            if key.column != "Z_PK" {
                let allowed = key.type == .int ? ["integer"] : key.type == .string ? ["text"] : ["blob"]
                (from, keyExpression) = try ForeignKeyOrder.make(
                    database, table: tableName, column: key.column, rowid: "Z_PK", allowed: allowed,
                    label: "'\(root).\(key.attribute)' (\(tableName).\(key.column))")
            }
            let keyColumn = ForeignColumn(attribute: key.attribute, expression: keyExpression,
                                          conversion: valueConversion(key.type), origin: "\(tableName).\(key.column)")
            indexes += try uniquenessConstraints(database, table: tableName, columnAttributes: columnAttributes,
                                                 taken: Set(indexes.map(\.name)))
            schemas.append(EntitySchema(root, primaryKey: key.attribute, attributes: attributes, indexes: indexes,
                                        relationships: relationships))
            foreign[root] = ForeignEntity(schema: schemas[schemas.count - 1], from: from, filter: nil,
                                          key: .column(keyColumn), columns: foreignColumns,
                                          origin: "table \(tableName)")
        }
        // The order of ordered one-to-many relationships, on their destinations.
        // By entity: the same error first in every run when several are wrong.
        for (root, orders) in orderColumns.sorted(by: { $0.key < $1.key }) {
            guard let position = schemas.firstIndex(where: { $0.name == root }) else { continue }
            let tableName = table(of: root)
            let columns = Set(try database.rows("SELECT name FROM pragma_table_info(?)", [.string(tableName)])
                .compactMap { $0[0].stringValue })
            for order in orders {
                guard columns.contains(order.column) else {
                    throw StoreError(.schemaMismatch, "\(tableName) has no column \(order.column), where Core Data keeps "
                        + "the order of an ordered relationship to '\(root)'")
                }
                guard schemas[position].attribute(named: order.attribute) == nil else {
                    throw StoreError(.invalidArgument, "'\(root)' already has an attribute '\(order.attribute)', where "
                        + "stores here keep the places of an ordered relationship's items")
                }
                schemas[position].attributes.append(Attribute(order.attribute, .int, optional: true))
                foreign[root]?.columns.append(ForeignColumn(attribute: order.attribute,
                                                            expression: "t." + ForeignDatabase.quoted(order.column),
                                                            conversion: .int, origin: "\(tableName).\(order.column)"))
            }
        }
        let schema = try resolvedSchema(schemas)
        for entity in schema.entities where foreign[entity.name] != nil { foreign[entity.name]?.schema = entity }
        // Many-to-many: the join entities `resolved()` added, read from the join tables.
        for (root, relationship, destinationRoot) in manyToMany {
            guard let declared = schema.entity(named: root)?.relationships.first(where: { $0.name == relationship.name }),
                  let inverseName = relationship.inverse else { continue }
            let joinName = Schema.joinEntityName(root, declared)
            guard foreign[joinName] == nil, let join = schema.entity(named: joinName) else { continue }
            let sourceIsThis = joinName == "\(root)_\(relationship.name)"
            let (thisColumn, otherColumn, table) = try joinTable(
                database, tables: tables, model: model, numbers: numbers,
                this: (root, relationship.name), other: (destinationRoot, inverseName))
            let (sourceColumn, targetColumn) = sourceIsThis ? (thisColumn, otherColumn) : (otherColumn, thisColumn)
            let (sourceRoot, targetRoot) = sourceIsThis ? (root, destinationRoot) : (destinationRoot, root)
            let source = "j." + ForeignDatabase.quoted(sourceColumn), target = "j." + ForeignDatabase.quoted(targetColumn)
            var columns = [
                ForeignColumn(attribute: "source", expression: keyExpression(of: sourceRoot, pkExpression: source),
                              conversion: valueConversion(keyOf[sourceRoot]?.type ?? .int),
                              origin: "\(table).\(sourceColumn)"),
                ForeignColumn(attribute: "target", expression: keyExpression(of: targetRoot, pkExpression: target),
                              conversion: valueConversion(keyOf[targetRoot]?.type ?? .int),
                              origin: "\(table).\(targetColumn)"),
            ]
            // An ordered side's places: Core Data keeps them in `Z_FOK_` + the column of the items
            // it orders (Photos' `Z_33ASSETS.Z_FOK_3ASSETS`, the assets' order in each album).
            for (position, itemsColumn) in [("source_position", targetColumn), ("target_position", sourceColumn)]
            where join.attribute(named: position) != nil {
                let column = "Z_FOK_" + itemsColumn.dropFirst(2)
                guard try !database.rows("SELECT 1 FROM pragma_table_info(?) WHERE name = ?",
                                         [.string(table), .string(column)]).isEmpty else {
                    throw StoreError(.schemaMismatch, "the join table \(table) of ordered relationship "
                        + "'\(root).\(relationship.name)' has no column \(column), where Core Data keeps its order")
                }
                columns.append(ForeignColumn(attribute: position, expression: "j." + ForeignDatabase.quoted(column),
                                             conversion: .int, origin: "\(table).\(column)"))
            }
            foreign[joinName] = ForeignEntity(
                schema: join, from: ForeignDatabase.quoted(table) + " AS j", filter: nil, key: .pair(source, target),
                columns: columns, origin: "table \(table)")
        }
        for entity in schema.entities where foreign[entity.name] == nil {
            throw StoreError(.invalidArgument, "entity '\(entity.name)' has no table this reader can read")
        }
        try checkValues(database, foreign.values.sorted { $0.schema.name < $1.schema.name })
        let hierarchies = roots.count
        return ForeignMapping(schema: schema, entities: foreign,
                              summary: "Core Data: \(model.entities.count) entities in \(hierarchies) tables")
    }

    /// The schema of the mapped entities, resolved (join entities added), or the reason the
    /// model cannot be carried.
    static func resolvedSchema(_ entities: [EntitySchema]) throws -> Schema {
        let result = Result { () throws(StoreError) -> Schema in try Schema(version: 1, entities: entities).resolved() }
        switch result {
        case .success(let schema): return schema
        case .failure(let error):
            throw StoreError(error.code, "the Core Data model cannot be carried: \(error.message)")
        }
    }

    static func valueConversion(_ type: ValueType) -> ForeignConversion {
        switch type {
        case .string: .string
        case .uuid: .uuid
        default: .int
        }
    }

    /// Gives each unordered to-many without an inverse (SwiftData's `var spec: [Ingredient]` with
    /// no inverse) the to-one inverse Core Data keeps for it anyway: the column `Z<n><NAME>` of
    /// the destination's table, `<n>` the number of the entity that declares it. The inverse is
    /// named `<Entity>_<relationship>` (`Cocktail_spec`), optional, and its delete rule nullifies.
    /// One whose column is not there is left as it is (and refused, naming it, by the mapping).
    static func addInverses(to model: inout CoreDataModel, numbers: [String: Int64], database: ForeignDatabase) throws {
        for entityIndex in model.entities.indices {
            let entity = model.entities[entityIndex]
            for relationshipIndex in entity.relationships.indices {
                let relationship = entity.relationships[relationshipIndex]
                guard relationship.isToMany, !relationship.isOrdered, !relationship.isTransient,
                      relationship.inverse == nil, let number = numbers[entity.name],
                      let destination = model.entities.firstIndex(where: { $0.name == relationship.destination })
                else { continue }
                let column = "Z\(number)\(relationship.name.uppercased())"
                let table = "Z" + model.root(of: relationship.destination).uppercased()
                guard try !database.rows("SELECT 1 FROM pragma_table_info(?) WHERE name = ?",
                                         [.string(table), .string(column)]).isEmpty else { continue }
                let name = "\(entity.name)_\(relationship.name)"
                let taken = model.hierarchy(of: model.root(of: relationship.destination)).contains { other in
                    other.relationships.contains { $0.name == name } || other.attributes.contains { $0.name == name }
                }
                guard !taken else {
                    throw StoreError(.invalidArgument, "relationship '\(entity.name).\(relationship.name)' is to-many "
                        + "without an inverse, and the name '\(name)' this reader gives its inverse is taken in "
                        + "'\(relationship.destination)'")
                }
                model.entities[entityIndex].relationships[relationshipIndex].inverse = name
                model.entities[destination].relationships.append(CoreDataModel.Relationship(
                    name: name, destination: entity.name, inverse: relationship.name, isToMany: false,
                    isOrdered: false, isOptional: true, isTransient: false, deleteRule: 1, column: column))
            }
        }
    }

    /// The conversion of a Core Data attribute, or a refusal naming it.
    static func attributeConversion(_ attribute: CoreDataModel.Attribute, entity: String,
                                    supportDirectory: String) throws -> ForeignConversion {
        switch attribute.type {
        case 100, 200, 300: return .int
        case 400, 500, 600: return .double
        case 700, 1200: return .string
        case 800: return .bool
        case 900: return .referenceDate
        case 1000: return attribute.allowsExternalStorage ? .externalBinary(directory: supportDirectory) : .bytes
        case 1100: return .uuid
        case 1800: return .bytes
        default:
            let kind = [0: "undefined", 2000: "object ID", 2100: "composite"][attribute.type] ?? "type \(attribute.type)"
            throw StoreError(.invalidArgument, "attribute '\(entity).\(attribute.name)' is of the \(kind) type, which "
                + "stores here cannot hold")
        }
    }

    /// Core Data's delete rule as a rule here.
    static func deleteRule(_ rule: Int, otherSideRequired: Bool) -> Relationship.DeleteRule {
        switch rule {
        case 2: .cascade
        case 3: .deny
        case 1: .nullify
        default: otherSideRequired ? .deny : .nullify
        }
    }

    /// The join table of a many-to-many and its two columns: the one that holds `this` side's
    /// items (`Z_<n><OTHER RELATIONSHIP>`, named after the relationship that leads to them) and
    /// the other's. The table is `Z_<n><RELATIONSHIP>` after either side.
    static func joinTable(_ database: ForeignDatabase, tables: Set<String>, model: CoreDataModel,
                          numbers: [String: Int64], this: (root: String, relationship: String),
                          other: (root: String, relationship: String)) throws -> (String, String, String) {
        func entityNumbers(_ root: String) -> [Int64] { model.hierarchy(of: root).compactMap { numbers[$0.name] } }
        let candidates = entityNumbers(this.root).map { "Z_\($0)\(this.relationship.uppercased())" }
            + entityNumbers(other.root).map { "Z_\($0)\(other.relationship.uppercased())" }
        let found = Set(candidates.filter { tables.contains($0) })
        guard found.count == 1, let table = found.first else {
            throw StoreError(.schemaMismatch, "the many-to-many '\(this.root).\(this.relationship)' ↔ "
                + "'\(other.root).\(other.relationship)' has " + (found.isEmpty ? "no join table" : "several join tables")
                + " (looked for \(candidates.joined(separator: ", ")))")
        }
        let columns = try database.rows("SELECT name FROM pragma_table_info(?)", [.string(table)])
            .compactMap { $0[0].stringValue }.filter { !$0.hasPrefix("Z_FOK_") }
        // A side's column is `Z_<n><NAME>`, where <n> is the number of an entity of its hierarchy and
        // NAME the relationship that leads to its items; when one entity has relationships of one name
        // towards several entities, Core Data numbers the columns after the first (`Z_13TAGS1`, …).
        func sideColumns(holding root: String, ledBy relationship: String) -> [String] {
            let prefixes = entityNumbers(root).map { "Z_\($0)\(relationship.uppercased())" }
            return columns.filter { column in
                prefixes.contains { prefix in
                    guard column.hasPrefix(prefix) else { return false }
                    let suffix = column.dropFirst(prefix.count)
                    return suffix.allSatisfy { $0.isASCII && $0.isNumber }
                }
            }
        }
        var thisCandidates = sideColumns(holding: this.root, ledBy: other.relationship)
        var otherCandidates = sideColumns(holding: other.root, ledBy: this.relationship)
        if thisCandidates.count == 1 { otherCandidates.removeAll { $0 == thisCandidates[0] } }
        if otherCandidates.count == 1 { thisCandidates.removeAll { $0 == otherCandidates[0] } }
        let pair = "'\(this.root).\(this.relationship)' ↔ '\(other.root).\(other.relationship)'"
        for (side, found) in [(this.root, thisCandidates), (other.root, otherCandidates)] where found.count > 1 {
            throw StoreError(.schemaMismatch, "the join table \(table) of \(pair) has columns "
                + found.joined(separator: " and ") + ", either of which may hold the items of '\(side)'; this "
                + "reader cannot tell which")
        }
        guard columns.count == 2, let thisColumn = thisCandidates.first, let otherColumn = otherCandidates.first,
              thisColumn != otherColumn else {
            throw StoreError(.schemaMismatch, "the join table \(table) has columns \(columns.joined(separator: ", ")); "
                + "this reader expects one for each side of \(pair)")
        }
        return (thisColumn, otherColumn, table)
    }

    /// The uniqueness constraints of a hierarchy's table as unique indexes: Core Data keeps each
    /// (the model's uniqueness constraints, archived as `NSUniqueTuples`) as a unique index
    /// `Z_<Entity>_UNIQUE_<a>_<b>` on the attributes' columns. One that includes `Z_ENT` (a constraint of a subentity, unique among
    /// that entity's items only) has no equal here and is left out, as are indexes on columns no
    /// attribute holds.
    static func uniquenessConstraints(_ database: ForeignDatabase, table: String,
                                      columnAttributes: [String: String], taken: Set<String>) throws -> [Index] {
        var indexes: [Index] = []
        var names = taken
        for row in try database.rows("SELECT name FROM pragma_index_list(?) WHERE \"unique\" = 1 AND partial = 0 "
            + "AND origin = 'c' ORDER BY name", [.string(table)]) {
            guard let name = row[0].stringValue, name.hasPrefix("Z_"), name.contains("_UNIQUE_") else { continue }
            let columns = try database.rows("SELECT name FROM pragma_index_info(?) ORDER BY seqno", [.string(name)])
                .map { $0[0].stringValue }
            let attributes = columns.compactMap { $0.flatMap { columnAttributes[$0] } }
            guard !attributes.isEmpty, attributes.count == columns.count else { continue }
            var indexName = "unique_" + attributes.joined(separator: "_")
            if indexName.utf8.count > Limits.maxNameLength || names.contains(indexName) {
                indexName = "unique_\(indexes.count + 1)"
            }
            names.insert(indexName)
            indexes.append(Index(indexName, on: attributes, unique: true))
        }
        return indexes
    }

    /// Refuses, up front and naming the row, a value that does not fit its attribute: a column
    /// holding a storage class its conversion cannot take, or a null in a required attribute.
    static func checkValues(_ database: ForeignDatabase, _ entities: [ForeignEntity]) throws {
        for foreign in entities {
            guard case .column(let key) = foreign.key else { continue }
            var columns = foreign.columns
            if key.expression.hasPrefix("t.") { columns.append(key) }
            for column in columns where column.expression.hasPrefix("t.") {
                let allowed: [String]
                switch column.conversion {
                case .int: allowed = ["integer"]
                case .double, .referenceDate, .unixDate: allowed = ["integer", "real"]
                case .string, .textDate: allowed = ["text"]
                case .bytes: allowed = ["blob", "text"]
                case .bool: allowed = ["integer"]
                case .uuid: allowed = ["blob", "text"]
                case .externalBinary: allowed = ["blob"]
                }
                let optional = foreign.schema.attribute(named: column.attribute)?.isOptional ?? true
                let classes = (optional ? ["null"] : []) + allowed
                let list = classes.map { "'\($0)'" }.joined(separator: ", ")
                let sql = "SELECT \(key.expression), typeof(\(column.expression)) FROM \(foreign.from) WHERE "
                    + "typeof(\(column.expression)) NOT IN (\(list)) LIMIT 1"
                if let row = try database.rows(sql).first {
                    throw StoreError(.invalidValue, "\(column.origin) holds \(row[1].stringValue ?? "?") in the row "
                        + "with key \(row[0]), where '\(foreign.schema.name).\(column.attribute)' is "
                        + "\(optional ? "an optional" : "a required") \(column.conversion.type)")
                }
            }
        }
    }
}

/// A value a Core Data entity stores in a column: an attribute, or an element of a composite
/// attribute (SwiftData's stored struct), which is read as an attribute of its own named by its
/// path with `_` (`author_person`; a nested composite's `address_city_name`; an element named
/// like its composite, as SwiftData keeps an enum, by the composite's name: `ice`), optional when
/// the element or any composite holding it is.
struct StoredAttribute {
    /// The entity that declares the top-level attribute.
    var entity: String
    /// The attribute as read here: named by its path, with the element's type.
    var attribute: CoreDataModel.Attribute
    /// The path as Core Data names it (`author.person`), for messages.
    var path: String
    /// The element's own name, which its column is named after.
    var elementName: String
    /// The top-level attribute's name, and the element's position among its leaves.
    var topLevel: String
    var position: Int

    /// `attribute`, or the leaves of a composite.
    /// - Throws: `invalidArgument` for a composite with no elements (a model file that does not
    ///   give them).
    static func flatten(_ attribute: CoreDataModel.Attribute, of entity: String) throws -> [StoredAttribute] {
        guard attribute.type == 2100 else {
            return [StoredAttribute(entity: entity, attribute: attribute, path: attribute.name,
                                    elementName: attribute.name, topLevel: attribute.name, position: 0)]
        }
        var leaves: [StoredAttribute] = []
        func visit(_ composite: CoreDataModel.Attribute, names: [String], optional: Bool) throws {
            guard !composite.elements.isEmpty else {
                throw StoreError(.invalidArgument, "attribute '\(entity).\(names.joined(separator: "."))' is a "
                    + "composite whose elements the model does not give: read the store's own model (leave out "
                    + "--model: SwiftData and Core Data keep it in Z_MODELCACHE)")
            }
            for element in composite.elements where !element.isTransient {
                let path = names + [element.name]
                let isOptional = optional || element.isOptional
                if element.type == 2100 {
                    try visit(element, names: path, optional: isOptional)
                    continue
                }
                var leaf = element
                // An element named like its composite (how SwiftData keeps an enum: `ice.ice`)
                // takes the composite's name.
                leaf.name = (element.name == names.last ? names : path).joined(separator: "_")
                leaf.isOptional = isOptional
                leaves.append(StoredAttribute(entity: entity, attribute: leaf, path: path.joined(separator: "."),
                                              elementName: element.name, topLevel: attribute.name,
                                              position: leaves.count))
            }
        }
        try visit(attribute, names: [attribute.name], optional: attribute.isOptional)
        return leaves
    }

    /// The column of each of `stored`. Core Data names a column `Z` and the attribute's (or the
    /// element's own) name in capitals; values that share a name (a composite's element `id`
    /// beside the entity's `id`) are numbered, `ZID`, `ZID1`, …, in the order Core Data creates
    /// the columns: by SQL type, in the order the table holds its types (a UUID before other
    /// binary data), then by top-level attribute name, then by the element's position.
    /// - Throws: `schemaMismatch` when the table does not hold as many such columns.
    static func columns(of stored: [StoredAttribute], table: [(name: String, type: String)], tableName: String) throws
        -> [String]
    {
        var result = stored.map { "Z" + $0.elementName.uppercased() }
        let groups = Dictionary(grouping: stored.indices, by: { result[$0] }).filter { $0.value.count > 1 }
        for (base, members) in groups.sorted(by: { $0.key < $1.key }) {
            let candidates = table.filter { column in
                column.name == base || (column.name.hasPrefix(base) && column.name.count > base.count
                    && column.name.dropFirst(base.count).allSatisfy(\.isASCII) && column.name.dropFirst(base.count).allSatisfy(\.isNumber))
            }.map(\.name)
            guard candidates.count == members.count else {
                throw StoreError(.schemaMismatch, members.map { "'\(stored[$0].entity).\(stored[$0].path)'" }
                    .joined(separator: ", ") + " share the column name \(base), but \(tableName) holds "
                    + (candidates.isEmpty ? "no such column" : candidates.joined(separator: ", "))
                    + ": the model is not the store's")
            }
            func typeOrder(_ member: StoredAttribute) -> (Int, Int) {
                let type = sqlType(member.attribute.type)
                let first = table.firstIndex { $0.type.uppercased() == type } ?? Int.max
                return (first, member.attribute.type == 1100 ? 0 : 1)
            }
            let ordered = members.sorted { a, b in
                let (x, y) = (stored[a], stored[b])
                if typeOrder(x) != typeOrder(y) { return typeOrder(x) < typeOrder(y) }
                if x.topLevel != y.topLevel { return x.topLevel < y.topLevel }
                return x.position < y.position
            }
            for (member, column) in zip(ordered, candidates) { result[member] = column }
        }
        return result
    }

    /// The SQL type Core Data declares a column of attribute type `type` with.
    static func sqlType(_ type: Int) -> String {
        switch type {
        case 100, 200, 300, 800: "INTEGER"
        case 400: "DECIMAL"
        case 500, 600: "FLOAT"
        case 700, 1200: "VARCHAR"
        case 900: "TIMESTAMP"
        default: "BLOB"
        }
    }
}
