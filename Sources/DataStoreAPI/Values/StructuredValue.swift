import Foundation

/// How a ``DataObject`` property that is an array, a dictionary or a nested `Codable` type is
/// stored: as JSON text in a string attribute, with sorted keys (so that equal values are equal
/// text, which smart updates and merges compare) and dates in ISO 8601 with microseconds, as
/// the store's own dates. `sqlite3` and `psql` show it as it is.
enum StructuredValue {
    /// Thrown by the record decoder when a property asks for a container: it is decoded from JSON.
    struct Requested: Error {}

    static func encode<T: Encodable>(_ value: T, property: String) throws -> Value {
        let encoder = makeEncoder()
        do {
            return .string(String(decoding: try encoder.encode(value), as: UTF8.self))
        } catch let error as StoreError {
            throw StoreError(.invalidValue, "property '\(property)': \(error.message)")
        } catch {
            throw StoreError(.invalidValue, "property '\(property)' cannot be stored as JSON: \(error)")
        }
    }

    /// The encoder of every structured value: sorted keys, dates as the store's ISO 8601 text.
    private static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(ValueConversion.iso8601Text(try Timestamp(date)))
        }
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "Infinity",
                                                                       negativeInfinity: "-Infinity", nan: "NaN")
        return encoder
    }

    /// Whether the JSON text of an array of scalars holds `element`: its JSON form, exactly as
    /// ``encode(_:property:)`` writes it, between the array's brackets or commas. Exact for
    /// arrays (and sets) of strings, numbers, booleans, dates, UUIDs and bytes: a string's
    /// quotes inside another string are escaped, and a number ends at a comma or bracket, so no
    /// part of one element reads as another. It is a text search, so on every backend the same.
    static func hasElement(_ attribute: String, _ element: some Encodable) -> Filter {
        guard let array = try? makeEncoder().encode([element]), array.count > 2 else { return .or([]) }
        let token = String(decoding: array.dropFirst().dropLast(), as: UTF8.self)
        return .or([.contains(attribute, "[" + token + "]"), .contains(attribute, "[" + token + ","),
                    .contains(attribute, "," + token + ","), .contains(attribute, "," + token + "]")])
    }

    static func decode<T: Decodable>(_ type: T.Type, from value: Value, property: String) throws -> T {
        guard case .string(let text) = value else {
            throw StoreError(.typeMismatch, "attribute '\(property)' holds \(value), not the JSON text of \(T.self)")
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let timestamp = ValueConversion.parseISO8601Text(text) else {
                throw StoreError(.typeMismatch, "attribute '\(property)' holds the date '\(text)', which is not ISO 8601")
            }
            return timestamp.date
        }
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "Infinity",
                                                                         negativeInfinity: "-Infinity", nan: "NaN")
        do {
            return try decoder.decode(T.self, from: Data(text.utf8))
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.typeMismatch, "attribute '\(property)' holds JSON that is not a \(T.self): \(error)")
        }
    }
}
