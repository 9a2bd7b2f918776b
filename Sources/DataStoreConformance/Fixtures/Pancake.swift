import DataStoreAPI
import Foundation

/// The typed model the suite stores: one property of each kind, optionals included.
struct Pancake: DataObject, Equatable {
    static let entityName = "Pancake"
    static let primaryKey = "id"
    static let defaultSort = [SortKey.descending("rating"), .ascending("flavor")]

    enum Size: String, Codable { case small, large }

    var id: UUID
    var flavor: String
    var rating: Int
    var weight: Double?
    var crispy: Bool
    var bakedAt: Date
    var photo: Data?
    var size: Size

    static let schema = Schema(version: 1, entities: [
        EntitySchema("Pancake", primaryKey: "id", attributes: [
            Attribute("id", .uuid), Attribute("flavor", .string), Attribute("rating", .int),
            Attribute("weight", .double, optional: true), Attribute("crispy", .bool), Attribute("bakedAt", .date),
            Attribute("photo", .bytes, optional: true), Attribute("size", .string),
        ], indexes: [Index("byFlavor", on: ["flavor"])]),
    ])

    static func sample(_ i: Int) -> Pancake {
        Pancake(id: UUID(), flavor: ["blueberry", "plain", "banana"][i % 3], rating: i % 5,
                weight: i % 2 == 0 ? Double(i) / 4 : nil, crispy: i % 2 == 1,
                bakedAt: Date(timeIntervalSince1970: 1_700_000_000 + Double(i) * 0.000_001),
                photo: i % 3 == 0 ? Data([UInt8(i), 0]) : nil, size: i % 2 == 0 ? .small : .large)
    }
}

/// A model whose schema is derived from its Codable conformance.
struct Topping: DataObject, Equatable {
    static let entityName = "Topping"
    static let primaryKey = "name"
    var name: String
    var grams: Int64
    var vegan: Bool?
    var addedAt: Date?
    var tag: UUID
    var bytes: [UInt8]
}

/// ``Pancake`` read and written by hand (``RowCodable``), for comparing with `Codable`.
struct HandPancake: RowCodable, Equatable {
    static let entityName = "Pancake"
    static let primaryKey = "id"
    static let defaultSort = Pancake.defaultSort

    var pancake: Pancake

    init(_ pancake: Pancake) { self.pancake = pancake }

    init(row: borrowing Row) throws {
        let weight = try row.isNull("weight") ? nil : try row.double("weight")
        let photo = try row.isNull("photo") ? nil : Data(try row.bytes("photo"))
        guard let size = Pancake.Size(rawValue: try row.string("size")) else {
            throw StoreError(.typeMismatch, "attribute 'size' of 'Pancake' holds \(try row.string("size"))")
        }
        pancake = Pancake(id: try row.uuid("id"), flavor: try row.string("flavor"), rating: Int(try row.int("rating")),
                          weight: weight, crispy: try row.bool("crispy"), bakedAt: try row.date("bakedAt").date,
                          photo: photo, size: size)
    }

    func record() throws -> Record {
        [
            "id": .uuid(pancake.id), "flavor": .string(pancake.flavor), "rating": .int(Int64(pancake.rating)),
            "weight": pancake.weight.map { .double($0) } ?? .null, "crispy": .bool(pancake.crispy),
            "bakedAt": .date(try Timestamp(pancake.bakedAt)), "photo": pancake.photo.map { .bytes(Array($0)) } ?? .null,
            "size": .string(pancake.size.rawValue),
        ]
    }

    // The same type, through Codable, for the schema (the model's own is `Pancake`'s).
    init(from decoder: any Decoder) throws { pancake = try Pancake(from: decoder) }
    func encode(to encoder: any Encoder) throws { try pancake.encode(to: encoder) }
}
