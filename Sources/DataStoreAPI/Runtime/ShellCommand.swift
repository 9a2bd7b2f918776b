import Foundation

/// A `migrate-store` command line as messages print it for a user to paste into a POSIX shell:
/// each word that holds anything but letters, digits and `@%+=:,./_-` is single-quoted (a path
/// with a space, a PostgreSQL URL with `&` and `?`), so that pasting it runs what it says.
@_spi(Backend) public enum ShellCommand {
    /// `word`, quoted for a POSIX shell when it must be.
    public static func quoted(_ word: String) -> String {
        let plain = !word.isEmpty && word.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || "@%+=:,./_-".utf8.contains(byte)
        }
        if plain { return word }
        return "'" + word.replacingOccurrences(of: "'", with: #"'\''"#) + "'"
    }

    /// `migrate-store` followed by `words`, each quoted as it must be.
    public static func migrateStore(_ words: String...) -> String {
        (["migrate-store"] + words.map(quoted)).joined(separator: " ")
    }

    /// The command that finishes an unfinished copy of `source` into `destination`.
    public static func resume(from source: String, to destination: String) -> String {
        migrateStore("copy", "--from", source, "--to", destination, "--resume")
    }
}
