import COpenSSL
@_spi(Backend) import DataStoreAPI
import Foundation

/// The encrypted form of a Realm file, read with its 64-byte key (the first 32 bytes the AES-256
/// key, the last 32 the HMAC key), through the system's OpenSSL.
///
/// The file is pages of 4,096 bytes in groups: one page of 64 entries of 64 bytes (per data page:
/// an IV counter and an HMAC-SHA224 of its ciphertext, then the previous counter and HMAC, kept
/// for a write that was cut between the two), followed by up to 64 data pages, each encrypted
/// with AES-256-CBC without padding, its IV the counter (4 bytes, little-endian) and the page's
/// position in the plain file (8 bytes, little-endian). There is nothing in the clear, not even
/// a header: a file is told from damage only by its HMACs.
///
/// - A wrong key is told from damage by the HMACs: with a wrong key no page matches; with the
///   right key and damage, the pages that match show that the key is right.
/// - A page whose counter is 0 was never written (its plain bytes are zeros).
struct RealmCipher {
    static let pageSize = 4096
    static let pagesPerGroup = 64
    static let keyBytes = 64

    private let aesKey: [UInt8]
    private let macKey: [UInt8]

    /// - Throws: `invalidArgument` for a key that is not 64 bytes.
    init(key: [UInt8]) throws {
        guard key.count == Self.keyBytes else {
            throw StoreError(.invalidArgument, "a Realm encryption key is 64 bytes; this one has \(key.count)")
        }
        aesKey = Array(key[0..<32])
        macKey = Array(key[32..<64])
    }

    /// Reads a key file: 64 bytes as they are, or 128 hexadecimal digits (as Realm Studio shows
    /// a key), with or without a final newline. The key is never printed.
    /// - Throws: `notFound` for a missing file; `invalidArgument` naming the file and what it
    ///   holds instead of a key.
    static func key(fromFile path: String) throws -> [UInt8] {
        guard FileManager.default.fileExists(atPath: path) else {
            throw StoreError(.notFound, "the key file \(path) does not exist")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw StoreError(.io, "the key file \(path) cannot be read")
        }
        let bytes = [UInt8](data)
        if bytes.count == keyBytes { return bytes }
        var text = bytes[...]
        while let last = text.last, last == 0x0A || last == 0x0D || last == 0x20 { text = text.dropLast() }
        if text.count == 2 * keyBytes, let key = hexBytes(text) { return key }
        throw StoreError(.invalidArgument, "the key file \(path) holds \(bytes.count) bytes: a Realm key file holds "
            + "the 64 bytes of the key, or 128 hexadecimal digits")
    }

