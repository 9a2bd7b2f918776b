@_spi(Backend) import DataStoreAPI
import Foundation

/// What a JSON key of an object names on the object's entity.
enum ImportTarget {
    /// An attribute; for a to-one relationship's attribute, the related item's key.
    case attribute(Attribute)
    /// A to-one relationship: a nested object, the related item's key, or null.
    case toOne(Relationship)
    /// A to-many relationship: an array of nested objects or of the related items' keys.
    case toMany(Relationship)
}

/// Maps JSON keys onto an entity's attributes and relationships as the Sync library does, and
/// remembers each answer: a payload repeats the same few keys millions of times.
///
/// For a key, in this order: the explicit mapping (`"key"` for the imported entity,
/// `"Entity.key"` for any entity); the key itself; Sync's reserved names (`id` is `remoteID`,
/// `description` and `type` are `userDescription` and `userType` on entity `User`); the
/// camelCase form of a snake_case key, first with Sync's acronyms upper-cased (`user_id` is
/// `userID`, `avatar_url` is `avatarURL`), then without (`userId`); and last the key forms of
/// relationships (`company_id` for the to-one `company`, `notes_ids` for the to-many `notes`).
final class ImportNames {
    /// The words Sync writes in capitals inside a camelCase name.
    static let acronyms: Set<String> = ["id", "pdf", "url", "png", "jpg", "uri", "json", "xml"]

    let mapping: [String: String]
    let snakeCase: Bool
    let rootEntity: String
    private var cache: [String: [String: ImportTarget?]] = [:]

    init(mapping: [String: String], snakeCase: Bool, rootEntity: String) {
        self.mapping = mapping
        self.snakeCase = snakeCase
        self.rootEntity = rootEntity
    }

    /// What `key` names on `entity`, or `nil` for a key the import ignores.
    func target(_ key: String, in entity: EntitySchema) -> ImportTarget? {
        if let known = cache[entity.name]?[key] { return known }
        let found = resolve(key, in: entity)
        cache[entity.name, default: [:]][key] = .some(found)
        return found
    }

    private func resolve(_ key: String, in entity: EntitySchema) -> ImportTarget? {
        if let mapped = mapping["\(entity.name).\(key)"] ?? (entity.name == rootEntity ? mapping[key] : nil) {
            return named(mapped, in: entity)
        }
        for candidate in [key] + reserved(key, entity) + (snakeCase ? Self.camelCaseForms(key) : []) {
            if let target = named(candidate, in: entity) { return target }
        }
        // The key forms of relationships: `company_id`, `companyID`; `notes_ids`, `notesIDs`.
        for (suffixes, cardinality) in [(["_ids", "IDs", "Ids"], Relationship.Cardinality.toMany),
                                        (["_id", "ID", "Id"], .toOne)] {
            for suffix in suffixes where key.hasSuffix(suffix) && key.count > suffix.count {
                let base = String(key.dropLast(suffix.count))
                for candidate in [base] + (snakeCase ? Self.camelCaseForms(base) : []) {
                    if let relationship = entity.relationship(named: candidate), relationship.cardinality == cardinality {
                        return cardinality == .toOne ? .toOne(relationship) : .toMany(relationship)
                    }
                }
            }
        }
        return nil
    }

    private func named(_ name: String, in entity: EntitySchema) -> ImportTarget? {
        if let relationship = entity.relationship(named: name) {
            return relationship.cardinality == .toOne ? .toOne(relationship) : .toMany(relationship)
        }
        return entity.attribute(named: name).map(ImportTarget.attribute)
    }

    /// Sync's reserved names: `id` is `remoteID`; `description`, `type`, `hash` and `class` get
    /// the entity's name in front (`userDescription`).
    private func reserved(_ key: String, _ entity: EntitySchema) -> [String] {
        switch key {
        case "id": return ["remoteID"]
        case "description", "type", "hash", "class":
            let prefix = entity.name.prefix(1).lowercased() + entity.name.dropFirst()
            return [prefix + key.prefix(1).uppercased() + key.dropFirst()]
        default: return []
        }
    }

