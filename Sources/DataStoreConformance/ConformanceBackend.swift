import DataStoreAPI
import Foundation

/// A backend under test: how to open a store at a location.
public struct ConformanceBackend: Sendable {
    /// The backend's name, used in messages.
    public let name: String
    /// Opens (creating when new) the store at `location`, a path inside a fresh temporary
    /// directory that the suite removes afterwards. With `schema == nil` it opens an existing
    /// store with the schema it holds.
    public let open: @Sendable (_ location: URL, _ schema: Schema?) throws -> any DataStore

    public init(name: String, open: @escaping @Sendable (_ location: URL, _ schema: Schema?) throws -> any DataStore) {
        self.name = name
        self.open = open
    }
}
