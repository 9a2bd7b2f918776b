// The names this module's public API had before the vocabulary settled ("migration" for moving
// data between stores, "upgrade" for schema versions): kept, deprecated, so that code written
// against them builds with a warning that names the new one.

@available(*, deprecated, renamed: "SchemaUpgrades")
public typealias SchemaMigrations = SchemaUpgrades

@available(*, deprecated, renamed: "UpgradeStep")
public typealias MigrationStep = UpgradeStep

@available(*, deprecated, renamed: "SchemaUpgradeProgress")
public typealias SchemaMigrationProgress = SchemaUpgradeProgress