    /// `user_id` as `userID` (acronyms in capitals) and `userId`; nothing for a key without `_`.
    static func camelCaseForms(_ key: String) -> [String] {
        guard key.contains("_") else { return [] }
        let parts = key.split(separator: "_", omittingEmptySubsequences: true).map(String.init)
        guard let first = parts.first else { return [] }
        let rest = parts.dropFirst()
        let plain = first + rest.map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
        let upper = first + rest.map {
            Self.acronyms.contains($0.lowercased()) ? $0.uppercased() : $0.prefix(1).uppercased() + $0.dropFirst()
        }.joined()
        return upper == plain ? [plain] : [upper, plain]
    }

    /// The snake_case form of a camelCase name, acronyms kept whole: `userID` is `user_id`,
    /// `avatarURL` is `avatar_url`, `firstName` is `first_name`.
    static func snakeCase(_ name: String) -> String {
        let characters = Array(name)
        var out = ""
        for (index, character) in characters.enumerated() {
            if character.isUppercase, index > 0 {
                let previousIsLower = characters[index - 1].isLowercase || characters[index - 1].isNumber
                let nextIsLower = index + 1 < characters.count && characters[index + 1].isLowercase
                if previousIsLower || (nextIsLower && characters[index - 1].isUppercase) { out += "_" }
            }
            out += character.lowercased()
        }
        return out
    }
}

/// Dates as Sync reads them.
enum ImportDates {
    /// A date in any of the ISO 8601 forms APIs send: `2014-01-02` (midnight UTC),
    /// `2014-02-14T04:30:10+00:00`, `2014-01-01T00:00:00.000Z`, `2014-01-01 00:00:00+0000`,
    /// without a zone (UTC), with a fraction of any length (kept to the microsecond); or a Unix
    /// timestamp given as text.
    static func parse(_ text: String, epoch: JSONImport.EpochUnit) -> Timestamp? {
        if let strict = ValueConversion.parseISO8601Text(text) { return strict }
        if text.first.map({ $0.isNumber || $0 == "-" }) == true, let number = Double(text) {
            return timestamp(number, epoch: epoch)
        }
        var bytes = Array(text.utf8)
        func isDigit(_ i: Int) -> Bool { i < bytes.count && bytes[i] >= 0x30 && bytes[i] <= 0x39 }
        guard bytes.count >= 10, (0..<4).allSatisfy(isDigit), bytes[4] == 0x2D, bytes[7] == 0x2D else { return nil }
        if bytes.count == 10 { bytes += Array("T00:00:00".utf8) }
        // HH:MM without seconds.
        if bytes.count >= 16, bytes.count == 16 || !isDigit(16) && bytes[16] != 0x3A {
            bytes.insert(contentsOf: Array(":00".utf8), at: 16)
        }
        guard bytes.count >= 19 else { return nil }
        var i = 19
        var out = Array(bytes[0..<19])
        if i < bytes.count, bytes[i] == 0x2E {
            var fraction: [UInt8] = []
            i += 1
            while isDigit(i) {
                if fraction.count < 6 { fraction.append(bytes[i]) }
                i += 1
            }
            guard !fraction.isEmpty else { return nil }
            out += [0x2E] + fraction
        }
        let zone = Array(bytes[i...])
        switch zone.count {
        case 0: out.append(0x5A)
        case 1 where zone[0] == 0x5A: out.append(0x5A)
        case 3 where zone[0] == 0x2B || zone[0] == 0x2D: out += zone + Array(":00".utf8)
        case 5 where zone[0] == 0x2B || zone[0] == 0x2D: out += zone[0..<3] + [0x3A] + zone[3..<5]
        case 6: out += zone
        default: return nil
        }
        return ValueConversion.parseISO8601Text(String(decoding: out, as: UTF8.self))
    }

    /// A Unix timestamp: in seconds or milliseconds as `epoch` says; `automatic` reads a number
    /// of magnitude 100,000,000,000 or more (past the year 5138 in seconds) as milliseconds.
    static func timestamp(_ number: Double, epoch: JSONImport.EpochUnit) -> Timestamp? {
        guard number.isFinite else { return nil }
        let milliseconds = epoch == .milliseconds || (epoch == .automatic && abs(number) >= 1e11)
        let micros = (milliseconds ? number * 1_000 : number * 1_000_000).rounded()
        return Int64(exactly: micros).map(Timestamp.init(microsecondsSinceEpoch:))
    }
}
