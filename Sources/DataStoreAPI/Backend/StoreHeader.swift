internal import CChecksum
import Foundation

/// The header every store keeps in its metadata: the format version of the backend that wrote
/// it and the schema it holds, so that a store describes itself. One reader and one writer for
/// every backend; a backend supplies only its metadata lookup and its format number.
///
/// The schema record ends with a NUL byte and a CRC-32C (four bytes, little-endian) of the
/// format's text, a NUL byte, the schema's JSON and the NUL byte: a changed byte in either is
/// damage, where it could have been read as another schema or an older format to upgrade from.
/// A schema record of JSON alone (no NUL byte, which JSON never holds) is one that a version
/// before header checksums wrote: it is read as it is in a store of a format before the
/// backend's first with checksums (`sealedSince`), whose format step writes it again with its
/// sum, and is damage in any later one (a sum cut off the record).
@_spi(Backend) public enum StoreHeader {
    /// The metadata key of the format version (decimal text).
    public static let formatKey = "datastore.format"
    /// The metadata key of the schema (its stored JSON and checksum).
    public static let schemaKey = "datastore.schema"

    /// Reads the header through `metadata`.
    /// - Returns: the format and schema, or `nil` for a store that has no header yet.
    /// - Throws: `incompatibleFormat` for a format newer than `supportedFormat`; `corrupt` when
    ///   half of the header is missing, it cannot be read, or its checksum does not match or is
    ///   missing from a store of format `sealedSince` or later; naming `location`.
    public static func read(
        location: String, supportedFormat: Int, sealedSince: Int,
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
        guard let schemaBytes else {
            throw StoreError(.corrupt, "\(location): the store's schema is missing")
        }
        let sealed = schemaBytes.count >= 5 && schemaBytes[schemaBytes.count - 5] == 0
        let sumMatches = !sealed || schemaBytes[(schemaBytes.count - 4)...].withUnsafeBytes {
            sum(formatBytes, schemaBytes[..<(schemaBytes.count - 4)]) == UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self))
        }
        let damaged = StoreError(.corrupt, "\(location): the store's header is damaged: the checksum of its format "
            + "version (\(format)) and schema does not match them")
        guard format <= supportedFormat else {
            // A digit damaged into a higher one is damage, not a newer version.
            guard sumMatches else { throw damaged }
            throw StoreError(
                .incompatibleFormat,
                "\(location) was written by format version \(format); this "
                    + "version reads up to \(supportedFormat)")
        }
        // The JSON before the sum, so that a record that is not a schema's says what it is
        // not; then the sum, which finds what still decodes.
        let schema = try Schema.decodeFromStorage(sealed ? Array(schemaBytes[..<(schemaBytes.count - 5)]) : schemaBytes,
                                                  location: location)
        guard sumMatches else { throw damaged }
        guard sealed || format < sealedSince else {
            throw StoreError(.corrupt, "\(location): the store's header is damaged: its schema has no checksum, which "
                + "format \(format) writes")
        }
        return (format, schema)
    }

    /// Writes the header of a new store (or the new format of an upgraded one) through `write`.
    public static func write(_ schema: Schema, format: Int, _ write: (String, [UInt8]) throws -> Void) throws
    {
        let formatBytes = Array(String(format).utf8)
        var schemaBytes = try schema.encodedForStorage()
        schemaBytes.append(0)
        withUnsafeBytes(of: sum(formatBytes, schemaBytes[...]).littleEndian) { schemaBytes.append(contentsOf: $0) }
        try write(formatKey, formatBytes)
        try write(schemaKey, schemaBytes)
    }

    /// The CRC-32C of the format's text, a NUL byte, and the schema record up to its sum.
    private static func sum(_ format: [UInt8], _ schema: ArraySlice<UInt8>) -> UInt32 {
        var crc = format.withUnsafeBytes { ds_crc32c(0, $0.baseAddress, $0.count) }
        crc = withUnsafeBytes(of: UInt8(0)) { ds_crc32c(crc, $0.baseAddress, 1) }
        return schema.withUnsafeBytes { ds_crc32c(crc, $0.baseAddress, $0.count) }
    }
}
