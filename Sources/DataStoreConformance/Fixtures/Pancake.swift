@_spi(Backend) import DataStoreAPI
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

    /// The names of ``writeStoredFields(to:)``'s values: the entity's, in its order.
    static let storedModelLayout: StoredModelLayout? = StoredModelLayout(Pancake.schema.entities[0].attributes.map(\.name))

    /// The values of ``record()``, one at a time in the entity's order, as `@StoredModel` writes
    /// them (``RowValue/appendStored(to:)``: the string, int, double and bytes without a value
    /// around them).
    func writeStoredFields<Sink: StoredFieldSink>(to sink: inout Sink) throws {
        try pancake.id.appendStored(to: &sink)
        try pancake.flavor.appendStored(to: &sink)
        try pancake.rating.appendStored(to: &sink)
        try pancake.weight.appendStored(to: &sink)
        try pancake.crispy.appendStored(to: &sink)
        try pancake.bakedAt.appendStored(to: &sink)
        try pancake.photo.appendStored(to: &sink)
        try pancake.size.rawValue.appendStored(to: &sink)
    }

    // The same type, through Codable, for the schema (the model's own is `Pancake`'s).
    init(from decoder: any Decoder) throws { pancake = try Pancake(from: decoder) }
    func encode(to encoder: any Encoder) throws { try pancake.encode(to: encoder) }
}

/// A model that hands its values over one at a time (``RowCodable/writeStoredFields(to:)``), or
/// the values it is told to (its record then holds the same, under the layout's names and
/// `extra`): for the cases where a store cannot take them as they are (a value to convert or
/// refuse, one value too few or too many).
struct Blini: RowCodable, Equatable {
    static let entityName = "Blini"
    static let primaryKey = "id"
    static let schema = Schema(entities: [
        EntitySchema("Blini", primaryKey: "id", attributes: [
            Attribute("id", .int), Attribute("name", .string), Attribute("weight", .double),
            Attribute("note", .string, optional: true),
        ], indexes: [Index("Blini_name", on: ["name"], unique: true)]),
    ])
    static let storedModelLayout: StoredModelLayout? = StoredModelLayout(["id", "name", "weight", "note"])

    var id: Int64
    var name: String
    var weight: Double
    var note: String?
    /// What ``writeStoredFields(to:)`` hands over in place of the values (`nil`: the values).
    var handed: [Value]? = nil
    /// Code ``writeStoredFields(to:)`` runs after handing over the id and the name, before the
    /// rest (and ``record()`` before it builds the record): a model's own code writing to the
    /// store while its values are being handed over.
    var whileHandingOver: WhileHandingOver? = nil

    init(id: Int64, name: String, weight: Double, note: String? = nil, handed: [Value]? = nil,
         whileHandingOver: WhileHandingOver? = nil) {
        (self.id, self.name, self.weight, self.note, self.handed) = (id, name, weight, note, handed)
        self.whileHandingOver = whileHandingOver
    }

    /// A block for ``whileHandingOver`` (a class, so that the model stays `Sendable`: the suite
    /// runs it on the thread of the write block that inserts the model).
    final class WhileHandingOver: @unchecked Sendable {
        let body: () throws -> Void
        init(_ body: @escaping () throws -> Void) { self.body = body }
    }

    init(row: borrowing Row) throws {
        id = try row.int("id")
        name = try row.string("name")
        weight = try row.double("weight")
        note = try row.isNull("note") ? nil : try row.string("note")
    }

    func record() throws -> Record {
        guard let handed else {
            // A store that takes the model's record, not its values one at a time, runs the
            // block here. (A store that takes the values falls back to the record when one does
            // not fit as it is, and then runs the block again: the suite's inserts with a block
            // hand over values that fit.)
            try whileHandingOver?.body()
            return ["id": .int(id), "name": .string(name), "weight": .double(weight), "note": note.map { .string($0) } ?? .null]
        }
        return Record(pairs: Array(zip(["id", "name", "weight", "note", "extra"], handed)))
    }

    func writeStoredFields<Sink: StoredFieldSink>(to sink: inout Sink) throws {
        guard let handed else {
            // As `@StoredModel` writes them: the int, string and double without a value around them.
            try id.appendStored(to: &sink)
            try name.appendStored(to: &sink)
            try whileHandingOver?.body()
            try weight.appendStored(to: &sink)
            try note.appendStored(to: &sink)
            return
        }
        for value in handed { try sink.append(value) }
    }

    static func == (a: Blini, b: Blini) -> Bool {
        a.id == b.id && a.name == b.name && a.weight.bitPattern == b.weight.bitPattern && a.note == b.note
    }

    // Codable for the protocol; the schema is declared above.
    enum CodingKeys: String, CodingKey { case id, name, weight, note }
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(Int64.self, forKey: .id)
        name = try container.decode(String.self, forKey: .name)
        weight = try container.decode(Double.self, forKey: .weight)
        note = try container.decodeIfPresent(String.self, forKey: .note)
    }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(name, forKey: .name)
        try container.encode(weight, forKey: .weight)
        try container.encodeIfPresent(note, forKey: .note)
    }
}
