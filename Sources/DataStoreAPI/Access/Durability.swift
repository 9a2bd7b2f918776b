/// How durable a commit is when `writeSync` returns; the same meaning on every backend.
public enum Durability: String, Sendable, Hashable, Codable {
    /// A commit survives power loss and OS crashes: the data is synced to disk before
    /// `writeSync` returns (SQLite `synchronous=FULL`, LMDB's default sync on commit).
    case full
    /// A commit survives a crash of the process; on power loss or an OS crash the last commits
    /// may be lost, but the store stays consistent (SQLite WAL `synchronous=NORMAL`, LMDB
    /// `MDB_NOMETASYNC`). Closing the store syncs it.
    case normal
}
