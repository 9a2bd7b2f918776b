import Foundation

/// Hides what could be a secret in location text that a message repeats: the values of
/// `password=` and `sslpassword=` (and `passwd=`, `pwd=`, `pass=`, which libpq does not take but
/// a user may type) (libpq's `key=value` pairs and URL query parameters, quoted or
/// not) and the password of a URL's `//user:password@`, however far a parser got before it gave
/// the text up. A location that parses never holds one (a secret is refused); this is for the text of one
/// that does not parse, which every message about it shows.
@_spi(Backend) public enum LocationSecrets {
    private typealias Rule = (pattern: NSRegularExpression, template: String)

    /// The rules, `nil` when one of their patterns does not compile (constant patterns, which the
    /// tests compile: a failure would be a bug of the package's or of Foundation's). Without them
    /// the whole text is hidden rather than shown with a secret in it.
    private static let rules: [Rule]? = compiled([
        // password=VALUE, sslpassword = 'a quoted value', &password=VALUE; an unquoted value
        // with a space is the user's mistake, so the words after it that are not `key=` go too.
        (#"(?i)(\b(?:ssl)?(?:password|passwd|pwd|pass)\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&]*(?:\s+(?![^\s=&]*\s*=)[^\s&]+)*)"#,
         "$1***"),
        // user:password@ after a URL's "//" or a PostgreSQL scheme (postgres:/app:pw@h): the
        // password runs to the last @ of the word, since an unencoded @, / or ? in it is a common
        // mistake (a query value with an @ is hidden with it: better too much than too little). A path such as sqlite:/data/app@2x.sqlite holds no password.
        (#"(?i)((?://|\bpostgres(?:ql)?:/?)[^/\s:@]*):(\S*)@"#, "$1:***@"),
        // The same with the colon percent-encoded (user%3Apassword@), which a URL decodes into
        // a user name that holds the password.
        (#"(?i)((?://|\bpostgres(?:ql)?:/?)[^/\s:@]*?)%3A(\S*)@"#, "$1%3A***@"),
    ])

    /// What follows `postgres:` in a location, from its start: `/app:pw@h`, `app:pw@h`.
    private static let leadingUser = compiled([(#"^(/{0,2}[^/\s:@=]*):(\S*)@"#, "$1:***@")])

    /// What stands for a text whose secrets could not be looked for.
    static let hidden = "(location hidden: its secrets could not be looked for)"

    private static func compiled(_ sources: [(pattern: String, template: String)]) -> [Rule]? {
        var rules: [Rule] = []
        for (pattern, template) in sources {
            guard let compiled = try? NSRegularExpression(pattern: pattern) else { return nil }
            rules.append((compiled, template))
        }
        return rules
    }

    /// `text` with every secret replaced by `***`.
    public static func redacted(_ text: String) -> String { redact(text, rules) }

    /// The text of a PostgreSQL location without its `postgres:` (what its parser is given),
    /// with every secret replaced by `***`: a user and password may open it.
    public static func redacted(postgres text: String) -> String {
        redact(text, rules.flatMap { rules in leadingUser.map { rules + $0 } })
    }

    private static func redact(_ text: String, _ rules: [Rule]?) -> String {
        guard let rules else { return hidden }
        var result = text
        for (pattern, template) in rules {
            result = pattern.stringByReplacingMatches(in: result, range: NSRange(result.startIndex..., in: result),
                                                      withTemplate: template)
        }
        return result
    }
}
