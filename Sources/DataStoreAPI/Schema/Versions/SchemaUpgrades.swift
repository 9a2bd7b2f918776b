

/// The steps an app declares to bring its stores from each older schema version to the next.
///
/// ```swift
/// var upgrades = SchemaUpgrades()
/// upgrades.version(2, .addAttribute(entity: "Pancake", attribute: Attribute("syrup", .bool, default: false)))
/// upgrades.version(3, [.step(.renameAttribute(entity: "Pancake", from: "syrup", to: "hasSyrup"))])
/// let store = try SQLiteStore(path: path, schema: schemaV3, upgrades: upgrades)
/// ```
public struct SchemaUpgrades: Sendable {
    /// The steps that lead to each version from the one before it.
    public private(set) var steps: [Int: [UpgradeStep]] = [:]
    /// Called during a migration with what it has done so far.
    public var progress: (@Sendable (SchemaUpgradeProgress) -> Void)?

    /// No steps yet; `progress` is told how each step advances while a migration runs.
    public init(progress: (@Sendable (SchemaUpgradeProgress) -> Void)? = nil) {
        self.progress = progress
    }

    /// A migration set from a declarative plan.
    public init(_ plan: SchemaPlan, progress: (@Sendable (SchemaUpgradeProgress) -> Void)? = nil) {
        self.progress = progress
        for version in plan.versions {
            self.version(version.version, version.steps.map { .step($0) })
        }
    }

    /// Declares the steps that lead to `version` from `version - 1` (added to any declared before).
    public mutating func version(_ version: Int, _ steps: [UpgradeStep]) {
        self.steps[version, default: []].append(contentsOf: steps)
    }

    /// Declares declarative steps that lead to `version` from `version - 1`.
    public mutating func version(_ version: Int, _ steps: SchemaStep...) {
        self.version(version, steps.map { .step($0) })
    }

    /// Whether any step is declared.
    public var isEmpty: Bool { steps.isEmpty }
}

/// A step of a migration: a declarative ``SchemaStep``, or a closure for what no declarative
/// step can express.
public enum UpgradeStep: Sendable, CustomStringConvertible {
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

/// What a running schema upgrade has done, passed to ``SchemaUpgrades/progress``.
public struct SchemaUpgradeProgress: Sendable, Hashable {
    /// The version being migrated to.
    public var version: Int
    /// The step being applied.
    public var step: String
    /// Items of the step's entity rewritten so far (0 for a step that visits no item).
    public var items: Int
    /// Items of the step's entity in all.
    public var totalItems: Int
}
