/// The one error type every store, backend and tool of the package throws.
///
/// `code` is stable and meant for programs; `message` is for people and names the entity,
/// key or file involved; `cause` keeps the underlying SQLite, LMDB or OS error.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    /// A stable error code. New codes may be added without breaking users.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Raw: String, Sendable {
            case notFound, keyExists, uniqueViolation, typeMismatch, schemaMismatch, invalidValue
            case unknownEntity, unknownAttribute, limitExceeded, invalidArgument, storeFull, corrupt
            case io, closed, reentrantCall, accessorExpired, busy, conflict, notAStore
            case incompatibleFormat, incompleteMigration, readOnly, newerSchemaVersion, changesExpired
            case referenceViolation, unavailable, wrongKey
        }

        private let raw: Raw
        private init(_ raw: Raw) { self.raw = raw }

        /// An item or file that the operation needs does not exist.
        public static let notFound = Code(.notFound)
        /// An insert found an item with the same primary key.
        public static let keyExists = Code(.keyExists)
        /// A write would give two items the same values in a unique index.
        public static let uniqueViolation = Code(.uniqueViolation)
        /// A value's type does not match its attribute's type.
        public static let typeMismatch = Code(.typeMismatch)
        /// The stored schema differs from the one the store was opened with.
        public static let schemaMismatch = Code(.schemaMismatch)
        /// A value is not allowed (NaN, null for a required attribute, a bad date, ...).
        public static let invalidValue = Code(.invalidValue)
        /// No entity of that name in the schema.
        public static let unknownEntity = Code(.unknownEntity)
        /// No attribute of that name in the entity.
        public static let unknownAttribute = Code(.unknownAttribute)
        /// A name, key or value is past one of the documented ``Limits``.
        public static let limitExceeded = Code(.limitExceeded)
        /// An argument is not valid (a negative limit, a child merged into the wrong parent, ...).
        public static let invalidArgument = Code(.invalidArgument)
        /// The disk (or a quota) is full.
        public static let storeFull = Code(.storeFull)
        /// The file is damaged.
        public static let corrupt = Code(.corrupt)
        /// The operating system reported an I/O error.
        public static let io = Code(.io)
        /// The store was closed.
        public static let closed = Code(.closed)
        /// `writeSync` (or `close`, or waiting for pending writes) was called inside a block of
        /// the same store, which would deadlock.
        public static let reentrantCall = Code(.reentrantCall)
        /// An accessor was used after its block returned.
        public static let accessorExpired = Code(.accessorExpired)
        /// Another process holds a lock for too long.
        public static let busy = Code(.busy)
        /// A merge found items that both the parent and the child changed.
        public static let conflict = Code(.conflict)
        /// The file or directory is not a store of this package.
        public static let notAStore = Code(.notAStore)
        /// The store was written by a newer format version.
        public static let incompatibleFormat = Code(.incompatibleFormat)
        /// The store is the destination of a migration that has not finished.
        public static let incompleteMigration = Code(.incompleteMigration)
        /// The store or its directory cannot be written.
        public static let readOnly = Code(.readOnly)
        /// The store holds a newer schema version than the app's: opening it would downgrade it.
        public static let newerSchemaVersion = Code(.newerSchemaVersion)
        /// A change token is older than what the store's change feed keeps (or the feed was off
        /// or restarted since): the caller must resynchronize from a fresh read.
        public static let changesExpired = Code(.changesExpired)
        /// A transaction would leave a to-one reference pointing at an item that does not exist,
        /// or delete an item that a `deny` rule protects; nothing of it is committed.
        public static let referenceViolation = Code(.referenceViolation)
        /// No server the store's location names can be reached, or none of them accepts writes
        /// now (a primary died and no standby has been promoted yet); nothing of the operation
        /// was stored, and the same call may succeed when retried later.
        public static let unavailable = Code(.unavailable)
        /// An encrypted file was opened with a key other than the one it was written with (told
        /// from damage by its authentication codes).
        public static let wrongKey = Code(.wrongKey)

        public var description: String { raw.rawValue }
    }

    /// The underlying error of a C library or the OS.
    public struct Cause: Sendable, Hashable, CustomStringConvertible {
        /// `sqlite`, `lmdb`, `postgresql` or `posix`.
        public let library: String
        /// The library's own code (an extended SQLite result code, an LMDB or errno value, a
        /// PostgreSQL SQLSTATE in base 36: see ``sqlState``).
        public let code: Int32
        /// The library's own message.
        public let message: String

        /// The error `code` of `library`, with its message.
        public init(library: String, code: Int32, message: String) {
            self.library = library
            self.code = code
            self.message = message
        }

        public var description: String {
            if let sqlState { return "\(library) error \(sqlState): \(message)" }
            return "\(library) error \(code): \(message)"
        }

        /// A PostgreSQL error's SQLSTATE (`25006`, `40001`): five digits or capital letters,
        /// the same whatever language the server and libpq speak. `code` holds it in base 36.
        public var sqlState: String? {
            guard library == "postgresql", code >= 0 else { return nil }
            var digits: [Character] = []
            var rest = Int(code)
            for _ in 0..<5 {
                let digit = rest % 36
                digits.append(Character(Unicode.Scalar(UInt8(digit < 10 ? 48 + digit : 55 + digit))))
                rest /= 36
            }
            return String(digits.reversed())
        }

        /// The cause of a PostgreSQL error with its SQLSTATE (nil for one that is not five digits
        /// or capital letters).
        public static func postgres(sqlState: String, message: String) -> Cause? {
            let bytes = Array(sqlState.utf8)
            guard bytes.count == 5 else { return nil }
            var code: Int32 = 0
            for byte in bytes {
                let digit: Int32
                switch byte {
                case 0x30...0x39: digit = Int32(byte) - 48
                case 0x41...0x5A: digit = Int32(byte) - 55
                default: return nil
                }
                code = code * 36 + digit
            }
            return Cause(library: "postgresql", code: code, message: message)
        }
    }

    /// An item named by an error (for example each item of a merge conflict).
    public struct ItemReference: Sendable, Hashable, CustomStringConvertible {
        /// The item's entity.
        public let entity: String
        /// The item's primary key.
        public let key: Value

        /// The item `key` of `entity`.
        public init(entity: String, key: Value) {
            self.entity = entity
            self.key = key
        }

        public var description: String { "\(entity)[\(key)]" }
    }

    /// What kind of error it is, for programs: stable across releases.
    public let code: Code
    /// What went wrong, for people: names the store, entity, key, attribute or file involved.
    public let message: String
    /// The underlying error of SQLite, LMDB, PostgreSQL or the OS, when there is one.
    public let cause: Cause?
    /// The items the error is about, when there are several (merge conflicts).
    public let items: [ItemReference]

    /// An error of `code` with its message (a backend's or a tool's).
    public init(_ code: Code, _ message: String, cause: Cause? = nil, items: [ItemReference] = []) {
        self.code = code
        self.message = message
        self.cause = cause
        self.items = items
    }

    public var description: String {
        var text = "\(code): \(message)"
        guard let cause else { return text }
        // A message that already quotes its cause's text gets only the cause's code.
        if !cause.message.isEmpty, message.contains(cause.message) {
            text += " (\(cause.library) error \(cause.sqlState ?? "\(cause.code)"))"
        } else {
            text += " (\(cause))"
        }
        return text
    }
}

