import Foundation

extension Schema {
    /// Decides the schema of a store being opened, from the one it holds and the one asked for.
    ///
    /// - A new store takes the requested schema (validated); it must be given one.
    /// - An existing store opened without a schema uses the stored one (self-describing stores).
    /// - An existing store opened with a schema must hold exactly that schema.
    /// - Returns: the schema, and whether it must be written to the store.
    /// - Throws: `schemaMismatch` naming the first difference; `notFound` when neither exists.
    @_spi(Backend) public static func resolve(stored: Schema?, requested: Schema?, location: String)
        throws(StoreError) -> (schema: Schema, isNew: Bool)
    {
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
                throw StoreError(.schemaMismatch, "\(location) holds a different schema: "
                    + stored.firstDifference(from: requested))
            }
            return (stored, false)
        }
    }

    func firstDifference(from other: Schema) -> String {
        if version != other.version {
            return "stored version \(version), requested version \(other.version)"
        }
        let mine = Set(entities.map(\.name))
        let theirs = Set(other.entities.map(\.name))
        if let missing = theirs.subtracting(mine).sorted().first {
            return "entity '\(missing)' is not in the stored schema"
        }
        if let extra = mine.subtracting(theirs).sorted().first {
            return "stored entity '\(extra)' is not in the requested schema"
        }
        for entity in entities {
            if let requested = other.entity(named: entity.name), requested != entity {
                return "entity '\(entity.name)' differs (attributes, primary key or indexes)"
            }
        }
        return "entity order differs"
    }

    /// The schema as stored by every backend: JSON with sorted keys.
    @_spi(Backend) public func encodedForStorage() throws(StoreError) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            return Array(try encoder.encode(self))
        } catch {
            throw StoreError(.invalidValue, "schema cannot be encoded: \(error)")
        }
    }

    /// Decodes a schema written by ``encodedForStorage()``.
    /// - Throws: `corrupt` naming `location`.
    @_spi(Backend) public static func decodeFromStorage(_ bytes: [UInt8], location: String) throws(StoreError) -> Schema {
        do {
            return try JSONDecoder().decode(Schema.self, from: Data(bytes))
        } catch {
            throw StoreError(.corrupt, "\(location): stored schema cannot be read: \(error)")
        }
    }
}
