import Foundation
@testable import JSONLStore
import Testing

/// An import checks its input with a validator that builds no values; it must accept exactly
/// what the parser accepts, with the same error at the same byte, or an import could write
/// batches before the parser finds what the check let through. Compared over valid documents
/// and their mutations: truncated, bytes flipped or inserted, escapes, invalid UTF-8.
@Test func theValidatorAcceptsExactlyWhatTheParserAccepts() {
    let seeds = [
        #"{"id": 1, "name": "Ada", "notes": [{"id": 2, "text": "a\nb\u00e9\ud83d\ude00"}], "x": null}"#,
        #"[1, -0.5e+3, 1E2, 0, true, false, null, "", "\"\\\/\b\f\n\r\t", {"a": {}}, []]"#,
        "{\"é\": \"naïve\", \"n\": 12345678901234567890, \"deep\": [[[[[[1]]]]]]}",
        #"  {"k" : [ 1 , 2 ] }  "#,
    ]
    let alphabet = Array(#"{}[],:"\\/ ubnrtf0123456789-+.eEaé"#.utf8) + [0x00, 0x1F, 0x80, 0xC3, 0xFF, 0xED, 0xA0]
    var generator = SystemRandomNumberGenerator()
    var compared = 0
    var rejected = 0
    for seed in seeds {
        let bytes = Array(seed.utf8)
        var variants = [bytes]
        for cut in 0..<bytes.count { variants.append(Array(bytes[..<cut])) }
        for _ in 0..<2_000 {
            var mutated = bytes
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let position = Int.random(in: 0..<max(1, mutated.count), using: &generator)
                let byte = alphabet.randomElement(using: &generator) ?? 0
                switch Int.random(in: 0..<3, using: &generator) {
                case 0 where !mutated.isEmpty: mutated[position] = byte
                case 1: mutated.insert(byte, at: min(position, mutated.count))
                default: if !mutated.isEmpty { mutated.remove(at: position) }
                }
            }
            variants.append(mutated)
        }
        for variant in variants {
            var parser = JSONParser(variant)
            var validator = JSONParser(variant)
            let parsed = Result { try parser.parseDocument() }
            let validated = Result { try validator.validateDocument() }
            compared += 1
            switch (parsed, validated) {
            case (.success, .success): break
            case (.failure(let a as JSONParser.Failure), .failure(let b as JSONParser.Failure)):
                rejected += 1
                #expect(a.message == b.message && a.offset == b.offset,
                        "\(Array(variant)): parser \(a.message) at \(a.offset), validator \(b.message) at \(b.offset)")
            default:
                Issue.record("\(String(decoding: variant, as: UTF8.self)): parser \(parsed), validator \(validated)")
            }
        }
    }
    #expect(rejected > compared / 4 && rejected < compared, "\(rejected) of \(compared) variants rejected")
}
