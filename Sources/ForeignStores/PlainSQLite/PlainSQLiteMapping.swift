internal import CSQLite
@_spi(Backend) import DataStoreAPI
import Foundation

/// Reads a plain SQLite database (GRDB's, SQLite.swift's, or one written by hand) as a store.
///
/// - Each table with a one-column primary key becomes an entity of the table's name; each
///   column an attribute of its name. A table without a primary key is refused unless the user
///   names a key (`key=TABLE.COLUMN`: a unique, non-null column, or `rowid`); a composite primary
///   key is refused (stores here key an item by one value) unless the table is a join table
///   (below).
/// - A column's type comes from its declared type and the values it holds (see
///   ``columnConversion(table:column:declared:classes:)``); values that do not fit are refused up
///   front, naming table, column and row.
/// - Unique indexes become unique indexes, other plain indexes indexes; a partial or expression
///   unique index is refused (its rule cannot be carried), a partial or expression plain index is
///   left out (it holds no data and no rule).
/// - A table of two columns that are together its primary key and each a foreign key to
///   another table (a join table, as GRDB's `hasMany(through:)` uses) becomes a many-to-many
///   between the two, a to-many named after the join table on each side.
/// - A foreign key on one column to another table's primary key becomes a to-one relationship
///   named after the column, with a to-many inverse on the other table named after this table;
///   its `ON DELETE` action becomes the to-many's delete rule (`CASCADE` cascade, `SET NULL`
///   nullify, `RESTRICT` and `NO ACTION` deny); `SET DEFAULT`, composite foreign keys and ones to
///   a column that is not the primary key are refused. Rows that break a foreign key are refused
///   (`PRAGMA foreign_key_check`), since every reference here leads to an item.
enum PlainSQLiteMapping {
    struct Column {
        var name: String
        var declared: String
        var notNull: Bool
        var primaryKeyPosition: Int
    }

