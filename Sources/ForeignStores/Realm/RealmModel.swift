@_spi(Backend) import DataStoreAPI
import Foundation

/// The tables of a Realm file and their columns, as the file declares them: the group's top
/// array (table names, table tops), each table's spec (column types, names, attributes, keys),
/// its primary key, link targets and kind (top-level, embedded, asymmetric).
struct RealmModel {
    /// A column's type (realm-core's column types).
    enum ColumnType: Int {
        case int = 0, bool = 1, string = 2, binary = 4, mixed = 6, timestamp = 8, float = 9, double = 10
        case decimal = 11, link = 12, linkList = 13, backlink = 14, objectId = 15, typedLink = 16, uuid = 17
    }

    struct Column {
        var name: String
        var type: ColumnType
        /// Where its values are in each cluster leaf (the column key's low 16 bits).
        var leafIndex: Int
        var isNullable: Bool
        var isList: Bool
        var isSet: Bool
        var isDictionary: Bool
        /// The table a link column leads to (its key), or nil.
        var target: Int?
        /// The column key, as the file stores it.
        var key: Int64
        /// A dictionary's key type (string for every SDK).
        var keyType: ColumnType = .string
    }

    struct Table {
        var name: String
        /// The table key links use: (tag << 16) | index in the tables array.
        var key: Int
        /// Public columns in the spec's order, backlink columns left out.
        var columns: [Column]
        /// The column the objects are keyed by, if any.
        var primaryKey: Int?
        /// 0 top-level, 1 embedded, 2 asymmetric.
        var kind: Int
        /// The root of the objects' cluster tree (0 for none).
        var clusterRoot: Int
    }

    let file: RealmFile
    /// Every table of the file, in the file's order (deleted slots left out).
    var tables: [Table] = []

    init(_ file: RealmFile) throws {
        self.file = file
        guard file.topRef != 0 else { return }
        let top = try file.node(file.topRef, "the top array")
        guard [3, 5, 7, 9, 10, 11, 12].contains(top.count), top.hasRefs else {
            throw file.damaged("its top array at offset \(file.topRef) has \(top.count) elements (a Realm file's "
                + "has 3, 5, 7, 9, 10, 11 or 12)")
        }
        let logicalSize = try file.tagged(top, 2, "the logical file size")
        guard logicalSize >= 0, logicalSize <= file.bytes.count else {
            throw file.damaged("its top array says the file has \(logicalSize) bytes; it has \(file.bytes.count)")
        }
        let namesRef = try file.ref(top, 0, "the table names")
        let tablesRef = try file.ref(top, 1, "the tables")
        let names = try file.byteStrings(namesRef, isString: true, "the table names")
        let tops = try file.node(tablesRef, "the tables")
        guard tops.count == names.count else {
            throw file.damaged("it names \(names.count) tables and holds \(tops.count)")
        }
        for index in 0..<tops.count {
            // A deleted table's slot holds a number (the next tag), not a reference.
            guard case .ref(let tableRef) = file.refOrInt(tops, index), tableRef != 0 else { continue }
            let name = String(decoding: names[index] ?? [], as: UTF8.self)
            tables.append(try Self.table(file, ref: tableRef, index: index, name: name))
        }
    }

    private static func table(_ file: RealmFile, ref: Int, index: Int, name: String) throws -> Table {
        let label = "table '\(name)'"
        let top = try file.node(ref, label)
        guard top.hasRefs, top.count >= 3 else { throw file.damaged("\(label) at offset \(ref) is not a table") }
        let specRef = try file.ref(top, 0, "the columns of \(label)")
        let spec = try file.node(specRef, "the columns of \(label)")
        guard spec.count >= 6 else {
            throw file.damaged("the columns of \(label) at offset \(specRef) have \(spec.count) parts, not 6")
        }
        let types = try file.ints(try file.ref(spec, 0, "the column types of \(label)"), "the column types of \(label)")
        let namesRef = try file.ref(spec, 1, "the column names of \(label)")
        let names = namesRef == 0 ? [] : try file.byteStrings(namesRef, isString: true, "the column names of \(label)")
        let keysRef = try file.ref(spec, 5, "the column keys of \(label)")
        let keys = keysRef == 0 ? [] : try file.ints(keysRef, "the column keys of \(label)")
        guard names.count <= types.count, keys.count == types.count else {
            throw file.damaged("\(label) has \(types.count) column types, \(names.count) names and \(keys.count) keys")
        }
        let key = top.count > 3 ? Int(try file.tagged(top, 3, "the key of \(label)")) : index
        let clusterRoot = try file.ref(top, 2, "the objects of \(label)")
        let targets: [Int64]
        if top.count > 7, case let targetsRef = try file.ref(top, 7, "the link targets of \(label)"), targetsRef != 0 {
            targets = try file.ints(targetsRef, "the link targets of \(label)")
        } else {
            targets = []
        }
        var primaryKeyColumn: Int64?
        if top.count > 11, case .int(let pk) = file.refOrInt(top, 11), pk != 0 { primaryKeyColumn = pk }
        var kind = 0
        if top.count > 12, case .int(let flags) = file.refOrInt(top, 12) { kind = Int(flags & 3) }
        var columns: [Column] = []
        var primaryKey: Int?
        for position in 0..<names.count {
            let columnKey = keys[position]
            let leafIndex = Int(columnKey & 0xFFFF)
            // The type and attributes as the column key says (a file upgraded to format 24 may
            // keep an older type in the spec).
            let rawType = Int((columnKey >> 16) & 0x3F)
            let attributes = Int((columnKey >> 22) & 0xFF)
            let columnName = String(decoding: names[position] ?? [], as: UTF8.self)
            guard let type = ColumnType(rawValue: rawType) else {
                throw file.damaged("column '\(name).\(columnName)' has the unknown type \(rawType)")
            }
            var target: Int?
            if [.link, .linkList, .typedLink].contains(type) {
                guard leafIndex < targets.count else {
                    throw file.damaged("link column '\(name).\(columnName)' names no target table")
                }
                target = Int(targets[leafIndex])
            }
            if let primaryKeyColumn, primaryKeyColumn == columnKey { primaryKey = columns.count }
            let keyType = ColumnType(rawValue: Int(types[position] >> 16) & 0xFFFF) ?? .string
            columns.append(Column(name: columnName, type: type, leafIndex: leafIndex, isNullable: attributes & 16 != 0,
                                  isList: attributes & 32 != 0 || type == .linkList, isSet: attributes & 128 != 0,
                                  isDictionary: attributes & 64 != 0, target: target, key: columnKey,
                                  keyType: types[position] >> 16 == 0 ? .string : keyType))
        }
        return Table(name: name, key: key, columns: columns, primaryKey: primaryKey, kind: kind,
                     clusterRoot: clusterRoot)
    }

