import Foundation

/// An encrypted store written as one stream, a JSON Lines file: its header holds the key record
/// and the sealed schema (``metadata``), and each item is sealed as ``SealedEngine`` keeps it
/// (``SealedEntity``), so that the finished file opens as an encrypted store, through
/// ``SealedEngine`` over the file's reader, with the same key.
@_spi(Backend) public struct SealedStream {
    /// The schema the stream's lines are written in: each entity as ``SealedEntity`` keeps it.
    public let physicalSchema: Schema
    /// What the stream's header holds besides the schema: the key record and the sealed schema,
    /// by metadata key.
    public let metadata: [String: [UInt8]]
    private let cipher: StoreCipher
    private let entities: [String: SealedEntity]

    private init(schema: Schema, metadata: [String: [UInt8]], dataKey: [UInt8], storeID: [UInt8]) {
        physicalSchema = schema.sealedPhysical()
        self.metadata = metadata
        cipher = StoreCipher(key: dataKey)
        entities = Dictionary(uniqueKeysWithValues: schema.entities.map { ($0.name, SealedEntity($0, storeID: storeID)) })
    }

    /// A new encrypted stream of `schema` under `key`: a new data key and identity.
    public static func create(_ schema: Schema, key: StoreKey) throws -> SealedStream {
        let schema = try schema.resolved()
        let (envelope, dataKey) = try KeyEnvelope.create(for: key)
        let cipher = StoreCipher(key: dataKey)
        let sealedSchema = try cipher.seal(schema.encodedForStorage(),
                                           aad: SealedEngine.metadataAAD(envelope.storeID, SealedEngine.schemaKey))
        return SealedStream(schema: schema, metadata: [KeyEnvelope.key: envelope.encoded, SealedEngine.schemaKey: sealedSchema],
                            dataKey: dataKey, storeID: envelope.storeID)
    }

    /// The stream whose header holds `metadata`, to go on writing `schema` into it with `key`.
    /// - Throws: `wrongKey` when `key` does not open it; `corrupt` when its key record is damaged;
    ///   `invalidArgument` when it is not encrypted.
    public static func resume(_ metadata: [String: [UInt8]], schema: Schema, key: StoreKey, location: String) throws
        -> SealedStream
    {
        guard let envelopeBytes = metadata[KeyEnvelope.key] else {
            throw StoreError(.invalidArgument, "\(location) is not encrypted: go on with it without a key")
        }
        let envelope = try KeyEnvelope.decode(envelopeBytes, location: location)
        let dataKey = try envelope.dataKey(with: key, location: location)
        return SealedStream(schema: try schema.resolved(), metadata: metadata, dataKey: dataKey, storeID: envelope.storeID)
    }

    /// The metadata keys a stream's header holds: the key record's and the sealed schema's.
    public static let metadataKeys = [KeyEnvelope.key, SealedEngine.schemaKey].sorted()

    /// Whether a stream's header `metadata` is an encrypted store's.
    public static func isEncrypted(_ metadata: [String: [UInt8]]) -> Bool { metadata[KeyEnvelope.key] != nil }

    /// `record`, an item of `entity`, as the stream's line holds it, with the entity that line is
    /// written as.
    public func seal(_ record: Record, of entity: EntitySchema) throws -> (record: Record, entity: EntitySchema) {
        guard let sealed = entities[entity.name] else {
            throw StoreError(.invalidArgument, "entity \(entity.name) is not in the encrypted stream's schema")
        }
        return (try sealed.seal(record, key: try PrimaryKey(record[entity.primaryKey]), cipher: cipher), sealed.physical)
    }
}
