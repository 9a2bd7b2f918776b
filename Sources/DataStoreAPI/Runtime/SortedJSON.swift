import Foundation

extension JSONEncoder {
    /// An encoder for JSON the package stores or compares: keys sorted (Foundation's encoder
    /// otherwise writes a struct's keys in a dictionary's order, which changes from one process
    /// to the next), with `formatting` added.
    package static func sortingKeys(_ formatting: JSONEncoder.OutputFormatting = []) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = formatting.union(.sortedKeys)
        return encoder
    }
}
