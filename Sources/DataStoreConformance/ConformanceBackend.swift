import DataStoreAPI
import Foundation

/// A backend under test: how to open a store at a location.
public struct ConformanceBackend: Sendable {
    /// The backend's name, used in messages.
    public let name: String
    /// Opens (creating when new) the store at `location`, a path inside a fresh temporary
    /// directory that the suite removes afterwards. With `schema == nil` it opens an existing
    /// store with the schema it holds. `upgrades` are the steps that bring a store holding an
    /// older schema version to `schema`; the backend passes them to its store's initializer.
    public let open: @Sendable (_ location: URL, _ schema: Schema?, _ upgrades: SchemaUpgrades) throws
        -> any DataStore

    /// A backend named `name` (in messages) whose stores `open` opens or creates.
    public init(name: String, open: @escaping @Sendable (_ location: URL, _ schema: Schema?,
                                                          _ upgrades: SchemaUpgrades) throws -> any DataStore) {
        self.name = name
        self.open = open
    }
}
