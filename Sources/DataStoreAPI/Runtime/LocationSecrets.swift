import Foundation

/// Hides what could be a secret in location text that a message repeats: the values of
/// `password=` and `sslpassword=` (libpq's `key=value` pairs and URL query parameters, quoted or
/// not) and the password of `user:password@`, however far a parser got before it gave the text
/// up. A location that parses never holds one (a secret is refused); this is for the text of one
/// that does not parse, which every message about it shows.
@_spi(Backend) public enum LocationSecrets {
    private static let rules: [(pattern: NSRegularExpression, template: String)] = [
        // password=VALUE, sslpassword = 'a quoted value', &password=VALUE.
        (try! NSRegularExpression(pattern: #"(?i)(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&]*)"#),
         "$1***"),
        // user:password@ (the password runs from the first colon after the user to the @; a
        // scheme's "://" is no password).
        (try! NSRegularExpression(pattern: #"(^|[/\s])([^/\s:@]*):(?!//)([^@\s]*)@"#), "$1$2:***@"),
    ]

    /// `text` with every secret replaced by `***`.
    public static func redacted(_ text: String) -> String {
        var result = text
        for (pattern, template) in rules {
            result = pattern.stringByReplacingMatches(in: result, range: NSRange(result.startIndex..., in: result),
                                                      withTemplate: template)
        }
        return result
    }
}
