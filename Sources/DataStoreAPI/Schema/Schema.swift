
/// The schema of a store: a version number and its entities. Every store keeps its schema,
/// so a store describes itself and can be copied without the app's code.
public struct Schema: Sendable, Hashable, Codable {
    /// The app's version number of the schema; a store holds exactly one.
    public var version: Int
    /// The entities, in order.
    public var entities: [EntitySchema]

    /// A schema of `entities`.
    public init(version: Int = 1, entities: [EntitySchema]) {
        self.version = version
        self.entities = entities
    }

    /// The entity of that name (byte for byte), if any.
    public func entity(named name: String) -> EntitySchema? {
        entities.first { Self.isName($0.name, name) }
    }

    /// Whether `asked` is the schema's name `name` byte for byte: the one comparison of names of
    /// the package (entities, attributes, relationships, a record's fields). Swift's `==` takes
    /// canonically equivalent strings for one (`K` and KELVIN SIGN `\u{212A}`); a schema's names
    /// are ASCII (``checkName(_:what:)``), and a string equivalent to an ASCII one but not the
    /// same is longer, so equal byte counts make `==` exact, at the cost of comparing two counts.
    @inlinable @inline(__always) static func isName(_ name: String, _ asked: String) -> Bool {
        name.utf8.count == asked.utf8.count && name == asked
    }

    /// Checks names, types, primary keys, defaults and indexes against the ``Limits``.
    /// - Throws: ``StoreError`` naming the first problem found.
    public func validate() throws(StoreError) {
        let entities = try resolved().entities
        guard entities.count <= Limits.maxEntities else {
            throw StoreError(.limitExceeded, "schema has \(entities.count) entities; at most "
                + "\(Limits.maxEntities) are allowed")
        }
        var seen: [String: String] = [:]
        for entity in entities {
            try Schema.checkName(entity.name, what: "entity")
            try Schema.checkUnique(entity.name, in: &seen, what: "entity")
            try entity.validate()
        }
    }

    @_spi(Backend) public static func checkName(_ name: String, what: String) throws(StoreError) {
        // The sealed values of an encrypted store's items, in the schema its engine holds.
        if name == SealedEntity.column, SealedEngine.physicalSchemas { return }
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= Limits.maxNameLength else {
            throw StoreError(.limitExceeded, "\(what) name '\(name)' must be 1 to \(Limits.maxNameLength) "
                + "characters long")
        }
        let valid = bytes.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x5F
        }
        guard valid, !(bytes[0] >= 0x30 && bytes[0] <= 0x39) else {
            throw StoreError(.invalidArgument, "\(what) name '\(name)' may hold only ASCII letters, digits "
                + "and '_', and may not start with a digit")
        }
        let folded = foldedName(name)
        for reserved in ["_ds", "sqlite_"] where folded.hasPrefix(reserved) {
            throw StoreError(.invalidArgument, "\(what) name '\(name)' starts with '\(reserved)' (in any letter "
                + "case), which is reserved")
        }
    }

    /// A name with ASCII letters in lower case: names that fold to the same string are the same
    /// name (SQLite's identifiers ignore case).
    static func foldedName(_ name: String) -> String {
        String(decoding: name.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }, as: UTF8.self)
    }

    /// Records `name` in `seen` (by its folded form); throws when a name that differs at most by
    /// letter case is already there.
    static func checkUnique(_ name: String, in seen: inout [String: String], what: String,
                            owner: String? = nil) throws(StoreError) {
        let qualified = owner.map { "\($0).\(name)" } ?? name
        if let earlier = seen.updateValue(name, forKey: foldedName(name)) {
            let detail = earlier == name ? "is declared twice"
                : "differs from '\(owner.map { "\($0)." } ?? "")\(earlier)' only by letter case"
            throw StoreError(.invalidArgument, "\(what) '\(qualified)' \(detail)")
        }
    }
}

extension EntitySchema {
    func validate() throws(StoreError) {
        guard attributes.count <= Limits.maxAttributes else {
            throw StoreError(.limitExceeded, "entity '\(name)' has \(attributes.count) attributes; at most "
                + "\(Limits.maxAttributes) are allowed")
        }
        var seen: [String: String] = [:]
        for attribute in attributes {
            try Schema.checkName(attribute.name, what: "attribute")
            try Schema.checkUnique(attribute.name, in: &seen, what: "attribute", owner: name)
            if let value = attribute.defaultValue, !value.isNull {
                _ = try checkValue(value, for: attribute)
            } else if attribute.defaultValue != nil, !attribute.isOptional {
                throw StoreError(.invalidValue, "attribute '\(name).\(attribute.name)' is required but its "
                    + "default is null")
            }
        }
        guard let key = attribute(named: primaryKey) else {
            throw StoreError(.unknownAttribute, "entity '\(name)' names primary key '\(primaryKey)', "
                + "which is not one of its attributes")
        }
        guard key.type.canBePrimaryKey, !key.isOptional else {
            throw StoreError(.invalidArgument, "primary key '\(name).\(primaryKey)' must be a non-optional "
                + "int, string or uuid, not \(key.isOptional ? "optional " : "")\(key.type)")
        }
        guard indexes.count <= Limits.maxIndexesPerEntity else {
            throw StoreError(.limitExceeded, "entity '\(name)' has \(indexes.count) indexes; at most "
                + "\(Limits.maxIndexesPerEntity) are allowed")
        }
        var indexNames: [String: String] = [:]
        for index in indexes {
            try Schema.checkName(index.name, what: "index")
            try Schema.checkUnique(index.name, in: &indexNames, what: "index", owner: name)
            guard !index.attributes.isEmpty, index.attributes.count <= Limits.maxAttributesPerIndex else {
                throw StoreError(.limitExceeded, "index '\(name).\(index.name)' must cover 1 to "
                    + "\(Limits.maxAttributesPerIndex) attributes")
            }
            for attributeName in index.attributes where attribute(named: attributeName) == nil {
                throw StoreError(.unknownAttribute, "index '\(name).\(index.name)' names unknown attribute "
                    + "'\(attributeName)'")
            }
        }
    }
}
