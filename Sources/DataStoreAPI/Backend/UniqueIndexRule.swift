/// The unique-index rule, the same on every backend: two items may not hold equal values (as
/// predicates compare them, so `-0.0` equals `0.0`) in the attributes of a unique index; an item
/// with a null in one of them never conflicts (as in SQL).
@_spi(Backend) public enum UniqueIndexRule {
    /// The values of `index` in `record`, with `-0.0` as `0.0`; `nil` when one is null.
    public static func tuple(_ record: Record, _ index: Index) -> [Value]? {
        var tuple: [Value] = []
        for name in index.attributes {
            switch record[name] {
            case .null: return nil
            case .double(let d) where d == 0: tuple.append(.double(0))
            case let value: tuple.append(value)
            }
        }
        return tuple
    }

    /// Checks every unique index of `entity` for `record`, stored under `key`.
    ///
    /// - Parameter holders: the items an engine's lookup finds for an index's values; a
    ///   superset is fine (long values are looked up by a prefix), the rule compares.
    /// - Throws: `uniqueViolation` naming the index and values, or what `holders` throws.
    public static func check(
        _ record: Record, key: PrimaryKey, in entity: EntitySchema,
        holders: (Index, [Value]) throws -> [Record]
    ) throws {
        for index in entity.indexes where index.isUnique {
            guard let values = tuple(record, index) else { continue }
            let clash = try holders(index, values).contains { other in
                other[entity.primaryKey] != key.value
                    && zip(index.attributes, values).allSatisfy { Value.compareCanonical(other[$0], $1) == 0 }
            }
            if clash { throw StoreError.uniqueViolation(entity, index, record) }
        }
    }
}