    static func map(_ database: ForeignDatabase, keys: [String: String], tables selection: [String]? = nil) throws
        -> ForeignMapping {
        // Damage first: a file cut short is named as damaged, not by the first table it breaks.
        try database.requireIntact()
        // Virtual tables: a full-text index over another table (FTS4/5 with `content=`, or
        // contentless) and the shadow tables of every virtual table are derived data, which the
        // app rebuilds from its tables: left out, and said so. A full-text table that holds its
        // own text (FTS3, FTS4/5 without `content=`) and an R*Tree hold the only copy of their
        // rows: read as entities, keyed by rowid (an R*Tree by its id, which is its rowid).
        var derived = try derivedTables(database)
        let virtual = try virtualTables(database, derived: derived)
        var keys = keys
        for table in virtual where table.holdsData {
            derived[table.name] = nil
            if keys[table.name] == nil { keys[table.name] = table.key }
        }
        let unreadable = virtual.filter { $0.module == nil }
        var allTables = try database.tableNames().filter { !$0.hasPrefix("sqlite_") && derived[$0] == nil }
        let fileTables = allTables
        // What the file is, decided on all of its tables (never on the ones asked for).
        if fileTables.contains("_ds_meta") || fileTables.contains("_ds_feed") {
            throw StoreError(.invalidArgument, "\(database.path) is a store of this toolkit: read it as "
                + "sqlite:\(database.path)")
        }
        if fileTables.contains("Z_PRIMARYKEY") && fileTables.contains("Z_METADATA") {
            throw StoreError(.invalidArgument, "\(database.path) is a Core Data store: read it as "
                + "coredata:\(database.path), which reads its model")
        }
        if let selection {
            // The tables asked for (and the join tables between two of them), before any table is
            // checked: one that cannot be carried does not stop a copy of the others.
            for table in selection.sorted() {
                if let index = virtual.first(where: { $0.name == table && !$0.holdsData && $0.module != nil }) {
                    throw StoreError(.invalidArgument, "'\(table)' is \(index.what), derived data that the app "
                        + "rebuilds from its tables, and is left out; choose the tables it indexes")
                }
                if derived[table] == "shadow" {
                    throw StoreError(.invalidArgument, "'\(table)' is a shadow table of a virtual table (its storage), "
                        + "not data of its own, and is left out")
                }
            }
            let unknown = selection.filter { name in !allTables.contains(name) && !unreadable.contains { $0.name == name } }
                .sorted()
            if !unknown.isEmpty {
                let candidates = try joinTables(database, tables: allTables.filter { keys[$0] == nil }, checking: false)
                throw StoreError(.unknownEntity, "\(database.path) has no table" + (unknown.count == 1 ? " " : "s ")
                    + unknown.map { "'\($0)'" }.joined(separator: ", ") + " (its tables that --entities may choose: "
                    + allTables.filter { candidates[$0] == nil }.joined(separator: ", ") + ")")
            }
            let candidates = try joinTables(database, tables: allTables.filter { keys[$0] == nil }, checking: false)
            // A join table is a many-to-many, not an entity: it comes with the two tables it pairs.
            for table in selection.sorted() {
                guard let join = candidates[table] else { continue }
                let sides = join.sides.map(\.parent)
                throw StoreError(.invalidArgument, "'\(table)' is the join table of the many-to-many between "
                    + sides.map { "'\($0)'" }.joined(separator: " and ") + ", not an entity: it is copied with them; "
                    + "choose " + sides.joined(separator: ",") + " instead")
            }
            var chosen: [String] = []
            for table in allTables {
                if selection.contains(table) {
                    chosen.append(table)
                    continue
                }
                guard let join = candidates[table], join.sides.allSatisfy({ selection.contains($0.parent) })
                else { continue }
                // Its pairs are data of the two tables chosen: one that cannot be carried is
                // refused (never left out without a word), saying why it came along.
                do {
                    _ = try joinTables(database, tables: [table])
                } catch let error as StoreError {
                    let parents = join.sides.map(\.parent)
                    throw StoreError(error.code, error.message + " (it comes with "
                        + (parents[0] == parents[1] ? "'\(parents[0])', which --entities chose; give "
                            + "key=\(table).rowid to read it as a table of its own, which --entities then leaves out"
                            : parents.map { "'\($0)'" }.joined(separator: " and ") + ", which --entities chose; "
                                + "choose one of them without the other to copy it without these pairs") + ")")
                }
                chosen.append(table)
            }
            allTables = chosen
        }
        for table in unreadable where selection == nil || selection?.contains(table.name) == true {
            throw StoreError(.invalidArgument, "'\(table.name)' is \(table.what), which this reader does not know: "
                + "whether it holds the only copy of its rows cannot be told, so it is neither read nor left out "
                + "unsaid; choose the other tables with --entities to copy them without it")
        }
        // Every unknown name at once, in a fixed order (never a dictionary's).
        let unknown = keys.sorted { $0.key < $1.key }.filter { !fileTables.contains($0.key) }
        if !unknown.isEmpty {
            throw StoreError(.unknownEntity, unknown.map { "key=\($0.key).\($0.value)" }.joined(separator: ", ")
                + ": \(database.path) has no table" + (unknown.count == 1 ? " " : "s ")
                + unknown.map { "'\($0.key)'" }.joined(separator: ", ") + " (it has \(fileTables.joined(separator: ", ")))")
        }
        // Every key against its table first, before any table is checked.
        for (table, named) in keys.sorted(by: { $0.key < $1.key }) where allTables.contains(table) {
            if named == "rowid" {
                if try isWithoutRowid(database, table) {
                    throw StoreError(.invalidArgument, "key=\(table).rowid: table '\(table)' is WITHOUT ROWID, so it "
                        + "has no rowid; name a unique, non-null column of it")
                }
            } else if try database.rows("SELECT 1 FROM pragma_table_info(?) WHERE name = ?",
                                        [.string(table), .string(named)]).isEmpty {
                throw StoreError(.invalidArgument, "key=\(table).\(named): table '\(table)' has no column '\(named)'")
            }
        }
        var entities: [EntitySchema] = []
        var foreign: [String: ForeignEntity] = [:]
        var keyColumns: [String: (name: String, type: ValueType)] = [:]
        var columnsOf: [String: [Column]] = [:]
        let joins = try joinTables(database, tables: allTables.filter { keys[$0] == nil })
        let tables: [String] = allTables.filter { joins[$0] == nil }
        // Keys first: a foreign key needs the type of the key it points at.
        for table in tables {
            try Schema.checkName(table, what: "table")
            let columns = try database.rows("SELECT name, type, \"notnull\", pk FROM pragma_table_info(?)",
                                            [.string(table)]).map { row in
                Column(name: row[0].stringValue ?? "", declared: row[1].stringValue ?? "",
                       notNull: row[2] == .int(1), primaryKeyPosition: Int(row[3].intValue ?? 0))
            }
            columnsOf[table] = columns
            let primary = columns.filter { $0.primaryKeyPosition > 0 }
            if let named = keys[table] {
                guard named == "rowid" || columns.contains(where: { $0.name == named }) else {
                    throw StoreError(.invalidArgument, "key=\(table).\(named): table '\(table)' has no column '\(named)'")
                }
                keyColumns[table] = (named, .int)
            } else if primary.count == 1 {
                keyColumns[table] = (primary[0].name, .int)
            } else if primary.isEmpty {
                throw StoreError(.invalidArgument, "table '\(table)' has no primary key: name a unique, non-null column "
                    + "(or rowid) to key its items with key=\(table).COLUMN")
            } else {
                throw StoreError(.invalidArgument, "table '\(table)' has a composite primary key ("
                    + primary.sorted { $0.primaryKeyPosition < $1.primaryKeyPosition }.map(\.name)
                        .joined(separator: ", ")
                    + "): stores here key an item by one value; name a unique, non-null column (or rowid) with "
                    + "key=\(table).COLUMN")
            }
        }
        // The types of every column, from the declared types and the values held.
        var conversions: [String: [String: ForeignConversion]] = [:]
        for table in tables {
            let columns = columnsOf[table] ?? []
            var byName: [String: ForeignConversion] = [:]
            let classes = try storageClasses(database, table: table, columns: columns.map(\.name))
            for column in columns {
                var conversion = try columnConversion(table: table, column: column.name, declared: column.declared,
                                                      classes: classes[column.name] ?? [:])
                if conversion == .string, column.primaryKeyPosition == 0,
                   try holdsOnlyDateTimes(database, table: table, column: column.name) {
                    conversion = .textDate
                }
                if conversion == .uuid, classes[column.name]?["text"] == nil,
                   try !holdsOnlyUUIDBlobs(database, table: table, column: column.name) {
                    // A blob column named like a uuid whose values are not all 16 bytes holds bytes;
                    // one declared a uuid must hold uuids.
                    let declared = column.declared.uppercased()
                    guard !declared.contains("UUID") && !declared.contains("GUID") else {
                        throw StoreError(.invalidValue, "\(table).\(column.name) is declared '\(column.declared)' (a "
                            + "uuid) but holds blobs that are not 16 bytes; find them with: SELECT rowid, "
                            + "\(column.name) FROM \(table) WHERE length(\(column.name)) != 16")
                    }
                    conversion = .bytes
                }
                byName[column.name] = conversion
            }
            if keyColumns[table]?.name == "rowid", !columns.contains(where: { $0.name == "rowid" }) {
                byName["rowid"] = .int
            }
            conversions[table] = byName
            if let key = keyColumns[table], var conversion = byName[key.name] {
                if conversion == .uuid, classes[key.name]?["text"] != nil {
                    // Uuids kept as text order as text, not as their bytes: such a key is a string.
                    guard classes[key.name]?["blob"] == nil else {
                        throw StoreError(.invalidValue, "table '\(table)': its key column '\(key.name)' holds uuids "
                            + "both as text and as blobs; a key is of one type")
                    }
                    conversion = .string
                    byName[key.name] = .string
                    conversions[table] = byName
                }
                guard [.int, .string, .uuid].contains(conversion) else {
                    throw StoreError(.invalidArgument, "table '\(table)': its key column '\(key.name)' holds "
                        + "\(conversion.type) values; a key is an int, a string or a uuid")
                }
                keyColumns[table] = (key.name, conversion.type)
            }
        }
        // A named key column of a rowid table is ordered (and checked) in the temp database.
        var ordered: [String: (from: String, key: String)] = [:]
        for (table, named) in keys.sorted(by: { $0.key < $1.key }) where named != "rowid" {
            guard let key = keyColumns[table], try !isWithoutRowid(database, table) else { continue }
            // An R*Tree's id is its rowid: ordered and unique already.
            if virtual.contains(where: { $0.name == table && $0.key == named }) { continue }
            let primary = columnsOf[table]?.filter { $0.primaryKeyPosition > 0 } ?? []
            guard primary.count != 1 || primary[0].name != named else { continue }
            let allowed = key.type == .int ? ["integer"] : key.type == .string ? ["text"] : ["blob"]
            ordered[table] = try ForeignKeyOrder.make(database, table: table, column: named, rowid: "rowid",
                                                      allowed: allowed, label: "\(table).\(named)")
        }
        try checkKeys(database, keyColumns: keyColumns.filter { ordered[$0.key] == nil }, columnsOf: columnsOf)
        try checkForeignKeys(database, tables: allTables)
        // Relationships from foreign keys.
        var relationships: [String: [Relationship]] = [:]
        for table in tables {
            let foreignKeys = try database.rows(
                "SELECT id, seq, \"table\", \"from\", \"to\", on_delete FROM pragma_foreign_key_list(?)",
                [.string(table)])
            // In the order of the foreign keys' ids, which the file fixes (a set's order changes from
            // process to process, and the schema of a file must not).
            let ids = Set(foreignKeys.compactMap { $0[0].intValue }).sorted()
            for id in ids {
                let parts = foreignKeys.filter { $0[0] == .int(id) }
                let from = parts.map { $0[3].stringValue ?? "" }
                let parent = parts[0][2].stringValue ?? ""
                guard parts.count == 1 else {
                    throw StoreError(.invalidArgument, "table '\(table)': the foreign key (\(from.joined(separator: ", "))) "
                        + "to '\(parent)' has several columns; a relationship here is one key")
                }
                let column = from[0]
                // A table left out by the selection: the column stays, as a plain value.
                if let selection, !selection.contains(parent), !allTables.contains(parent) { continue }
                guard let parentKey = keyColumns[parent] else {
                    throw StoreError(.invalidArgument, "table '\(table)': column '\(column)' refers to table '\(parent)', "
                        + "which is not in the database")
                }
                let to = parts[0][4].stringValue
                guard to == nil || to == parentKey.name else {
                    throw StoreError(.invalidArgument, "table '\(table)': column '\(column)' refers to "
                        + "'\(parent).\(to ?? "")', which is not its key ('\(parentKey.name)'); a relationship here "
                        + "leads to an item's key")
                }
                let action = (parts[0][5].stringValue ?? "NO ACTION").uppercased()
                let rule: Relationship.DeleteRule
                switch action {
                case "CASCADE": rule = .cascade
                case "SET NULL": rule = .nullify
                case "RESTRICT", "NO ACTION": rule = .deny
                default:
                    throw StoreError(.invalidArgument, "table '\(table)': column '\(column)' refers to '\(parent)' "
                        + "ON DELETE \(action), which stores here cannot carry (they cascade, set null or refuse)")
                }
                guard conversions[table]?[column]?.type == parentKey.type else {
                    throw StoreError(.invalidArgument, "table '\(table)': column '\(column)' holds "
                        + "\(conversions[table]?[column]?.type.rawValue ?? "?") values but refers to '\(parent)', "
                        + "whose key is \(parentKey.type)")
                }
                let optional = !(columnsOf[table]?.first { $0.name == column }?.notNull ?? false)
                let fromSameTable = ids.filter { other in
                    foreignKeys.first { $0[0] == .int(other) }?[2].stringValue == parent
                }.count
                let inverse = fromSameTable > 1 ? "\(table)_\(column)" : table
                if rule == .nullify && !optional {
                    throw StoreError(.invalidArgument, "table '\(table)': column '\(column)' is NOT NULL but its foreign "
                        + "key says ON DELETE SET NULL")
                }
                relationships[table, default: []].append(
                    .toOne(column, to: parent, inverse: inverse, optional: optional, deleteRule: .nullify))
                relationships[parent, default: []].append(.toMany(inverse, to: table, inverse: column, deleteRule: rule))
            }
        }
        // Many-to-many: a join table's two foreign keys, as a to-many on each side named after it.
        for (table, join) in joins.sorted(by: { $0.key < $1.key }) {
            for side in join.sides {
                guard let parentKey = keyColumns[side.parent] else {
                    throw StoreError(.invalidArgument, "join table '\(table)': column '\(side.column)' refers to table "
                        + "'\(side.parent)', which is not in the database")
                }
                guard parentKey.type == .int else {
                    throw StoreError(.invalidArgument, "join table '\(table)' pairs items of '\(side.parent)', whose key "
                        + "is \(parentKey.type); this reader pairs int keys")
                }
                guard columnsOf[side.parent]?.contains(where: { $0.name == table }) != true else {
                    throw StoreError(.invalidArgument, "join table '\(table)': table '\(side.parent)' has a column of "
                        + "the same name, the name of the relationship this reader gives it")
                }
            }
            let (a, b) = (join.sides[0], join.sides[1])
            relationships[a.parent, default: []].append(.toMany(table, to: b.parent, inverse: table, deleteRule: a.rule))
            relationships[b.parent, default: []].append(.toMany(table, to: a.parent, inverse: table, deleteRule: b.rule))
        }
        for table in tables {
            guard let key = keyColumns[table], let byName = conversions[table] else { continue }
            let columns = columnsOf[table] ?? []
            var attributes: [Attribute] = []
            var foreignColumns: [ForeignColumn] = []
            if key.name == "rowid", !columns.contains(where: { $0.name == "rowid" }) {
                attributes.append(Attribute("rowid", .int))
            }
            for column in columns {
                let conversion = byName[column.name] ?? .bytes
                try Schema.checkName(column.name, what: "column")
                let isKey = column.name == key.name
                var optional = !isKey && !column.notNull && column.primaryKeyPosition == 0
                if !isKey && !column.notNull && column.primaryKeyPosition > 0 {
                    // A declared primary key that is not the table's key here (key=T.rowid) and not
                    // a rowid alias may hold NULL, which SQLite allows: optional when it does.
                    optional = try !database.rows("SELECT 1 FROM \(ForeignDatabase.quoted(table)) WHERE "
                        + "\(ForeignDatabase.quoted(column.name)) IS NULL LIMIT 1").isEmpty
                }
                attributes.append(Attribute(column.name, conversion.type, optional: optional))
                if !isKey {
                    foreignColumns.append(ForeignColumn(attribute: column.name,
                                                        expression: "t." + ForeignDatabase.quoted(column.name),
                                                        conversion: conversion, origin: "\(table).\(column.name)"))
                }
            }
            let keyColumn = ForeignColumn(attribute: key.name,
                                          expression: ordered[table]?.key ?? "t." + ForeignDatabase.quoted(key.name),
                                          conversion: byName[key.name] ?? .int, origin: "\(table).\(key.name)")
            let indexes = try self.indexes(database, table: table)
            entities.append(EntitySchema(table, primaryKey: key.name, attributes: attributes, indexes: indexes,
                                         relationships: relationships[table] ?? []))
            foreign[table] = ForeignEntity(schema: entities[entities.count - 1],
                                           from: ordered[table]?.from ?? ForeignDatabase.quoted(table) + " AS t",
                                           filter: nil,
                                           key: .column(keyColumn), columns: foreignColumns, origin: "table \(table)")
        }
        let schema = try Schema(version: 1, entities: entities).resolved()
        for entity in schema.entities { foreign[entity.name]?.schema = entity }
        for (table, join) in joins {
            let (a, b) = (join.sides[0], join.sides[1])
            guard let declared = schema.entity(named: a.parent)?.relationships.first(where: { $0.name == table }) else {
                continue
            }
            let name = Schema.joinEntityName(a.parent, declared)
            guard let entity = schema.entity(named: name) else { continue }
            let (source, target) = name == "\(a.parent)_\(table)" ? (a, b) : (b, a)
            let sourceExpression = "j." + ForeignDatabase.quoted(source.column)
            let targetExpression = "j." + ForeignDatabase.quoted(target.column)
            foreign[name] = ForeignEntity(
                schema: entity, from: ForeignDatabase.quoted(table) + " AS j", filter: nil,
                key: .pair(sourceExpression, targetExpression),
                columns: [ForeignColumn(attribute: "source", expression: sourceExpression, conversion: .int,
                                        origin: "\(table).\(source.column)"),
                          ForeignColumn(attribute: "target", expression: targetExpression, conversion: .int,
                                        origin: "\(table).\(target.column)")],
                origin: "table \(table)")
        }
        // (One of a module this reader does not know is left out by --entities, not as derived.)
        let virtualTables = derived.filter { entry in entry.value == "virtual" && !unreadable.contains { $0.name == entry.key } }
            .keys.sorted()
        let shadows = derived.filter { $0.value == "shadow" }.count
        let readVirtual = virtual.filter { $0.holdsData && tables.contains($0.name) }.map(\.name)
        return ForeignMapping(schema: schema, entities: foreign,
                              summary: "plain SQLite: \(tables.count) tables read as entities"
                                + (readVirtual.isEmpty ? "" : " (the virtual table\(readVirtual.count == 1 ? "" : "s") "
                                    + readVirtual.joined(separator: ", ") + ", which hold\(readVirtual.count == 1 ? "s" : "") "
                                    + "the only copy of \(readVirtual.count == 1 ? "its" : "their") rows, keyed by rowid)")
                                + (virtualTables.isEmpty ? "" : "; left out as derived data (an index the app rebuilds "
                                    + "from its tables): the virtual table\(virtualTables.count == 1 ? "" : "s") "
                                    + virtualTables.joined(separator: ", ")
                                    + (shadows == 0 ? "" : " and \(shadows) shadow table\(shadows == 1 ? "" : "s")")))
    }

