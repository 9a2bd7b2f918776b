/// The limits every backend enforces alike, checked in the value layer before a backend
/// sees the data, so that anything one backend accepts every backend accepts.
public enum Limits {
    /// Entity, attribute and index names: 1 to 64 ASCII letters, digits and underscores,
    /// not starting with a digit and not starting with `_ds` (reserved for the package).
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
}