extension StoreError {
    /// `corrupt`: what a check found damaged in `location`'s records (each a description naming
    /// the item), in one line, as the command line prints an error: how many of the `checked`,
    /// and the first 50.
    @_spi(Backend) public static func damagedRecords(_ location: String, _ damage: [String], checked: Int) -> StoreError {
        let more = damage.count > 50 ? "; and \(damage.count - 50) more" : ""
        return StoreError(.corrupt, "\(location) is damaged: \(damage.count) damaged record"
            + "\(damage.count == 1 ? "" : "s") of \(checked): \(damage.prefix(50).joined(separator: "; "))\(more)")
    }

    /// The error every backend throws when an insert finds an item with the same primary key.
    @_spi(Backend) public static func keyExists(_ entity: EntitySchema, _ record: Record, cause: Cause? = nil) -> StoreError {
        StoreError(.keyExists, "'\(entity.name)' already has an item with key \(record[entity.primaryKey])",
                   cause: cause, items: [ItemReference(entity: entity.name, key: record[entity.primaryKey])])
    }

    /// The error every backend throws when a write would give two items the same values in a
    /// unique index.
    @_spi(Backend) public static func uniqueViolation(_ entity: EntitySchema, _ index: Index, _ record: Record,
                                       cause: Cause? = nil) -> StoreError {
        let values = index.attributes.map { record[$0].description }.joined(separator: ", ")
        return StoreError(.uniqueViolation, "unique index '\(entity.name).\(index.name)' already holds \(values)",
                          cause: cause, items: [ItemReference(entity: entity.name, key: record[entity.primaryKey])])
    }
}
