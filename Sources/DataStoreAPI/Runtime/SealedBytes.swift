internal import CChecksum

/// Bytes the package keeps in a store with the CRC-32C of them after them (four bytes,
/// little-endian): a change feed's entries, the reserved records. A byte that changed after they
/// were written is then damage, where it could have been read as another valid value.
enum SealedBytes {
    /// Appends the CRC-32C of `bytes` to them.
    static func seal(_ bytes: inout [UInt8]) {
        let sum = bytes.withUnsafeBytes { ds_crc32c(0, $0.baseAddress, $0.count) }
        withUnsafeBytes(of: sum.littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// What ``seal(_:)`` sealed, without its checksum.
    /// - Throws: `corrupt` naming `what` when the checksum does not match.
    static func unsealed(_ sealed: [UInt8], what: String) throws -> [UInt8] {
        try check(sealed, what: what)
        return Array(sealed.dropLast(4))
    }

    /// Checks, where they are, that `sealed` are bytes ``seal(_:)`` sealed (a reader that reads
    /// them in place, without the copy ``unsealed(_:what:)`` makes).
    /// - Throws: `corrupt` naming `what` when the checksum does not match.
    static func check(_ sealed: [UInt8], what: String) throws {
        guard isIntact(sealed) else {
            throw StoreError(.corrupt, "\(what) is damaged: its checksum does not match its bytes (they changed after "
                + "it was written)")
        }
    }

    /// What ``seal(_:)`` sealed, without its checksum; `nil` when the checksum does not match.
    static func unsealed(_ sealed: [UInt8]) -> [UInt8]? {
        isIntact(sealed) ? Array(sealed.dropLast(4)) : nil
    }

    /// Whether the checksum of `sealed` matches their bytes before it.
    private static func isIntact(_ sealed: [UInt8]) -> Bool {
        guard sealed.count > 4 else { return false }
        return sealed.withUnsafeBytes { raw in
            let end = raw.count - 4
            let stored = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: end, as: UInt32.self))
            return ds_crc32c(0, raw.baseAddress, end) == stored
        }
    }
}
