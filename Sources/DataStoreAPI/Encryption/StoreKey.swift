import Foundation

/// The secret an encrypted store is opened with: a key of 32 random bytes, or a passphrase that a
/// memory-hard function (scrypt) turns into one.
///
/// The key never encrypts items itself: a store has a data key of its own, made at random when
/// the store is created, and keeps it wrapped (encrypted) by this key. Printing a `StoreKey`
/// shows only which kind it is, never the secret.
///
/// ```swift
/// let key = try StoreKey(contentsOfFile: "/etc/myapp/store.key")
/// let store = try SQLiteStore(path: "notes.sqlite", schema: schema, options: SQLiteOptions(key: key))
/// ```
public struct StoreKey: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    enum Secret: Sendable, Hashable {
        case raw([UInt8])
        case passphrase([UInt8])
    }

    let secret: Secret
    /// scrypt's cost (log2 of N) for a passphrase that creates a store; stores record the cost
    /// they were created with.
    let passphraseCost: UInt8

    /// The bytes of a raw key.
    public static let rawKeySize = 32

    /// A raw key of ``rawKeySize`` random bytes (for example `openssl rand 32`).
    /// - Throws: `invalidArgument` when it is not 32 bytes long.
    public init(rawKey: some Collection<UInt8>) throws(StoreError) {
        guard rawKey.count == Self.rawKeySize else {
            throw StoreError(.invalidArgument, "a raw store key is \(Self.rawKeySize) bytes long; this one has "
                + "\(rawKey.count) (a passphrase is StoreKey(passphrase:))")
        }
        secret = .raw(Array(rawKey))
        passphraseCost = Self.defaultCost
    }

    /// A passphrase, turned into the key that wraps the store's data key by scrypt (N = 2^15,
    /// r = 8, p = 1: 32 MiB of memory and about a tenth of a second per open on a current core).
    /// - Throws: `invalidArgument` when it is empty.
    public init(passphrase: String) throws(StoreError) {
        try self.init(passphrase: passphrase, cost: Self.defaultCost)
    }

    /// A passphrase with scrypt's cost set (log2 of N); for tests, which open many stores.
    package init(passphrase: String, cost: UInt8) throws(StoreError) {
        guard !passphrase.isEmpty else {
            throw StoreError(.invalidArgument, "a store's passphrase cannot be empty")
        }
        guard (10...20).contains(cost) else {
            throw StoreError(.invalidArgument, "scrypt's cost must be 10 to 20, not \(cost)")
        }
        secret = .passphrase(Array(passphrase.utf8))
        passphraseCost = cost
    }

    /// The key in a file: 64 hexadecimal digits are a raw key (`openssl rand -hex 32`), anything
    /// else is a passphrase. One line break at the end is not part of it.
    /// - Throws: `notFound` or `io` naming the file, `invalidArgument` when it is empty.
    public init(contentsOfFile path: String) throws(StoreError) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw StoreError(.notFound, "key file \(path) does not exist")
        }
        guard !isDirectory.boolValue else {
            throw StoreError(.invalidArgument, "key file \(path) is a directory, not a file holding a key")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw StoreError(.io, "cannot read key file \(path)")
        }
        var bytes = Array(data)
        if bytes.last == 0x0A { bytes.removeLast() }
        if bytes.last == 0x0D { bytes.removeLast() }
        guard !bytes.isEmpty else {
            throw StoreError(.invalidArgument, "key file \(path) is empty; it must hold 64 hexadecimal digits "
                + "(openssl rand -hex 32) or a passphrase")
        }
        if let raw = Self.hexKey(bytes) {
            secret = .raw(raw)
        } else {
            secret = .passphrase(bytes)
        }
        passphraseCost = Self.defaultCost
    }

    static let defaultCost: UInt8 = 15

    /// 32 bytes from 64 hexadecimal digits, or `nil`.
    private static func hexKey(_ text: [UInt8]) -> [UInt8]? {
        guard text.count == 2 * rawKeySize else { return nil }
        func digit(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: return c - 0x30
            case 0x41...0x46: return c - 0x41 + 10
            case 0x61...0x66: return c - 0x61 + 10
            default: return nil
            }
        }
        var key: [UInt8] = []
        key.reserveCapacity(rawKeySize)
        for i in stride(from: 0, to: text.count, by: 2) {
            guard let high = digit(text[i]), let low = digit(text[i + 1]) else { return nil }
            key.append(high << 4 | low)
        }
        return key
    }

    /// Which kind of key it is, never the secret: `dump`, `debugPrint` and string interpolation
    /// of a value holding a key (an options struct) show no byte of it.
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }

    public var debugDescription: String { description }

    /// Which kind of key it is, never the secret.
    public var description: String {
        switch secret {
        case .raw: return "StoreKey(raw key)"
        case .passphrase: return "StoreKey(passphrase)"
        }
    }
}
