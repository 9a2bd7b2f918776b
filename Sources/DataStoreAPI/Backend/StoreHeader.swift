import Foundation

/// The header every store keeps in its metadata: the format version of the backend that wrote
/// it and the schema it holds, so that a store describes itself. One reader and one writer for
/// every backend; a backend supplies only its metadata lookup and its format number.
@_spi(Backend) public enum StoreHeader {
    /// The metadata key of the format version (decimal text).
    public static let formatKey = "datastore.format"
    /// The metadata key of the schema (its stored JSON).
    public static let schemaKey = "datastore.schema"

    /// Reads the header through `metadata`.
    /// - Returns: the format and schema, or `nil` for a store that has no header yet.
    /// - Throws: `incompatibleFormat` for a format newer than `supportedFormat`; `corrupt` when
    ///   half of the header is missing or it cannot be read; naming `location`.
    public static func read(
        location: String, supportedFormat: Int,
        _ metadata: (String) throws -> [UInt8]?
    ) throws -> (format: Int, schema: Schema)? {
        let formatBytes = try metadata(formatKey)
        let schemaBytes = try metadata(schemaKey)
        if formatBytes == nil && schemaBytes == nil { return nil }
        if !SealedEngine.physicalSchemas, try metadata(KeyEnvelope.key) != nil {
            throw StoreError(.wrongKey, "\(location) is encrypted: open it with its key (the key option of its "
                + "store type, or migrate-store's --key-file)")
        }
        guard let formatBytes, let format = Int(String(decoding: formatBytes, as: UTF8.self)) else {
            throw StoreError(.corrupt, "\(location): the store's format version is missing or unreadable")
        }
        guard format <= supportedFormat else {
            throw StoreError(
                .incompatibleFormat,
                "\(location) was written by format version \(format); this "
                    + "version reads up to \(supportedFormat)")
        }
        guard let schemaBytes else {
            throw StoreError(.corrupt, "\(location): the store's schema is missing")
        }
        return (format, try Schema.decodeFromStorage(schemaBytes, location: location))
    }

    /// Writes the header of a new store (or the new format of an upgraded one) through `write`.
    public static func write(_ schema: Schema, format: Int, _ write: (String, [UInt8]) throws -> Void) throws
    {
        try write(formatKey, Array(String(format).utf8))
        try write(schemaKey, schema.encodedForStorage())
    }
}