    private static func hexBytes(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        func digit(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: c - 0x30
            case 0x41...0x46: c - 0x41 + 10
            case 0x61...0x66: c - 0x61 + 10
            default: nil
            }
        }
        var key: [UInt8] = []
        key.reserveCapacity(text.count / 2)
        var i = text.startIndex
        while i < text.endIndex {
            guard let high = digit(text[i]), let low = digit(text[i + 1]) else { return nil }
            key.append(high << 4 | low)
            i += 2
        }
        return key
    }

    /// Whether `bytes` could be an encrypted Realm file: whole pages, at least one group's
    /// table and one data page, and no Realm header in the clear.
    static func looksEncrypted(_ bytes: [UInt8]) -> Bool {
        bytes.count >= 2 * pageSize && bytes.count % pageSize == 0
            && !RealmFile.hasHeader(bytes)
    }

    /// The plain bytes of the encrypted file `file`.
    /// - Throws: `wrongKey` when no page's HMAC matches the key; `corrupt` naming the first page
    ///   that does not match (or a file that is not whole pages) when others do.
    func decrypt(_ file: [UInt8], path: String) throws -> [UInt8] {
        let page = Self.pageSize, group = Self.pagesPerGroup
        guard file.count % page == 0, file.count >= 2 * page else {
            throw StoreError(.corrupt, "\(path) is damaged or not an encrypted Realm file: an encrypted Realm file "
                + "is whole pages of 4096 bytes, at least two, and this one has \(file.count) bytes")
        }
        let filePages = file.count / page
        let groups = (filePages + group) / (group + 1)
        let dataPages = filePages - groups
        var plain = [UInt8](repeating: 0, count: dataPages * page)
        var matched = 0, written = 0
        var firstMismatch: Int?
        guard let context = EVP_CIPHER_CTX_new() else {
            throw StoreError(.io, "OpenSSL could not make a cipher context to read \(path)")
        }
        defer { EVP_CIPHER_CTX_free(context) }
        var mac = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        for index in 0..<dataPages {
            let groupStart = (index / group) * (group + 1) * page
            let entry = groupStart + (index % group) * 64
            let cipherStart = groupStart + (1 + index % group) * page
            let counter = Self.uint32(file, at: entry)
            guard counter != 0 else { continue }
            written += 1
            var macLength: UInt32 = 0
            let ok = file.withUnsafeBufferPointer { file in
                macKey.withUnsafeBufferPointer { key in
                    HMAC(EVP_sha224(), key.baseAddress, Int32(key.count), file.baseAddress! + cipherStart, page,
                         &mac, &macLength) != nil
                }
            }
            guard ok, macLength == 28 else { throw StoreError(.io, "OpenSSL could not compute an HMAC for \(path)") }
            let iv: UInt32
            if Self.equal(mac, file, at: entry + 4) {
                iv = counter
            } else if Self.uint32(file, at: entry + 32) != 0, Self.equal(mac, file, at: entry + 36) {
                iv = Self.uint32(file, at: entry + 32)  // a write cut between its table entry and its page
            } else {
                if firstMismatch == nil { firstMismatch = index }
                continue
            }
            matched += 1
            try decryptPage(file, from: cipherStart, into: &plain, at: index * page, iv: iv, context: context,
                            path: path)
        }
        if let firstMismatch {
            if matched == 0 {
                throw StoreError(.wrongKey, "\(path) cannot be read with this key: it is not the key the file was "
                    + "encrypted with (no page's HMAC matches it)")
            }
            throw StoreError(.corrupt, "\(path) is damaged: its encrypted page \(firstMismatch) (of \(dataPages)) "
                + "does not match its HMAC, while \(matched) other pages do")
        }
        guard written > 0 else {
            throw StoreError(.corrupt, "\(path) is damaged or not an encrypted Realm file: none of its "
                + "\(dataPages) pages was ever written")
        }
        return plain
    }

    private func decryptPage(_ file: [UInt8], from start: Int, into plain: inout [UInt8], at offset: Int,
                             iv counter: UInt32, context: OpaquePointer, path: String) throws {
        var iv = [UInt8](repeating: 0, count: 16)
        for k in 0..<4 { iv[k] = UInt8(truncatingIfNeeded: counter >> (8 * UInt32(k))) }
        for k in 0..<8 { iv[4 + k] = UInt8(truncatingIfNeeded: UInt64(offset) >> (8 * UInt64(k))) }
        var produced: Int32 = 0
        let ok = file.withUnsafeBufferPointer { file in
            plain.withUnsafeMutableBufferPointer { plain in
                EVP_DecryptInit_ex(context, EVP_aes_256_cbc(), nil, aesKey, iv) == 1
                    && EVP_CIPHER_CTX_set_padding(context, 0) == 1
                    && EVP_DecryptUpdate(context, plain.baseAddress! + offset, &produced, file.baseAddress! + start,
                                         Int32(Self.pageSize)) == 1
            }
        }
        guard ok, produced == Self.pageSize else {
            throw StoreError(.io, "OpenSSL could not decrypt page \(offset / Self.pageSize) of \(path)")
        }
    }

    private static func uint32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16
            | UInt32(bytes[offset + 3]) << 24
    }

    /// Whether the 28-byte `mac` equals the bytes at `offset`, in constant time.
    private static func equal(_ mac: [UInt8], _ bytes: [UInt8], at offset: Int) -> Bool {
        var difference: UInt8 = 0
        for k in 0..<28 { difference |= mac[k] ^ bytes[offset + k] }
        return difference == 0
    }
}
