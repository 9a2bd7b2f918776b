import Foundation

/// A record this package keeps in a store's reserved metadata, as JSON sealed with its CRC-32C:
/// a migration's checkpoint, a follow's position, a switch's record, the start of a switch's
/// copy, an import's checkpoint. Each is read
/// and written one way, and a damaged one is refused as damage, naming the store and the record;
/// it is never read as absent nor computed again, since what it says (where a copy or a follow
/// stands) cannot be known otherwise: a follow started from "now" would skip the changes made
/// to pages already copied.
package struct ReservedRecord<Content: Codable> {
    /// The metadata key.
    package let key: String
    /// What the record is, for messages ("migration checkpoint").
    package let what: String

    package init(key: String, what: String) {
        self.key = key
        self.what = what
    }

    /// The record in `store`, or nil when it has none.
    /// - Throws: `corrupt` naming `storeName` and the record when its bytes are not one.
    /// `storeName` is the store's location, which the message's command names; `nil` when it is
    /// not known (the message then names no command).
    package func read(from store: any DataStore, named storeName: String?) throws -> Content? {
        guard let bytes = try store.read({ try $0.metadata(forKey: key) }) else { return nil }
        return try decode(bytes, storeName: storeName)
    }

    /// The record in a store read through `reader`, or nil when it has none.
    package func read(in reader: ReadAccessor, named storeName: String?) throws -> Content? {
        guard let bytes = try reader.metadata(forKey: key) else { return nil }
        return try decode(bytes, storeName: storeName)
    }

    /// Decodes a record: its JSON, then a NUL byte and the CRC-32C of both (``SealedBytes``); or
    /// the JSON alone, as a version before checksums wrote it (JSON holds no NUL byte).
    private func decode(_ bytes: [UInt8], storeName: String?) throws -> Content {
        var json = bytes
        if bytes.count >= 5 && bytes[bytes.count - 5] == 0 {
            guard let unsealed = SealedBytes.unsealed(bytes) else { throw damaged(storeName) }
            json = Array(unsealed.dropLast())
        }
        do {
            return try JSONDecoder().decode(Content.self, from: Data(json))
        } catch {
            throw damaged(storeName)
        }
    }

    private func damaged(_ storeName: String?) -> StoreError {
        StoreError(.corrupt, "\(storeName ?? "the store"): its \(what) (reserved record '\(key)') is damaged, "
            + "so where the operation stands is unknown; nothing was done"
            + (storeName.map { " (check the store with: " + ShellCommand.migrateStore("check", $0) + ")" } ?? ""))
    }

    /// Writes the record in the writer's transaction (nil removes it), sealed.
    package func write(_ content: Content?, into writer: WriteAccessor) throws {
        try writer.setReservedMetadata(try content.map { content in
            var bytes = Array(try JSONEncoder.sortingKeys().encode(content)) + [0]
            SealedBytes.seal(&bytes)
            return bytes
        }, forKey: key)
    }
}
