import Foundation

/// How an entity of an encrypted store is kept by the engine under it: the primary key, every
/// attribute an index covers and the positions of ordered relationships stay in the clear (so that the engine finds items by key, answers
/// indexed filters and enforces unique indexes and references), and every other value is sealed
/// into one `bytes` attribute, ``column``, by ``StoreCipher`` with the store's identity, the
/// entity's name and the item's key as associated data.
///
/// The physical entity has the clear attributes in the entity's order, as the entity declares
/// them, then ``column``; it keeps the entity's indexes and relationships. A schema step gives
/// the engine a rewrite of every item (each opened, changed and sealed again), never a change it
/// makes without the items.
struct SealedEntity {
    /// The sealed values' attribute (reserved: no schema may name an attribute so).
    static let column = Limits.sealedAttribute

    let logical: EntitySchema
    let physical: EntitySchema
    /// For each logical slot: the physical slot of a clear value, or -1 - i for the i-th sealed one.
    private let places: [Int]
    /// The logical slots of the sealed values, in order.
    private let sealedSlots: [Int]
    private let sealedTypes: [ValueType]
    /// For each physical slot but the last: the logical slot it holds.
    private let clearSlots: [Int]
    /// The associated data's start: the store's identity, `r`, the entity's name, a zero byte.
    private let aadPrefix: [UInt8]
    /// The primary key's physical slot.
    private let keySlot: Int

    init(_ logical: EntitySchema, storeID: [UInt8]) {
        self.logical = logical
        // The positions of an ordered one-to-many's items, kept by the destination's to-one
        // (`<to-one>_position`), stay in the clear too: the store resolves them as it resolves
        // relationships, and orders related items by them.
        let positions = logical.relationships.filter { $0.cardinality == .toOne }.map { "\($0.name)_position" }
        let indexed = Set(logical.indexes.flatMap(\.attributes) + positions)
        var attributes: [Attribute] = []
        var places: [Int] = []
        var sealedSlots: [Int] = []
        var clearSlots: [Int] = []
        for (slot, attribute) in logical.attributes.enumerated() {
            if attribute.name == logical.primaryKey || indexed.contains(attribute.name) {
                places.append(attributes.count)
                clearSlots.append(slot)
                attributes.append(attribute)
            } else {
                places.append(-1 - sealedSlots.count)
                sealedSlots.append(slot)
            }
        }
        attributes.append(Attribute(Self.column, .bytes))
        physical = EntitySchema(logical.name, primaryKey: logical.primaryKey, attributes: attributes,
                                indexes: logical.indexes, relationships: logical.relationships)
        self.places = places
        self.sealedSlots = sealedSlots
        sealedTypes = sealedSlots.map { logical.attributes[$0].type }
        self.clearSlots = clearSlots
        aadPrefix = storeID + [UInt8(ascii: "r")] + Array(logical.name.utf8) + [0]
        keySlot = logical.layout.slot(of: logical.primaryKey).map { places[$0] } ?? 0
    }

    /// The names of the attributes kept in the clear, in order.
    var clearAttributes: [String] { clearSlots.map { logical.attributes[$0].name } }

    /// Whether every attribute `names` lists is kept in the clear.
    func isClear(_ names: some Sequence<String>) -> Bool {
        names.allSatisfy { name in
            guard let slot = logical.layout.slot(of: name) else { return false }
            return places[slot] >= 0
        }
    }

    private func aad(_ key: PrimaryKey) -> [UInt8] { aadPrefix + key.bytes }

    /// The engine's record for a logical record (normalized, complete) of the item `key`.
    func seal(_ record: Record, key: PrimaryKey, cipher: StoreCipher) throws -> Record {
        let values = record.values(in: logical.layout)
        var size = 0
        for slot in sealedSlots { size += FieldWriter.size(of: values[slot]) }
        var plaintext = [UInt8](repeating: 0, count: size)
        plaintext.withUnsafeMutableBytes { out in
            var at = 0
            for slot in sealedSlots { at += FieldWriter.write(values[slot], at: out.baseAddress! + at) }
        }
        let sealed = try cipher.seal(plaintext, aad: aad(key))
        var physicalValues: [Value] = []
        physicalValues.reserveCapacity(clearSlots.count + 1)
        for slot in clearSlots { physicalValues.append(values[slot]) }
        physicalValues.append(.bytes(sealed))
        return Record(layout: physical.layout, values: physicalValues)
    }

