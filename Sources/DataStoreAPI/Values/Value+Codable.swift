import Foundation

/// Values are stored in schemas (attribute defaults) and reports as JSON, exactly:
/// integers as decimal strings, doubles as their bit pattern, bytes as base64.
extension Value: Codable {
    private enum CodingKeys: String, CodingKey { case type, value }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        guard let typeName = try container.decodeIfPresent(String.self, forKey: .type) else {
            self = .null
            return
        }
        guard let type = ValueType(rawValue: typeName) else {
            throw DecodingError.dataCorruptedError(forKey: .type, in: container,
                                                   debugDescription: "unknown value type \(typeName)")
        }
        func text() throws -> String { try container.decode(String.self, forKey: .value) }
        func bad() -> DecodingError {
            DecodingError.dataCorruptedError(forKey: .value, in: container, debugDescription: "bad \(typeName)")
        }
        switch type {
        case .bool: self = .bool(try container.decode(Bool.self, forKey: .value))
        case .int:
            guard let i = Int64(try text()) else { throw bad() }
            self = .int(i)
        case .double:
            guard let bits = UInt64(try text(), radix: 16) else { throw bad() }
            self = .double(Double(bitPattern: bits))
        case .string: self = .string(try text())
        case .bytes:
            guard let data = Data(base64Encoded: try text()) else { throw bad() }
            self = .bytes(Array(data))
        case .date:
            guard let micros = Int64(try text()) else { throw bad() }
            self = .date(Timestamp(microsecondsSinceEpoch: micros))
        case .uuid:
            guard let uuid = UUID(uuidString: try text()) else { throw bad() }
            self = .uuid(uuid)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        guard let type else { return }
        try container.encode(type.rawValue, forKey: .type)
        switch self {
        case .null: break
        case .bool(let b): try container.encode(b, forKey: .value)
        case .int(let i): try container.encode(String(i), forKey: .value)
        case .double(let d): try container.encode(String(d.bitPattern, radix: 16), forKey: .value)
        case .string(let s): try container.encode(s, forKey: .value)
        case .bytes(let b): try container.encode(Data(b).base64EncodedString(), forKey: .value)
        case .date(let t): try container.encode(String(t.microsecondsSinceEpoch), forKey: .value)
        case .uuid(let u): try container.encode(u.uuidString, forKey: .value)
        }
    }
}
