/// One declarative change of a schema, from one version to the next.
///
/// Steps are `Codable`, so a plan can be stored, printed and applied from the command line
/// (`migrate-store upgrade STORE --plan plan.json`). Each step names what it changes; applying
/// it to a schema that does not have what it names fails with an error naming the step.
///
/// The primary key of an entity can be renamed (``renameAttribute(entity:from:to:)``) but not
/// removed, retyped or replaced by another attribute: a change of key is a new entity, filled
/// by a ``MigrationStep/custom(_:_:)`` step from the old one.
public enum SchemaStep: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Adds an empty entity.
    case addEntity(EntitySchema)
    /// Removes an entity and every item it holds.
    case removeEntity(String)
    /// Renames an entity; its items and indexes follow.
    case renameEntity(from: String, to: String)
    /// Adds an attribute: optional (existing items hold null, or the default when it has one)
    /// or required with a default (existing items take the default).
    case addAttribute(entity: String, attribute: Attribute)
    /// Removes an attribute and its values; indexes over it must be removed first.
    case removeAttribute(entity: String, name: String)
    /// Renames an attribute; values and indexes follow.
    case renameAttribute(entity: String, from: String, to: String)
    /// Changes an attribute's type with the conversion ``ValueConversion`` defines (and, when
    /// `optional` is given, whether it may be null). A value that does not convert fails the
    /// migration naming the item and the value.
    case changeType(entity: String, attribute: String, to: ValueType, optional: Bool? = nil)
    /// Adds an index, unique or not; existing duplicates under a new unique index fail the
    /// migration with `uniqueViolation` listing the conflicting items.
    case addIndex(entity: String, index: Index)
    /// Removes an index.
    case removeIndex(entity: String, name: String)
    /// Adds a relationship, and its inverse on the destination when given (a to-many always
    /// needs one). A required to-one needs `defaultTarget`, the key every existing item then
    /// refers to; a step that would leave a reference dangling fails naming it, and changes
    /// nothing.
    case addRelationship(entity: String, relationship: Relationship, inverse: Relationship? = nil,
                         defaultTarget: Value? = nil)
    /// Removes a relationship and its inverse, with what stores them (a to-one's attribute and
    /// index, a many-to-many's join entity and its pairs).
    case removeRelationship(entity: String, name: String)
    /// Changes a relationship's delete rule.
    case changeDeleteRule(entity: String, relationship: String, to: Relationship.DeleteRule)

    public var description: String {
        switch self {
        case .addEntity(let entity): return "add entity \(entity.name)"
        case .removeEntity(let name): return "remove entity \(name)"
        case let .renameEntity(from, to): return "rename entity \(from) to \(to)"
        case let .addAttribute(entity, attribute):
            let how = attribute.defaultValue.map { "default \($0)" } ?? (attribute.isOptional ? "optional" : "required")
            return "add attribute \(entity).\(attribute.name) (\(attribute.type), \(how))"
        case let .removeAttribute(entity, name): return "remove attribute \(entity).\(name)"
        case let .renameAttribute(entity, from, to): return "rename attribute \(entity).\(from) to \(to)"
        case let .changeType(entity, attribute, type, optional):
            let how = optional.map { $0 ? ", optional" : ", required" } ?? ""
            return "change type of \(entity).\(attribute) to \(type)\(how)"
        case let .addIndex(entity, index):
            return "add \(index.isUnique ? "unique " : "")index \(entity).\(index.name) on "
                + index.attributes.joined(separator: ", ")
        case let .removeIndex(entity, name): return "remove index \(entity).\(name)"
        case let .addRelationship(entity, relationship, inverse, _):
            return "add relationship \(entity).\(relationship.name) (\(relationship.cardinality) \(relationship.destination)"
                + (inverse.map { ", inverse \($0.name)" } ?? "") + ")"
        case let .removeRelationship(entity, name): return "remove relationship \(entity).\(name)"
        case let .changeDeleteRule(entity, relationship, rule):
            return "change delete rule of \(entity).\(relationship) to \(rule)"
        }
    }

    /// The entity the step changes (for ``renameEntity(from:to:)``, its old name).
    public var entityName: String {
        switch self {
        case .addEntity(let entity): return entity.name
        case .removeEntity(let name), .renameEntity(let name, _): return name
        case .addAttribute(let entity, _), .removeAttribute(let entity, _), .renameAttribute(let entity, _, _),
             .changeType(let entity, _, _, _), .addIndex(let entity, _), .removeIndex(let entity, _),
             .addRelationship(let entity, _, _, _), .removeRelationship(let entity, _), .changeDeleteRule(let entity, _, _):
            return entity
        }
    }
}

