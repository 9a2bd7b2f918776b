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

    /// `element` as the JSON scalar this package's encoder writes for it (a date as its ISO 8601
    /// text, a UUID as its text, bytes as base64, a `Float` as the shortest decimal that reads
    /// back as it): the value ``Filter/hasElement(_:_:)`` compares elements with. A value whose
    /// JSON is no scalar is a string that no element equals.
    static func element(_ element: some Encodable) -> Value {
        guard let array = try? makeEncoder().encode([element]),
              let scalars = JSONScalarArray.elements(Array(array)), scalars.count == 1 else {
            return .string("\u{0}not a JSON scalar")
        }
        return scalars[0]
    }

    /// Whether `value` is the JSON text of an array of scalars one of whose elements equals
    /// `element` (see ``Filter/hasElement(_:_:)``).
    static func arrayHolds(_ value: Value, _ element: Value) -> Bool {
        guard case .string(var text) = value else { return false }
        return text.withUTF8 { JSONScalarArray.holds($0, element) }
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