    /// A virtual table of the file, by what its `CREATE VIRTUAL TABLE` says.
    struct VirtualTable {
        var name: String
        /// The module when this reader knows it (`fts3`, `fts4`, `fts5`, `rtree`, `rtree_i32`), else nil.
        var module: String?
        /// Whether it holds the only copy of its rows (a full-text table without `content=`, an
        /// R*Tree), so that leaving it out would lose them.
        var holdsData: Bool
        /// The column that keys its rows when it is read: `rowid`, or an R*Tree's id column.
        var key: String
        /// What it is, for messages ("an FTS5 full-text index over 'book'").
        var what: String
    }

    /// The virtual tables of the file (those `derived` names `"virtual"`), in name order; one of
    /// a module this reader does not know (from an extension) has no `module`: whether it holds
    /// data cannot be told, so ``map(_:keys:tables:)`` refuses the file unless `--entities`
    /// leaves it out.
    static func virtualTables(_ database: ForeignDatabase, derived: [String: String]) throws -> [VirtualTable] {
        var found: [VirtualTable] = []
        for name in derived.filter({ $0.value == "virtual" }).keys.sorted() {
            let sql = try database.rows("SELECT sql FROM sqlite_master WHERE name = ?", [.string(name)])
                .first?[0].stringValue ?? ""
            // CREATE VIRTUAL TABLE name USING module(arguments): the word USING (never inside a
            // name such as housing_fts), then the module's name.
            guard let using = sql.range(of: #"(?i)(?<![A-Za-z0-9_$"'`\]])USING\s+"#, options: .regularExpression)
            else { continue }
            let rest = sql[using.upperBound...]
            let module = String(rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" }).lowercased()
            let arguments = rest.drop { $0 != "(" }
            let content = arguments.range(of: #"(^|[(,\s])content\s*="#, options: [.regularExpression, .caseInsensitive])
            switch module {
            case "fts3", "fts4", "fts5":
                let over = content.map { range -> String in
                    let value = arguments[range.upperBound...].trimmingCharacters(in: .whitespaces)
                        .prefix { $0 != "," && $0 != ")" }.trimmingCharacters(in: CharacterSet(charactersIn: " '\"[]`"))
                    return value.isEmpty ? "contentless" : "over '\(value)'"
                }
                found.append(VirtualTable(name: name, module: module, holdsData: over == nil || module == "fts3",
                                          key: "rowid",
                                          what: "an \(module.uppercased()) full-text index" + (over.map { " (\($0))" } ?? "")))
            case "rtree", "rtree_i32":
                let first = try database.rows("SELECT name FROM pragma_table_info(?) ORDER BY cid LIMIT 1",
                                              [.string(name)]).first?[0].stringValue ?? "rowid"
                found.append(VirtualTable(name: name, module: module, holdsData: true, key: first, what: "an R*Tree"))
            default:
                found.append(VirtualTable(name: name, module: nil, holdsData: false, key: "rowid",
                                          what: "a virtual table of the module \(module)"))
            }
        }
        return found
    }

    /// The virtual tables of the file (`"virtual"`) and their shadow tables (`"shadow"`), by
    /// name: SQLite's own list (`pragma_table_list`), and, for a module this SQLite does not
    /// have, the tables named like its shadow tables (`NAME_content`, `NAME_data`, …).
    /// (`tableList` false reads them as SQLite before 3.37 must, and lets a test compare both.)
    static func derivedTables(_ database: ForeignDatabase, tableList: Bool = sqlite3_libversion_number() >= 3_037_000)
        throws -> [String: String] {
        var derived: [String: String] = [:]
        if tableList {
            for row in try database.rows("SELECT name, type FROM pragma_table_list WHERE schema = 'main'") {
                guard let name = row[0].stringValue, let type = row[1].stringValue, type == "virtual" || type == "shadow"
                else { continue }
                derived[name] = type
            }
        } else {
            // Before SQLite 3.37 (no pragma_table_list): the virtual tables by their CREATE
            // statement; their shadow tables by name, below.
            for row in try database.rows("SELECT name FROM sqlite_master WHERE type = 'table' "
                + "AND upper(substr(ltrim(sql), 1, 20)) = 'CREATE VIRTUAL TABLE'") {
                if let name = row[0].stringValue { derived[name] = "virtual" }
            }
        }
        let suffixes = ["config", "content", "data", "docsize", "idx", "segments", "segdir", "stat", "node", "parent",
                        "rowid"]
        let virtualTables = derived.filter { $0.value == "virtual" }.keys.sorted()
        for name in try database.tableNames() where derived[name] == nil {
            if virtualTables.contains(where: { table in suffixes.contains { name == "\(table)_\($0)" } }) {
                derived[name] = "shadow"
            }
        }
        return derived
    }

    /// A join table: its two columns, each a foreign key to another table's key, with the rule
    /// its `ON DELETE` gives the to-many on that side.
    struct JoinTable {
        struct Side {
            var column: String
            var parent: String
            var rule: Relationship.DeleteRule
        }
        var sides: [Side]
    }

    /// The tables that are only the pairs of a many-to-many: two columns, together the primary
    /// key, each a foreign key to the key of a different table, holding integers and no null.
    /// (`ON DELETE CASCADE` or `SET NULL` removes a pair with its item: the to-many's nullify;
    /// `RESTRICT` and `NO ACTION` refuse the delete: deny.)
    /// `checking` false only finds them (which tables pair which), for narrowing a selection.
    static func joinTables(_ database: ForeignDatabase, tables: [String], checking: Bool = true) throws
        -> [String: JoinTable] {
        var joins: [String: JoinTable] = [:]
        for table in tables {
            let columns = try database.rows("SELECT name, pk FROM pragma_table_info(?)", [.string(table)])
            guard columns.count == 2, columns.allSatisfy({ ($0[1].intValue ?? 0) > 0 }) else { continue }
            let foreignKeys = try database.rows(
                "SELECT id, \"table\", \"from\", on_delete FROM pragma_foreign_key_list(?)", [.string(table)])
            guard foreignKeys.count == 2, Set(foreignKeys.map { $0[0] }).count == 2,
                  Set(foreignKeys.map { $0[2] }).count == 2 else { continue }
            var sides: [JoinTable.Side] = []
            for key in foreignKeys.sorted(by: { ($0[2].stringValue ?? "") < ($1[2].stringValue ?? "") }) {
                let column = key[2].stringValue ?? "", parent = key[1].stringValue ?? ""
                let action = (key[3].stringValue ?? "NO ACTION").uppercased()
                let rule: Relationship.DeleteRule
                switch action {
                case "CASCADE", "SET NULL": rule = .nullify
                case "RESTRICT", "NO ACTION": rule = .deny
                default:
                    guard checking else { rule = .deny; break }
                    throw StoreError(.invalidArgument, "join table '\(table)': column '\(column)' refers to '\(parent)' "
                        + "ON DELETE \(action), which stores here cannot carry")
                }
                sides.append(JoinTable.Side(column: column, parent: parent, rule: rule))
            }
            guard checking else {
                joins[table] = JoinTable(sides: sides)
                continue
            }
            guard sides[0].parent != sides[1].parent else {
                throw StoreError(.invalidArgument, "join table '\(table)' pairs items of '\(sides[0].parent)' with each "
                    + "other; this reader carries many-to-many between two tables")
            }
            let quoted = ForeignDatabase.quoted(table)
            let (a, b) = (ForeignDatabase.quoted(sides[0].column), ForeignDatabase.quoted(sides[1].column))
            if let row = try database.rows("SELECT \(a), \(b) FROM \(quoted) WHERE typeof(\(a)) != 'integer' "
                + "OR typeof(\(b)) != 'integer' LIMIT 1").first {
                throw StoreError(.invalidValue, "join table '\(table)' holds the pair (\(row[0]), \(row[1])); a pair "
                    + "is two integer keys")
            }
            joins[table] = JoinTable(sides: sides)
        }
        return joins
    }

    /// How many values of each storage class each column holds: one pass over the table.
    static func storageClasses(_ database: ForeignDatabase, table: String, columns: [String]) throws
        -> [String: [String: Int]]
    {
        guard !columns.isEmpty else { return [:] }
        let classes = ["integer", "real", "text", "blob", "null"]
        let sums = columns.flatMap { column in
            classes.map { "sum(typeof(\(ForeignDatabase.quoted(column))) = '\($0)')" }
        }
        let row = try database.rows("SELECT \(sums.joined(separator: ", ")) FROM \(ForeignDatabase.quoted(table))")
        var result: [String: [String: Int]] = [:]
        for (c, column) in columns.enumerated() {
            for (k, kind) in classes.enumerated() {
                let count = Int(row.first?[c * classes.count + k].intValue ?? 0)
                if count > 0 { result[column, default: [:]][kind] = count }
            }
        }
        return result
    }

    /// The conversion of a column from its declared type and the storage classes of its values:
    ///
    /// | declared | held | attribute |
    /// | --- | --- | --- |
    /// | contains `UUID`/`GUID` | 16-byte blobs or 36-character text | uuid (a key held as text: string, which orders as the text does) |
    /// | `BOOL…` | 0 and 1 | bool |
    /// | `DATE…`, `TIME…` | text / numbers | date (GRDB's and ISO text; seconds since 1970) |
    /// | `INT…` | integers | int |
    /// | `CHAR`/`CLOB`/`TEXT` | text | string (date when every value is a date and time: see ``holdsOnlyDateTimes(_:table:column:)``) |
    /// | `BLOB` or none | blobs | bytes (uuid when every blob is 16 bytes and the column is named `uuid` or `…UUID`) |
    /// | `REAL`/`FLOA`/`DOUB` | numbers | double |
    /// | `NUMERIC`, `DECIMAL` or none | integers only: int; any real: double; text only: string |
    ///
    /// Anything else (text in an int column, a mixture a type cannot hold) is refused, naming the
    /// table, the column and what it holds.
    static func columnConversion(table: String, column: String, declared: String, classes: [String: Int]) throws
        -> ForeignConversion
    {
        let type = declared.uppercased()
        let held = Set(classes.keys).subtracting(["null"])
        func refuse(_ wanted: String) -> StoreError {
            let holds = held.sorted().map { "\(classes[$0] ?? 0) \($0)" }.joined(separator: ", ")
            return StoreError(.invalidValue, "\(table).\(column) is declared '\(declared)' (\(wanted)) but holds "
                + "\(holds) values; find them with: SELECT rowid, \(column) FROM \(table) WHERE typeof(\(column)) "
                + "NOT IN ('null', …)")
        }
        func only(_ allowed: Set<String>, _ conversion: ForeignConversion, _ wanted: String) throws -> ForeignConversion {
            guard held.isSubset(of: allowed) else { throw refuse(wanted) }
            return conversion
        }
        if type.contains("UUID") || type.contains("GUID") {
            return try only(["blob", "text"], .uuid, "a uuid")
        }
        if type.hasPrefix("BOOL") { return try only(["integer"], .bool, "a bool") }
        if type.hasPrefix("DATE") || type.hasPrefix("TIME") {
            if held.isSubset(of: ["text"]) { return .textDate }
            return try only(["integer", "real"], .unixDate, "a date: text, or seconds since 1970")
        }
        if type.contains("INT") { return try only(["integer"], .int, "an int") }
        if type.contains("CHAR") || type.contains("CLOB") || type.contains("TEXT") {
            return try only(["text"], .string, "a string")
        }
        if type.contains("BLOB") || type.isEmpty {
            if held.isSubset(of: ["blob"]) {
                let lower = column.lowercased()
                return lower == "uuid" || lower.hasSuffix("uuid") ? .uuid : .bytes
            }
            if !type.isEmpty { throw refuse("bytes") }
        }
        if type.contains("REAL") || type.contains("FLOA") || type.contains("DOUB") {
            return try only(["integer", "real"], .double, "a double")
        }
        // NUMERIC affinity (or none): the values decide.
        if held.isSubset(of: ["integer"]) { return .int }
        if held.isSubset(of: ["integer", "real"]) { return .double }
        if held.isSubset(of: ["text"]) { return .string }
        throw refuse("one type")
    }

    /// Whether a text column holds at least one value and every value is a date and time as GRDB
    /// (`2020-01-02 03:04:05.678`) and SQLite.swift (`2020-01-02T03:04:05.678`) write them, as the
    /// copy parses it (``ForeignValues/parseDate(_:)``): such a column, declared `TEXT` by
    /// SQLite.swift, is read as dates. A pattern rejects most other columns at their first value;
    /// a column whose values all begin like dates is then read to its end, since text that only
    /// begins with a date (`2024-01-02 03:04:05 started`) is text.
    static func holdsOnlyDateTimes(_ database: ForeignDatabase, table: String, column: String) throws -> Bool {
        let name = ForeignDatabase.quoted(column), quotedTable = ForeignDatabase.quoted(table)
        let pattern = "'[0-9][0-9][0-9][0-9]-[0-1][0-9]-[0-3][0-9][ T][0-2][0-9]:[0-5][0-9]*'"
        guard try !database.rows("SELECT 1 FROM \(quotedTable) WHERE \(name) IS NOT NULL LIMIT 1").isEmpty else {
            return false
        }
        guard try database.rows("SELECT 1 FROM \(quotedTable) WHERE \(name) NOT GLOB \(pattern) LIMIT 1").isEmpty
        else { return false }
        let statement = try database.prepare("SELECT DISTINCT \(name) FROM \(quotedTable) WHERE \(name) IS NOT NULL")
        while try statement.step() {
            guard ForeignValues.parseDate(statement.text(at: 0)) != nil else { return false }
        }
        return true
    }

    /// Whether every value of a blob column named like a uuid (`uuid`, `…UUID`) is 16 bytes, so
    /// that it can be read as uuids; otherwise it is bytes.
    static func holdsOnlyUUIDBlobs(_ database: ForeignDatabase, table: String, column: String) throws -> Bool {
        let name = ForeignDatabase.quoted(column), quotedTable = ForeignDatabase.quoted(table)
        return try database.rows("SELECT 1 FROM \(quotedTable) WHERE \(name) IS NOT NULL AND length(\(name)) != 16 "
            + "LIMIT 1").isEmpty
    }

    /// Refuses key columns with nulls or duplicates (a `key=` column, or a primary key that a
    /// rowid table lets hold nulls), naming the first.
    static func checkKeys(_ database: ForeignDatabase, keyColumns: [String: (name: String, type: ValueType)],
                          columnsOf: [String: [Column]]) throws {
        for (table, key) in keyColumns.sorted(by: { $0.key < $1.key }) where key.name != "rowid" {
            let quotedTable = ForeignDatabase.quoted(table), column = ForeignDatabase.quoted(key.name)
            let primary = columnsOf[table]?.filter { $0.primaryKeyPosition > 0 } ?? []
            if primary.count == 1, primary[0].name == key.name {
                // SQLite keeps a primary key unique; only a rowid table's non-integer one may hold nulls.
                if primary[0].declared.uppercased() == "INTEGER" { continue }
                if try isWithoutRowid(database, table) { continue }
            }
            if let row = try database.rows("SELECT count(*) FROM \(quotedTable) WHERE \(column) IS NULL").first,
               row[0] != .int(0) {
                throw StoreError(.invalidValue, "\(table).\(key.name) keys the table's items but is null in \(row[0]) "
                    + "rows")
            }
            if let row = try database.rows("SELECT \(column) FROM \(quotedTable) GROUP BY \(column) "
                + "HAVING count(*) > 1 LIMIT 1").first {
                throw StoreError(.invalidValue, "\(table).\(key.name) keys the table's items but holds "
                    + "\(row[0]) more than once")
            }
        }
    }

    /// Whether `table` was made `WITHOUT ROWID`.
    static func isWithoutRowid(_ database: ForeignDatabase, _ table: String) throws -> Bool {
        try database.rows("SELECT 1 FROM sqlite_master WHERE name = ? AND sql LIKE '%WITHOUT ROWID%'",
                          [.string(table)]).first != nil
    }

    /// Refuses a database whose rows break a foreign key, naming the first.
    static func checkForeignKeys(_ database: ForeignDatabase, tables: [String]) throws {
        // Only the references between the tables read: one to a table left out is a plain value.
        guard let broken = try database.rows("SELECT \"table\", rowid, parent FROM pragma_foreign_key_check")
            .first(where: { row in tables.contains(row[0].stringValue ?? "") && tables.contains(row[2].stringValue ?? "") })
        else { return }
        throw StoreError(.referenceViolation, "table '\(broken[0].stringValue ?? "")', row with rowid \(broken[1]), "
            + "refers to an item of '\(broken[2].stringValue ?? "")' that does not exist; every reference here "
            + "leads to an item (find them all with PRAGMA foreign_key_check)")
    }

    /// The table's indexes that can be carried.
    static func indexes(_ database: ForeignDatabase, table: String) throws -> [Index] {
        var indexes: [Index] = []
        for row in try database.rows("SELECT name, \"unique\", origin, partial FROM pragma_index_list(?)",
                                     [.string(table)]) {
            let name = row[0].stringValue ?? ""
            let unique = row[1] == .int(1)
            let origin = row[2].stringValue ?? ""
            guard origin != "pk" else { continue }
            let columns = try database.rows("SELECT name FROM pragma_index_info(?) ORDER BY seqno", [.string(name)])
                .map { $0[0].stringValue }
            let isPartial = row[3] == .int(1)
            if isPartial || columns.contains(where: { $0 == nil }) {
                if unique {
                    throw StoreError(.invalidArgument, "table '\(table)': unique index '\(name)' is "
                        + (isPartial ? "partial" : "on an expression")
                        + ", a rule stores here cannot carry")
                }
                continue
            }
            let indexName = origin == "u" || (try? Schema.checkName(name, what: "index")) == nil
                ? "\(table)_" + columns.compactMap { $0 }.joined(separator: "_") : name
            indexes.append(Index(indexName, on: columns.compactMap { $0 }, unique: unique))
        }
        return indexes
    }
}

extension Value {
    var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    var intValue: Int64? { if case .int(let i) = self { i } else { nil } }
}
