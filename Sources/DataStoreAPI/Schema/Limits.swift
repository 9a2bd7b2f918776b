/// The limits every backend enforces alike, checked in the value layer before a backend
/// sees the data, so that anything one backend accepts every backend accepts.
public enum Limits {
    /// Entity, attribute and index names: 1 to 64 ASCII letters, digits and underscores, not
    /// starting with a digit, `_ds` or `sqlite_` in any letter case (reserved for the package and
    /// for SQLite). Names compare without ASCII case: two entities of a schema, two attributes
    /// of an entity or two indexes of an entity may not differ only by case.
    public static let maxNameLength = 64
    /// A string primary key holds at most 255 UTF-8 bytes (LMDB keys hold at most 511 bytes,
    /// and index keys carry the primary key after the indexed values).
    public static let maxStringKeyBytes = 255
    /// A string or bytes value holds at most 16 MiB.
    public static let maxValueBytes = 16 * 1024 * 1024
    /// An entity has at most 64 attributes, the primary key included.
    public static let maxAttributes = 64
    /// A schema has at most 64 entities.
    public static let maxEntities = 64
    /// An entity has at most 16 indexes, each over at most 8 attributes.
    public static let maxIndexesPerEntity = 16
    /// See ``maxIndexesPerEntity``.
    public static let maxAttributesPerIndex = 8
    /// A filter nests at most 64 levels deep (each `and`, `or` and `not` is a level).
    public static let maxFilterDepth = 64
    /// A filter holds at most 10,000 terms, counting every comparison and every value of an
    /// `in` list.
    public static let maxFilterTerms = 10_000
    /// A request sorts by at most 64 keys.
    public static let maxSortKeys = 64
    /// The attribute in which an encrypted store's engine keeps the sealed values of an item.
    @_spi(Backend) public static let sealedAttribute = "_ds_sealed"
    /// The most bytes the sealed values of one item hold: every value of an entity at its limit,
    /// each with its field's tag and length, and the 29 bytes of the seal.
    @_spi(Backend) public static let maxSealedBytes = maxAttributes * (maxValueBytes + 10) + 29
}
