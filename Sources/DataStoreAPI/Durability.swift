/// How durable a commit is when `writeSync` returns; the same meaning on every backend.
public enum Durability: String, Sendable, Hashable, Codable {
    /// A commit survives power loss and OS crashes: the data is synced to disk before
    /// `writeSync` returns (SQLite `synchronous=FULL`, LMDB's default sync on commit).
    case full
    /// A commit survives a crash of the process, but the last commits may be lost on power loss
    /// or an OS crash (SQLite WAL `synchronous=NORMAL`, LMDB `MDB_NOSYNC`). Never corrupts.
    case normal
}