/// A step of a migration: a declarative ``SchemaStep``, or a closure for what no declarative
/// step can express.
public enum MigrationStep: Sendable, CustomStringConvertible {
    /// A declarative step.
    case step(SchemaStep)
    /// Calls `transform` with each item of `entity`, in key order, as it is before the step; the
    /// record it returns replaces the item (`nil` deletes it). With `to`, the entity takes that
    /// schema (same name and primary key), and the returned records must fit it. The primary
    /// key of an item may not change. `name` appears in the store's history.
    case transformItems(entity: String, to: EntitySchema?, name: String,
                        @Sendable (Record) throws -> Record?)
    /// Calls `body` with a write accessor over the schema as it is at this point of the
    /// migration, in the migration's transaction. `name` appears in the store's history.
    case custom(_ name: String, @Sendable (WriteAccessor) throws -> Void)

    public var description: String {
        switch self {
        case .step(let step): return step.description
        case let .transformItems(entity, _, name, _): return "transform items of \(entity): \(name)"
        case .custom(let name, _): return "custom: \(name)"
        }
    }
}

/// The steps an app declares to bring its stores from each older schema version to the next.
///
/// ```swift
/// var migrations = SchemaMigrations()
/// migrations.version(2, .addAttribute(entity: "Pancake", attribute: Attribute("syrup", .bool, default: false)))
/// migrations.version(3, [.step(.renameAttribute(entity: "Pancake", from: "syrup", to: "hasSyrup"))])
/// let store = try SQLiteStore(path: path, schema: schemaV3, migrations: migrations)
/// ```
public struct SchemaMigrations: Sendable {
    /// The steps that lead to each version from the one before it.
    public private(set) var steps: [Int: [MigrationStep]] = [:]
    /// Called during a migration with what it has done so far.
    public var progress: (@Sendable (SchemaMigrationProgress) -> Void)?

    /// No steps yet; `progress` is told how each step advances while a migration runs.
    public init(progress: (@Sendable (SchemaMigrationProgress) -> Void)? = nil) {
        self.progress = progress
    }

    /// A migration set from a declarative plan.
    public init(_ plan: SchemaPlan, progress: (@Sendable (SchemaMigrationProgress) -> Void)? = nil) {
        self.progress = progress
        for version in plan.versions {
            self.version(version.version, version.steps.map { .step($0) })
        }
    }

    /// Declares the steps that lead to `version` from `version - 1` (added to any declared before).
    public mutating func version(_ version: Int, _ steps: [MigrationStep]) {
        self.steps[version, default: []].append(contentsOf: steps)
    }

    /// Declares declarative steps that lead to `version` from `version - 1`.
    public mutating func version(_ version: Int, _ steps: SchemaStep...) {
        self.version(version, steps.map { .step($0) })
    }

    /// Whether any step is declared.
    public var isEmpty: Bool { steps.isEmpty }
}

/// A declarative migration plan: the steps of each version, as JSON for `migrate-store upgrade`.
public struct SchemaPlan: Sendable, Hashable, Codable {
    /// The steps that lead to one version from the one before it.
    /// The steps that take a store from the version before to `version`.
    public struct Version: Sendable, Hashable, Codable {
        /// The version the steps lead to.
        public var version: Int
        /// The steps, in order.
        public var steps: [SchemaStep]

        /// The steps to `version`.
        public init(_ version: Int, _ steps: [SchemaStep]) {
            self.version = version
            self.steps = steps
        }
    }

    /// The versions, in any order; each is applied after the one before it.
    /// The versions, each with its steps.
    public var versions: [Version]

    /// A plan of `versions`.
    public init(_ versions: [Version]) {
        self.versions = versions
    }

    /// The highest version the plan reaches.
    public var targetVersion: Int? { versions.map(\.version).max() }
}

/// What a running schema migration has done, passed to ``SchemaMigrations/progress``.
public struct SchemaMigrationProgress: Sendable, Hashable {
    /// The version being migrated to.
    public var version: Int
    /// The step being applied.
    public var step: String
    /// Items of the step's entity rewritten so far (0 for a step that visits no item).
    public var items: Int
    /// Items of the step's entity in all.
    public var totalItems: Int
}

/// One migration the store went through, kept in the store (``Store/schemaHistory()``).
public struct SchemaHistoryEntry: Sendable, Hashable, Codable {
    /// The version the store had before.
    public var fromVersion: Int
    /// The version it reached.
    public var toVersion: Int
    /// Each step applied, as ``MigrationStep/description`` words it.
    public var steps: [String]
    /// When the migration committed.
    public var date: Timestamp
}