    // MARK: Objects

    /// Calls `body` with each cluster leaf of `table` and the key offset of its objects, in key
    /// order (see ``visitCluster(_:file:label:_:)``).
    func forEachLeaf(of table: Table, _ body: (RealmNode, [Int64]) throws -> Void) throws {
        guard table.clusterRoot != 0 else { return }
        try Self.visitCluster(table.clusterRoot, file: file, label: "the objects of table '\(table.name)'", body)
    }

    /// Calls `body` with each leaf of the cluster tree at `root` and the keys of its objects, in
    /// key order. A leaf's first element is its object count (compact keys 0..<n) or a reference
    /// to its keys; an inner node's are its children's key offsets (or none: compact), its depth,
    /// its object count, then its children.
    static func visitCluster(_ root: Int, file: RealmFile, label: String,
                             _ body: (RealmNode, [Int64]) throws -> Void) throws {
        try visit(root, offset: 0, file: file, label: label, depth: 0, body)
    }

    private static func visit(_ ref: Int, offset: Int64, file: RealmFile, label: String, depth: Int,
                              _ body: (RealmNode, [Int64]) throws -> Void) throws {
        guard depth < 24 else { throw file.damaged("\(label) nest deeper than a Realm file does") }
        let node = try file.node(ref, label)
        guard node.hasRefs, node.count >= 1 else { throw file.damaged("\(label): a node at offset \(ref) is empty") }
        if !node.isInner {
            var keys: [Int64]
            switch file.refOrInt(node, 0) {
            case .int(let count):
                guard count >= 0, count <= 1 << 20 else { throw file.damaged("\(label): a leaf holds \(count) objects") }
                keys = try (0..<count).map { try key(offset, $0, file: file, label: label) }
            case .ref(let keysRef):
                let keyNode = try file.node(keysRef, label)
                keys = try (0..<keyNode.count).map {
                    try key(offset, Int64(bitPattern: file.unsigned(keyNode, $0)), file: file, label: label)
                }
            }
            try body(node, keys)
            return
        }
        guard node.count >= 3 else { throw file.damaged("\(label): an inner node at offset \(ref) is cut short") }
        let treeDepth = try file.tagged(node, 1, "the depth of \(label)")
        let children = node.count - 3
        var offsets: [Int64]?
        if case .ref(let offsetsRef) = file.refOrInt(node, 0), offsetsRef != 0 {
            let offsetNode = try file.node(offsetsRef, label)
            guard offsetNode.count >= children else {
                throw file.damaged("\(label): an inner node at offset \(ref) has \(children) children and "
                    + "\(offsetNode.count) key offsets")
            }
            offsets = (0..<children).map { Int64(bitPattern: file.unsigned(offsetNode, $0)) }
        }
        guard treeDepth >= 0, treeDepth < 8 else { throw file.damaged("\(label) say their tree is \(treeDepth) deep") }
        for child in 0..<children {
            let childOffset = offsets?[child] ?? (Int64(child) << (treeDepth * 8))
            try visit(try file.ref(node, child + 3, label), offset: key(offset, childOffset, file: file, label: label),
                      file: file, label: label, depth: depth + 1, body)
        }
    }

    /// A key of a cluster (or the offset of a subtree's keys): `offset` plus `relative`, or the
    /// damage of a sum past 64 bits.
    static func key(_ offset: Int64, _ relative: Int64, file: RealmFile, label: String) throws -> Int64 {
        let (key, overflow) = offset.addingReportingOverflow(relative)
        guard !overflow else { throw file.damaged("\(label): a key offset \(offset) plus \(relative) is past 64 bits") }
        return key
    }
}
