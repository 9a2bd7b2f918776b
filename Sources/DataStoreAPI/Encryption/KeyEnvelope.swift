internal import CChecksum
import Foundation

/// The record an encrypted store keeps in its metadata (``key``, in the clear): how its data key
/// is wrapped, and the data key wrapped.
///
/// Its bytes, little-endian:
///
/// | bytes | what |
/// | --- | --- |
/// | 4 | `DSEK` |
/// | 1 | version (1) |
/// | 1 | how the wrapping key is made: 0 the user's raw key, 1 scrypt of a passphrase |
/// | 1, 4, 4 | scrypt's log2 N, r, p (zero for a raw key) |
/// | 16 | scrypt's salt (zero for a raw key) |
/// | 16 | the store's identity, random (bound into every sealed value's associated data) |
/// | 61 | the data key sealed by ``StoreCipher`` under the wrapping key, with every byte above as associated data |
/// | 4 | CRC-32C of every byte above |
///
/// The checksum tells damage (`corrupt`) from a key that does not open the store (`wrongKey`):
/// a record whose checksum matches but whose data key does not open was sealed under another key.
struct KeyEnvelope {
    static let key = "datastore.encryption"
    static let magic: [UInt8] = Array("DSEK".utf8)
    static let version: UInt8 = 1
    static let headerSize = 4 + 1 + 1 + 1 + 4 + 4 + 16 + 16
    static let size = headerSize + StoreCipher.keySize + StoreCipher.overhead + 4

    enum Derivation: UInt8 { case rawKey = 0, scrypt = 1 }

    let derivation: Derivation
    let logN: UInt8
    let r: UInt32
    let p: UInt32
    let salt: [UInt8]
    let storeID: [UInt8]
    let wrapped: [UInt8]

    /// A new envelope for a new store: a random identity and data key, wrapped by `userKey`.
    /// - Returns: the envelope and the data key.
    static func create(for userKey: StoreKey) throws -> (KeyEnvelope, dataKey: [UInt8]) {
        let dataKey = try StoreCipher.randomBytes(StoreCipher.keySize)
        let storeID = try StoreCipher.randomBytes(16)
        let envelope: KeyEnvelope
        switch userKey.secret {
        case .raw:
            envelope = KeyEnvelope(derivation: .rawKey, logN: 0, r: 0, p: 0, salt: [UInt8](repeating: 0, count: 16),
                                   storeID: storeID, wrapped: [])
        case .passphrase:
            envelope = KeyEnvelope(derivation: .scrypt, logN: userKey.passphraseCost, r: 8, p: 1,
                                   salt: try StoreCipher.randomBytes(16), storeID: storeID, wrapped: [])
        }
        let wrapping = try envelope.wrappingKey(userKey)
        let wrapped = try StoreCipher(key: wrapping).seal(dataKey, aad: envelope.header)
        return (KeyEnvelope(derivation: envelope.derivation, logN: envelope.logN, r: envelope.r, p: envelope.p,
                            salt: envelope.salt, storeID: storeID, wrapped: wrapped), dataKey)
    }

    /// The bytes before the wrapped key: the associated data of the wrapping.
    var header: [UInt8] {
        var bytes = Self.magic
        bytes.append(Self.version)
        bytes.append(derivation.rawValue)
        bytes.append(logN)
        withUnsafeBytes(of: r.littleEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: p.littleEndian) { bytes.append(contentsOf: $0) }
        bytes += salt
        bytes += storeID
        return bytes
    }

    var encoded: [UInt8] {
        var bytes = header + wrapped
        let sum = bytes.withUnsafeBytes { ds_crc32c(0, $0.baseAddress, $0.count) }
        withUnsafeBytes(of: sum.littleEndian) { bytes.append(contentsOf: $0) }
        return bytes
    }

    /// The key that wraps the data key, from the user's key.
    private func wrappingKey(_ userKey: StoreKey) throws -> [UInt8] {
        switch (derivation, userKey.secret) {
        case (.rawKey, .raw(let key)): return key
        case (.scrypt, .passphrase(let passphrase)):
            return try StoreCipher.scrypt(passphrase, salt: salt, logN: logN, r: r, p: p)
        case (.rawKey, .passphrase), (.scrypt, .raw):
            throw StoreError(.wrongKey, "")
        }
    }

    /// Reads an envelope. - Throws: `corrupt` naming `location` when it is damaged,
    /// `incompatibleFormat` for a newer version.
    static func decode(_ bytes: [UInt8], location: String) throws -> KeyEnvelope {
        let damaged = StoreError(.corrupt, "\(location): the record of the store's encryption key "
            + "(\(key)) is damaged, so its data cannot be decrypted")
        guard bytes.count >= 5, Array(bytes[0..<4]) == magic, bytes[4] >= 1 else { throw damaged }
        guard bytes[4] <= version else {
            throw StoreError(.incompatibleFormat, "\(location) is encrypted in version \(bytes[4]) of the key record; "
                + "this version reads up to \(version)")
        }
        guard bytes.count == size else { throw damaged }
        let sum = bytes.withUnsafeBytes { ds_crc32c(0, $0.baseAddress, size - 4) }
        let stored = bytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: size - 4, as: UInt32.self)) }
        guard sum == stored, let derivation = Derivation(rawValue: bytes[5]) else { throw damaged }
        let r = bytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 7, as: UInt32.self)) }
        let p = bytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 11, as: UInt32.self)) }
        let logN = bytes[6]
        // Only the parameters this version writes: an edited record cannot make scrypt ask for
        // gigabytes before it fails.
        if derivation == .scrypt {
            guard (10...20).contains(logN), r == 8, p == 1 else { throw damaged }
        }
        return KeyEnvelope(derivation: derivation, logN: logN, r: r, p: p, salt: Array(bytes[15..<31]),
                           storeID: Array(bytes[31..<47]), wrapped: Array(bytes[headerSize..<(size - 4)]))
    }

    /// The data key, unwrapped by `userKey`.
    /// - Throws: `wrongKey` naming `location` when the key does not open it.
    func dataKey(with userKey: StoreKey, location: String) throws -> [UInt8] {
        let wrongKey = StoreError(.wrongKey, "\(location): the key does not open this store (it was encrypted with "
            + (derivation == .rawKey ? "a raw key" : "a passphrase") + ", and this "
            + (userKey.isPassphrase ? "passphrase" : "raw key") + " does not open it)")
        let wrapping: [UInt8]
        do {
            wrapping = try wrappingKey(userKey)
        } catch let error as StoreError where error.code == .wrongKey {
            throw wrongKey
        }
        guard let dataKey = try StoreCipher(key: wrapping).open(wrapped, aad: header), dataKey.count == StoreCipher.keySize
        else { throw wrongKey }
        return dataKey
    }
}

extension StoreKey {
    var isPassphrase: Bool {
        if case .passphrase = secret { return true }
        return false
    }
}
