import DataStoreAPI
import Foundation

/// Decodes the JSON files the commands take (schema plans, import mappings) and, when one does
/// not decode, says what is wrong in the user's terms: the line and column of a syntax error,
/// the path of a wrong value (`versions[0].steps[1]`), an unknown step by its name.
enum JSONInput {
    /// The schema steps a plan may name, as their JSON keys.
    static let stepNames = ["addEntity", "removeEntity", "renameEntity", "addAttribute", "removeAttribute",
                            "renameAttribute", "changeType", "addIndex", "removeIndex", "addRelationship",
                            "removeRelationship", "changeDeleteRule"]

    /// Decodes `data`, the file `path`, which the messages call `what` ("the plan plan.json").
    static func decode<T: Decodable>(_ type: T.Type, from data: Data, what: String) throws(StoreError) -> T {
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch let error as DecodingError {
            throw StoreError(.invalidArgument, what + " " + describe(error, in: data))
        } catch {
            throw StoreError(.invalidArgument, "\(what) cannot be read: \(error.localizedDescription)")
        }
    }

    static func describe(_ error: DecodingError, in data: Data) -> String {
        if let step = stepError(error, in: data) { return step }
        switch error {
        case .dataCorrupted(let context) where context.codingPath.isEmpty:
            return "is not JSON: " + syntaxError(in: data)
        case .dataCorrupted(let context):
            let path = text(of: context.codingPath)
            let value = value(at: context.codingPath, in: data)
            if context.codingPath.last?.stringValue == "type", let name = value as? String {
                return "names the type '\(name)' at \(path); the types are "
                    + ValueType.allCases.map(\.rawValue).joined(separator: ", ")
            }
            return "has a value at \(path) that is not valid there" + (value.map { ": \(show($0))" } ?? "")
        case .keyNotFound(let key, let context):
            return "lacks '\(key.stringValue)'" + (context.codingPath.isEmpty ? "" : " at \(text(of: context.codingPath))")
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            let found = value(at: context.codingPath, in: data).map { ", not \(show($0))" } ?? ""
            return "has a wrong value at \(text(of: context.codingPath)): expected \(kind(of: type))\(found)"
        @unknown default:
            return "is not valid"
        }
    }

    /// A plan step that is not an object with one known step name as its key.
    private static func stepError(_ error: DecodingError, in data: Data) -> String? {
        let path: [any CodingKey]
        switch error {
        case .dataCorrupted(let context), .typeMismatch(_, let context): path = context.codingPath
        default: return nil
        }
        guard path.count >= 2, path[path.count - 2].stringValue == "steps",
              let object = value(at: path, in: data) as? [String: Any] else { return nil }
        let unknown = object.keys.sorted().filter { !stepNames.contains($0) }
        guard !unknown.isEmpty || object.count != 1 else { return nil }
        return "has " + (unknown.isEmpty ? "" : "an unknown step '\(unknown[0])' ") + "at \(text(of: path)): "
            + "a step is an object with one key, one of " + stepNames.joined(separator: ", ")
    }

    /// `versions[0].steps[1].addAttribute`.
    static func text(of path: [any CodingKey]) -> String {
        var result = ""
        for key in path {
            if let index = key.intValue { result += "[\(index)]" } else { result += (result.isEmpty ? "" : ".") + key.stringValue }
        }
        return result.isEmpty ? "the top level" : result
    }

    /// The line and column where a JSON parser gives up.
    static func syntaxError(in data: Data) -> String {
        do {
            _ = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
            return "it does not have the expected structure"
        } catch {
            let message = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? ""
            guard let range = message.range(of: "character "),
                  let offset = Int(message[range.upperBound...].prefix { $0.isNumber }) else {
                return message.contains("end of file") ? "it ends before its last value does" : "it cannot be parsed"
            }
            var line = 1
            var column = 1
            for byte in data.prefix(max(0, offset - 1)) {
                if byte == 0x0A { line += 1; column = 1 } else { column += 1 }
            }
            return "line \(line), column \(column) holds something that is not JSON"
        }
    }

    private static func value(at path: [any CodingKey], in data: Data) -> Any? {
        guard var current = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) else { return nil }
        for key in path {
            if let index = key.intValue, let array = current as? [Any], array.indices.contains(index) {
                current = array[index]
            } else if let object = current as? [String: Any], let next = object[key.stringValue] {
                current = next
            } else {
                return nil
            }
        }
        return current
    }

    private static func show(_ value: Any) -> String {
        switch value {
        case let text as String: return "the string \"\(text)\""
        case is [Any]: return "an array"
        case is [String: Any]: return "an object"
        case is NSNull: return "null"
        case let flag as Bool where String(describing: type(of: value)).contains("Bool"): return "the boolean \(flag)"
        case let number as NSNumber: return "the number \(number)"
        default: return "\(value)"
        }
    }

    private static func kind(of type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Bool.Type: return "true or false"
        case is Int.Type, is Int64.Type, is UInt64.Type, is Int32.Type: return "an integer"
        case is Double.Type: return "a number"
        default: return "\(type)".hasPrefix("Array") ? "an array" : "an object"
        }
    }
}
