@_exported import DataStoreAPI

// The macro and its marks need the package's Models trait (on by default; Package.swift).
#if Models

/// Declares a struct as a model of the store: the macro writes its ``RowCodable`` conformance
/// from the struct's stored properties, so that the model is declared once.
///
/// ```swift
/// @StoredModel
/// struct Note {
///     @StoredKey var id: UUID
///     @StoredIndex var title: String
///     var body: String?
///     var rating: Int = 0
/// }
/// ```
///
/// What it writes, in an extension:
/// - ``DataObject/entityName`` (the struct's name, or the one given) and
///   ``DataObject/primaryKey`` (the property marked ``StoredKey()``, or else the one named `id`);
/// - ``DataObject/relationships``: the typed relationships its static properties declare
///   (`static let notes = toMany("notes", Note.self, inverse: "author")`, `ToOne<…>`), unless
///   the struct lists its relationships itself; a to-one's key is the stored property of the
///   same name (`var author: Int?`);
/// - ``DataObject/entitySchema()``: an attribute per stored property, of the type its Swift
///   type holds (``RowValue``), optional when the property is, with the property's initial value
///   as its default (what an upgrade that adds it gives existing items); an index per ``StoredIndex()``
///   and a unique index per ``StoredUnique()``; the relationships;
/// - ``RowCodable/init(row:)`` and ``RowCodable/record()``: each property read from its field
///   and written to its attribute directly, without `Codable`.
///
/// The struct stays `Codable` (the conformance is synthesized as for any struct), and both paths
/// give the same values. Static and computed properties are not stored. A property the store
/// cannot hold in one attribute (an array other than `[UInt8]`, a dictionary, a set, a tuple, a
/// closure) is a compile-time error, as is a model without a primary key; an enum backed by a
/// stored type is held as its raw value once it is declared ``RowValue``
/// (`extension Mood: RowValue {}`).
///
/// The name differs from SwiftData's `@Model`, so that a file may import both.
@attached(extension, conformances: RowCodable,
          names: named(entityName), named(primaryKey), named(relationships), named(entitySchema), named(init(row:)),
          named(record), named(_storedModelLayout), named(storedModelLayout), named(writeStoredFields),
          named(readsStoredFields), named(init(storedFields:)))
public macro StoredModel(_ entityName: String? = nil) = #externalMacro(module: "DataStoreMacros", type: "StoredModelMacro")

/// Marks the property that holds a ``StoredModel(_:)``'s primary key (not optional).
@attached(peer)
public macro StoredKey() = #externalMacro(module: "DataStoreMacros", type: "StoredPropertyMarker")

/// Gives a ``StoredModel(_:)``'s property an index of its own, named `Entity_property`.
@attached(peer)
public macro StoredIndex() = #externalMacro(module: "DataStoreMacros", type: "StoredPropertyMarker")

/// Gives a ``StoredModel(_:)``'s property a unique index of its own, named `Entity_property`:
/// two items with the same value are refused with `uniqueViolation`.
@attached(peer)
public macro StoredUnique() = #externalMacro(module: "DataStoreMacros", type: "StoredPropertyMarker")
#endif
