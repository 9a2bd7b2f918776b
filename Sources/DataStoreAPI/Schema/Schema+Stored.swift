import Foundation

extension Schema {
    /// Decides the schema of a store being opened, from the one it holds and the one asked for.
    ///
    /// - A new store takes the requested schema (validated); it must be given one.
    /// - An existing store opened without a schema uses the stored one (self-describing stores).
    /// - An existing store opened with a schema must hold exactly that schema.
    /// - Returns: the schema, and whether it must be written to the store.
    /// - Throws: `schemaMismatch` listing each difference, `newerSchemaVersion`; `notFound` when
    ///   neither exists. (Stores migrate through ``SchemaUpgrader``, which opens with `nil` first.)
    @_spi(Backend) public static func resolve(stored: Schema?, requested: Schema?, location: String)
        throws(StoreError) -> (schema: Schema, isNew: Bool)
    {
        let requested = try requested?.resolved()
        switch (stored, requested) {
        case (nil, nil):
            throw StoreError(.notFound, "\(location) holds no store and no schema was given to create one")
        case (nil, let requested?):
            try requested.validate()
            return (requested, true)
        case (let stored?, nil):
            return (stored, false)
        case (let stored?, let requested?):
            guard stored == requested else {
                if stored.version > requested.version {
                    throw StoreError(.newerSchemaVersion, "\(location) holds schema version \(stored.version), newer "
                        + "than the requested version \(requested.version)")
                }
                let differences = SchemaDifference.between(stored: stored, requested: requested)
                throw StoreError(.schemaMismatch, "\(location) holds a different schema (stored version "
                    + "\(stored.version), requested \(requested.version)): "
                    + (differences.isEmpty ? "the order of entities, attributes or indexes differs"
                        : SchemaDifference.list(differences)))
            }
            return (stored, false)
        }
    }

    /// The schema as stored by every backend: JSON with sorted keys.
    @_spi(Backend) public func encodedForStorage() throws(StoreError) -> [UInt8] {
        do {
            return Array(try JSONEncoder.sortingKeys().encode(self))
        } catch {
            throw StoreError(.invalidValue, "schema cannot be encoded: \(error)")
        }
    }

    /// Decodes a schema written by ``encodedForStorage()``.
    /// - Throws: `corrupt` naming `location`.
    @_spi(Backend) public static func decodeFromStorage(_ bytes: [UInt8], location: String) throws(StoreError) -> Schema {
        let schema: Schema
        do {
            schema = try JSONDecoder().decode(Schema.self, from: Data(bytes))
        } catch let error as DecodingError {
            let path: [any CodingKey]
            switch error {
            case .dataCorrupted(let context), .keyNotFound(_, let context), .typeMismatch(_, let context),
                 .valueNotFound(_, let context):
                path = context.codingPath
            @unknown default:
                path = []
            }
            let at = path.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            throw StoreError(.corrupt, "\(location): the stored schema is damaged: it is not the JSON of a schema"
                + (at.isEmpty ? "" : " (at \(at.hasPrefix(".") ? String(at.dropFirst()) : at))"))
        } catch {
            throw StoreError(.corrupt, "\(location): the stored schema cannot be read")
        }
        // What an app's schema must be, a stored one must be too: a primary key naming no
        // attribute or a name past a limit is damage, found before any SQL is built from it.
        do {
            try schema.validate()
        } catch {
            throw StoreError(.corrupt, "\(location): the stored schema is damaged: \(error.message)")
        }
        return schema
    }
}