    /// The logical record of an engine's record.
    /// - Throws: `corrupt` naming the item when its sealed values do not open or do not read.
    func open(_ record: Record, cipher: StoreCipher) throws -> Record {
        // A record of the physical layout is read by slot; any other (an engine that returns
        // records it was given) by name.
        let byLayout = record.storedLayout == physical.layout
        func value(_ slot: Int) -> Value {
            byLayout ? record.value(atSlot: slot) : record.value(ifPresent: physical.attributes[slot].name) ?? .null
        }
        let key = try PrimaryKey(value(keySlot))
        let aad = aad(key)
        // A record the engine returned compact is opened where it holds the sealed bytes.
        var opened: Result<[UInt8]?, StoreError>?
        let sealedSlot = clearSlots.count
        _ = record.forEachStoredField(of: physical.layout) { slot, field in
            guard slot == sealedSlot, field.type == .bytes else { return }
            opened = aad.withUnsafeBytes { a in Result { () throws(StoreError) in try cipher.open(field.bytes, aad: a) } }
        }
        if opened == nil, case .bytes(let sealed) = value(sealedSlot) {
            opened = sealed.withUnsafeBytes { s in
                aad.withUnsafeBytes { a in Result { () throws(StoreError) in try cipher.open(s, aad: a) } }
            }
        }
        guard let opened else { throw damage(key, "its sealed values are missing") }
        guard let plaintext = try opened.get() else {
            throw damage(key, "its sealed values do not open with the store's key: they were changed after they "
                + "were written, or moved from another item or store")
        }
        let sealedValues = try plaintext.withUnsafeBytes { opened in
            try withUnsafeTemporaryAllocation(of: Int.self, capacity: sealedSlots.count + 1) { bounds in
                guard Self.walk(opened, types: sealedTypes, bounds: bounds) else {
                    throw damage(key, "its sealed values open but do not read as its attributes")
                }
                return (0..<sealedSlots.count).map {
                    CompactRow.value(of: UnsafeRawBufferPointer(rebasing: opened[bounds[$0]..<bounds[$0 + 1]]))
                }
            }
        }
        var values: [Value] = []
        values.reserveCapacity(places.count)
        for place in places {
            values.append(place >= 0 ? value(place) : sealedValues[-1 - place])
        }
        return Record(layout: logical.layout, values: values)
    }

    /// ``open(_:cipher:)`` for a record the engine returned compact (its fields as stored): the
    /// logical record is made compact too, in `arena`, from the clear fields and the opened
    /// ones as they are, without building a value (a value is decoded when it is read).
    /// - Returns: `nil` for a record that is not compact (then ``open(_:cipher:)`` it).
    func openCompact(_ record: Record, cipher: StoreCipher, arena: inout CompactArena) throws -> Record? {
        let clearCount = clearSlots.count
        // The fields point into the record's chunk, which the record keeps alive.
        return try withExtendedLifetime(record) { try withUnsafeTemporaryAllocation(of: RowField.self, capacity: clearCount + 1) { fields -> Record? in
            guard record.forEachStoredField(of: physical.layout, { slot, field in fields[slot] = field }) else {
                return nil
            }
            guard let keyValue = Self.keyValue(fields[keySlot]) else { return try open(record, cipher: cipher) }
            let key = try PrimaryKey(keyValue)
            let sealed = fields[clearCount]
            guard sealed.type == .bytes else { throw damage(key, "its sealed values are missing") }
            let aad = aad(key)
            guard let plaintext = try aad.withUnsafeBytes({ a throws(StoreError) in try cipher.open(sealed.bytes, aad: a) })
            else {
                throw damage(key, "its sealed values do not open with the store's key: they were changed after they "
                    + "were written, or moved from another item or store")
            }
            return try plaintext.withUnsafeBytes { opened -> Record? in
                try withUnsafeTemporaryAllocation(of: Int.self, capacity: sealedSlots.count + 1) { bounds -> Record? in
                    guard Self.walk(opened, types: sealedTypes, bounds: bounds) else {
                        throw damage(key, "its sealed values open but do not read as its attributes")
                    }
                    var size = opened.count
                    for i in 0..<clearCount { size += Self.size(of: fields[i]) }
                    return arena.record(layout: logical.layout, size: size) { base, offsets in
                        var at = 0
                        for place in places {
                            offsets.append(at)
                            if place >= 0 {
                                at += Self.write(fields[place], at: base + at)
                            } else {
                                let i = -1 - place
                                let field = UnsafeRawBufferPointer(rebasing: opened[bounds[i]..<bounds[i + 1]])
                                (base + at).copyMemory(from: field.baseAddress!, byteCount: field.count)
                                at += field.count
                            }
                        }
                        offsets.append(at)
                        return true
                    }
                }
            }
        } }
    }

