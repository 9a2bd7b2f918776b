/// One version of an app's models, declared next to them (as SwiftData's `VersionedSchema`): a
/// namespace that holds the version's model types and the steps that lead to it from the version
/// before.
///
/// ```swift
/// enum NotesV1: ModelVersion {
///     static let version = 1
///     static let models: [any DataObject.Type] = [Note.self]
///     @StoredModel struct Note { var id: UUID; var title: String }
/// }
///
/// enum NotesV2: ModelVersion {
///     static let version = 2
///     static let models: [any DataObject.Type] = [Note.self]
///     static let upgradeSteps: [UpgradeStep] = [
///         .step(.addAttribute(entity: "Note", attribute: Attribute("stars", .int, default: 0))),
///     ]
///     @StoredModel struct Note { var id: UUID; var title: String; var stars: Int = 0 }   // the step's default
/// }
///
/// enum Notes: ModelVersionPlan {
///     static let versions: [any ModelVersion.Type] = [NotesV1.self, NotesV2.self]
/// }
///
/// let store = try SQLiteStore(path: "notes.sqlite", schema: Notes.schema(), upgrades: Notes.upgrades())
/// ```
public protocol ModelVersion: Sendable {
    /// The schema version these models are (from 1, increasing with each version).
    static var version: Int { get }
    /// The version's model types; each one's entity is in its schema.
    static var models: [any DataObject.Type] { get }
    /// The steps that bring a store of the version before to this one (none for the first
    /// version; none by default).
    static var upgradeSteps: [UpgradeStep] { get }
}

extension ModelVersion {
    public static var upgradeSteps: [UpgradeStep] { [] }

    /// The version's schema: its models' entities, at its version.
    public static func schema() throws -> Schema {
        try Schema(version: version, models: models)
    }
}

/// An app's model versions, oldest first (as SwiftData's `SchemaMigrationPlan`): the schema a
/// store opens with is the newest one's, and the upgrades are every version's steps.
public protocol ModelVersionPlan: Sendable {
    /// Every version, oldest first.
    static var versions: [any ModelVersion.Type] { get }
}

extension ModelVersionPlan {
    /// The newest version's schema, checked: the versions increase, and a version after the
    /// first declares the steps from the one before.
    /// - Throws: `invalidArgument` naming the version that breaks the order or has no steps,
    ///   and what the newest schema's validation throws.
    public static func schema() throws -> Schema {
        guard let newest = try checkedVersions().last else {
            throw StoreError(.invalidArgument, "the model version plan \(Self.self) lists no version")
        }
        return try newest.schema()
    }

    /// Every version's steps, for the store's `upgrades:`; `progress` is told how each step
    /// advances.
    public static func upgrades(progress: (@Sendable (SchemaUpgradeProgress) -> Void)? = nil) throws -> SchemaUpgrades {
        var upgrades = SchemaUpgrades(progress: progress)
        for version in try checkedVersions().dropFirst() {
            upgrades.version(version.version, version.upgradeSteps)
        }
        return upgrades
    }

    /// The versions, once checked: increasing by one from the first, and each after the first
    /// with steps of its own.
    private static func checkedVersions() throws -> [any ModelVersion.Type] {
        for (earlier, later) in zip(versions, versions.dropFirst()) {
            guard earlier.version < Int.max, later.version == earlier.version + 1 else {
                throw StoreError(.invalidArgument, "the model version plan \(Self.self) goes from version "
                    + "\(earlier.version) (\(earlier)) to \(later.version) (\(later)); each version follows the one "
                    + "before, oldest first")
            }
            guard !later.upgradeSteps.isEmpty else {
                throw StoreError(.invalidArgument, "\(later) (version \(later.version)) of the model version plan "
                    + "\(Self.self) declares no upgradeSteps from version \(earlier.version)")
            }
        }
        return versions
    }
}