    private static func keyValue(_ field: RowField) -> Value? {
        switch field.type {
        case .int, .string, .uuid: return field.value
        default: return nil
        }
    }

    private static func tag(_ type: ValueType?, bits: UInt64) -> FieldTag {
        switch type {
        case nil: return .null
        case .bool: return bits != 0 ? .trueValue : .falseValue
        case .int: return .int
        case .double: return .double
        case .date: return .date
        case .string: return .string
        case .bytes: return .bytes
        case .uuid: return .uuid
        }
    }

    private static func size(of field: RowField) -> Int {
        switch field.type {
        case nil, .bool: return 1
        case .int, .double, .date: return FieldWriter.numberSize
        case .string, .bytes: return FieldWriter.size(ofBytes: field.bytes.count)
        case .uuid: return 17
        }
    }

    private static func write(_ field: RowField, at base: UnsafeMutableRawPointer) -> Int {
        let tag = tag(field.type, bits: field.bits)
        switch field.type {
        case nil, .bool: return FieldWriter.write(tag: tag, at: base)
        case .int, .double, .date: return FieldWriter.write(tag, bits: field.bits, at: base)
        case .string, .bytes, .uuid: return FieldWriter.write(tag, bytes: field.bytes, at: base)
        }
    }

    /// Checks that `bytes` are exactly one field of each type (null allowed), as ``FieldWriter``
    /// writes them (tags, lengths, UTF-8), and writes where each starts, and where the last ends,
    /// into `bounds`.
    static func walk(_ bytes: UnsafeRawBufferPointer, types: [ValueType],
                     bounds: UnsafeMutableBufferPointer<Int>) -> Bool {
        var at = 0
        for (i, type) in types.enumerated() {
            bounds[i] = at
            guard at < bytes.count, let tag = FieldTag(rawValue: bytes[at]) else { return false }
            at += 1
            switch (tag, type) {
            case (.null, _), (.falseValue, .bool), (.trueValue, .bool): break
            case (.int, .int), (.double, .double), (.date, .date):
                guard bytes.count - at >= 8 else { return false }
                at += 8
            case (.uuid, .uuid):
                guard bytes.count - at >= 16 else { return false }
                at += 16
            case (.string, .string), (.bytes, .bytes):
                var length = 0
                var shift = 0
                while true {
                    guard at < bytes.count, shift < 63 else { return false }
                    let byte = bytes[at]
                    at += 1
                    length |= Int(byte & 0x7F) << shift
                    if byte & 0x80 == 0 { break }
                    shift += 7
                }
                guard length >= 0, length <= bytes.count - at else { return false }
                if tag == .string, !UTF8Text.isValid(UnsafeRawBufferPointer(rebasing: bytes[at..<(at + length)])) {
                    return false
                }
                at += length
            default: return false
            }
        }
        bounds[types.count] = at
        return at == bytes.count
    }

    private func damage(_ key: PrimaryKey, _ what: String) -> StoreError {
        StoreError(.corrupt, "\(logical.name)[\(key)]: \(what)")
    }
}

extension Schema {
    /// The schema an encrypted store's engine holds: each entity as ``SealedEntity`` keeps it.
    func sealedPhysical() -> Schema {
        Schema(version: version, entities: entities.map { SealedEntity($0, storeID: []).physical })
    }
}
