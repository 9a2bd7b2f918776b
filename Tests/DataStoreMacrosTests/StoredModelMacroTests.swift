// The macro exists only with the package's trait Models (on by default, and turned on by
// ExampleServer, which the test command builds with): without it there is nothing to test here.
#if Models
import DataStoreMacroExpansion
import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacrosGenericTestSupport
import Testing

private let macros: [String: MacroSpec] = [
    "StoredModel": MacroSpec(type: StoredModelMacro.self, conformances: ["RowCodable"]),
    "StoredKey": MacroSpec(type: StoredPropertyMarker.self),
    "StoredIndex": MacroSpec(type: StoredPropertyMarker.self),
    "StoredUnique": MacroSpec(type: StoredPropertyMarker.self),
]

/// `assertMacroExpansion` reporting to Swift Testing.
private func expand(_ source: String, _ expanded: String, diagnostics: [DiagnosticSpec] = [],
                    fixedSource: String? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
    assertMacroExpansion(source, expandedSource: expanded, diagnostics: diagnostics, macroSpecs: macros,
                         applyFixIts: fixedSource == nil ? nil : diagnostics.flatMap { $0.fixIts.map(\.message) },
                         fixedSource: fixedSource, indentationWidth: .spaces(4)) { failure in
        Issue.record(Comment(rawValue: failure.message), sourceLocation: sourceLocation)
    }
}

@Test func aModelExpandsToItsRowCodableConformance() {
    expand("""
        @StoredModel
        public struct Note {
            @StoredKey var id: UUID
            @StoredIndex var title: String
            var body: String?, stars: Int
            @StoredUnique var slug: String
            static let defaultSort = [SortKey.ascending("title")]
            var summary: String { String(body?.prefix(10) ?? "") }
            var views: Int = 0 { didSet { } }
        }
        """, """
        public struct Note {
            var id: UUID
            var title: String
            var body: String?, stars: Int
            var slug: String
            static let defaultSort = [SortKey.ascending("title")]
            var summary: String { String(body?.prefix(10) ?? "") }
            var views: Int = 0 { didSet { } }
        }

        extension Note: DataStoreAPI.RowCodable {
            public static var entityName: String {
                "Note"
            }
            public static var primaryKey: String {
                "id"
            }
            public static func entitySchema() throws -> DataStoreAPI.EntitySchema {
                DataStoreAPI.EntitySchema(
                    "Note", primaryKey: "id",
                    attributes: [DataStoreAPI.StoredModelSupport.attribute("id", \\Note.id), DataStoreAPI.StoredModelSupport.attribute("title", \\Note.title), DataStoreAPI.StoredModelSupport.attribute("body", \\Note.body), DataStoreAPI.StoredModelSupport.attribute("stars", \\Note.stars), DataStoreAPI.StoredModelSupport.attribute("slug", \\Note.slug), try DataStoreAPI.StoredModelSupport.attribute("views", \\Note.views, default: 0)],
                    indexes: [DataStoreAPI.Index("Note_title", on: ["title"]), DataStoreAPI.Index("Note_slug", on: ["slug"], unique: true)],
                    relationships: relationships)
            }
            public init(row: borrowing DataStoreAPI.Row) throws {
                let __stored0 = try DataStoreAPI.StoredModelSupport.read(row, "id", as: { (model: Self) in
                        model.id
                    })
                let __stored1 = try DataStoreAPI.StoredModelSupport.read(row, "title", as: { (model: Self) in
                        model.title
                    })
                let __stored2 = try DataStoreAPI.StoredModelSupport.read(row, "body", as: { (model: Self) in
                        model.body
                    })
                let __stored3 = try DataStoreAPI.StoredModelSupport.read(row, "stars", as: { (model: Self) in
                        model.stars
                    })
                let __stored4 = try DataStoreAPI.StoredModelSupport.read(row, "slug", as: { (model: Self) in
                        model.slug
                    })
                let __stored5 = try DataStoreAPI.StoredModelSupport.read(row, "views", as: { (model: Self) in
                        model.views
                    })
                self.id = __stored0
                self.title = __stored1
                self.body = __stored2
                self.stars = __stored3
                self.slug = __stored4
                self.views = __stored5
            }
            private static let _storedModelLayout = DataStoreAPI.StoredModelLayout(["id", "title", "body", "stars", "slug", "views"])
            public func record() throws -> DataStoreAPI.Record {
                var builder = DataStoreAPI.StoredRecordBuilder(Self._storedModelLayout)
                try builder.append(self.id)
                try builder.append(self.title)
                try builder.append(self.body)
                try builder.append(self.stars)
                try builder.append(self.slug)
                try builder.append(self.views)
                return try builder.record()
            }
            public static var storedModelLayout: DataStoreAPI.StoredModelLayout? {
                Self._storedModelLayout
            }
            public func writeStoredFields(to fields: inout DataStoreAPI.StoredFieldBuffer) throws {
                try self.id.appendStored(to: &fields)
                try self.title.appendStored(to: &fields)
                try self.body.appendStored(to: &fields)
                try self.stars.appendStored(to: &fields)
                try self.slug.appendStored(to: &fields)
                try self.views.appendStored(to: &fields)
            }
            public static var readsStoredFields: Bool {
                true
            }
            public init?(storedFields reader: inout DataStoreAPI.StoredFieldReader) {
                guard let __stored0 = DataStoreAPI.StoredModelSupport.readStored(&reader, as: { (model: Self) in
                        model.id
                    }),
                      let __stored1 = DataStoreAPI.StoredModelSupport.readStored(&reader, as: { (model: Self) in
                        model.title
                    }),
                      let __stored2 = DataStoreAPI.StoredModelSupport.readStored(&reader, as: { (model: Self) in
                        model.body
                    }),
                      let __stored3 = DataStoreAPI.StoredModelSupport.readStored(&reader, as: { (model: Self) in
                        model.stars
                    }),
                      let __stored4 = DataStoreAPI.StoredModelSupport.readStored(&reader, as: { (model: Self) in
                        model.slug
                    }),
                      let __stored5 = DataStoreAPI.StoredModelSupport.readStored(&reader, as: { (model: Self) in
                        model.views
                    }),
                      reader.isAtEnd else {
                    return nil
                }
                self.id = __stored0
                self.title = __stored1
                self.body = __stored2
                self.stars = __stored3
                self.slug = __stored4
                self.views = __stored5
            }
        }
        """)
}

@Test func anEntityNameAndAKeyNamedIdNeedNoMark() {
    expand("""
        @StoredModel("notes")
        struct Note {
            var id: Int64
        }
        """, """
        struct Note {
            var id: Int64
        }

        extension Note: DataStoreAPI.RowCodable {
            static var entityName: String {
                "notes"
            }
            static var primaryKey: String {
                "id"
            }
            static func entitySchema() throws -> DataStoreAPI.EntitySchema {
                DataStoreAPI.EntitySchema(
                    "notes", primaryKey: "id",
                    attributes: [DataStoreAPI.StoredModelSupport.attribute("id", \\Note.id)],
                    indexes: [],
                    relationships: relationships)
            }
            init(row: borrowing DataStoreAPI.Row) throws {
                let __stored0 = try DataStoreAPI.StoredModelSupport.read(row, "id", as: { (model: Self) in
                        model.id
                    })
                self.id = __stored0
            }
            private static let _storedModelLayout = DataStoreAPI.StoredModelLayout(["id"])
            func record() throws -> DataStoreAPI.Record {
                var builder = DataStoreAPI.StoredRecordBuilder(Self._storedModelLayout)
                try builder.append(self.id)
                return try builder.record()
            }
            static var storedModelLayout: DataStoreAPI.StoredModelLayout? {
                Self._storedModelLayout
            }
            func writeStoredFields(to fields: inout DataStoreAPI.StoredFieldBuffer) throws {
                try self.id.appendStored(to: &fields)
            }
            static var readsStoredFields: Bool {
                true
            }
            init?(storedFields reader: inout DataStoreAPI.StoredFieldReader) {
                guard let __stored0 = DataStoreAPI.StoredModelSupport.readStored(&reader, as: { (model: Self) in
                        model.id
                    }),
                      reader.isAtEnd else {
                    return nil
                }
                self.id = __stored0
            }
        }
        """)
}

@Test func aClassIsRefused() {
    expand("""
        @StoredModel
        class Note {
            var id: Int = 0
        }
        """, """
        class Note {
            var id: Int = 0
        }
        """, diagnostics: [DiagnosticSpec(message: "@StoredModel applies to a struct", line: 1, column: 1)])
}

@Test func aModelWithoutAKeyIsRefusedWithAFixIt() {
    expand("""
        @StoredModel
        struct Note {
            var code: String
        }
        """, """
        struct Note {
            var code: String
        }
        """, diagnostics: [DiagnosticSpec(message: "@StoredModel needs a primary key: mark a property @StoredKey, or name it 'id'",
                                          line: 2, column: 8, fixIts: [FixItSpec(message: "mark 'code' @StoredKey")])],
        fixedSource: """
        @StoredModel
        struct Note {
            @StoredKey var code: String
        }
        """)
}

@Test func anOptionalKeyIsRefusedWithAFixIt() {
    expand("""
        @StoredModel
        struct Note {
            @StoredKey var code: String?
        }
        """, """
        struct Note {
            var code: String?
        }
        """, diagnostics: [DiagnosticSpec(message: "the primary key 'code' cannot be optional", line: 3, column: 26,
                                          fixIts: [FixItSpec(message: "make the key non-optional")])],
        fixedSource: """
        @StoredModel
        struct Note {
            @StoredKey var code: String
        }
        """)
}

@Test func twoKeysAreRefused() {
    expand("""
        @StoredModel
        struct Note {
            @StoredKey var a: Int
            @StoredKey var b: Int
        }
        """, """
        struct Note {
            var a: Int
            var b: Int
        }
        """, diagnostics: [DiagnosticSpec(message: "'b' is marked @StoredKey, and so is 'a'; a model has one primary key",
                                          line: 4, column: 5)])
}

@Test func typesAStoreCannotHoldAreRefused() {
    expand("""
        @StoredModel
        struct Note {
            var id: Int
            var tags: [String]
            var scores: [String: Int]
            var pair: (Int, Int)
            var big: UInt64
            var names: Set<String>
            var nested: Int??
        }
        """, """
        struct Note {
            var id: Int
            var tags: [String]
            var scores: [String: Int]
            var pair: (Int, Int)
            var big: UInt64
            var names: Set<String>
            var nested: Int??
        }
        """, diagnostics: [
            DiagnosticSpec(message: "'tags' is [String], which the store cannot hold: an attribute holds one value, not an array",
                           line: 4, column: 15),
            DiagnosticSpec(message: "'scores' is [String: Int], which the store cannot hold: an attribute holds one value, not a dictionary",
                           line: 5, column: 17),
            DiagnosticSpec(message: "'pair' is (Int, Int), which the store cannot hold: an attribute holds one value, not a tuple",
                           line: 6, column: 15),
            DiagnosticSpec(message: "'big' is UInt64, which the store cannot hold: a store's integers are 64-bit signed: use Int64",
                           line: 7, column: 14),
            DiagnosticSpec(message: "'names' is Set<String>, which the store cannot hold: an attribute holds one value, not a set",
                           line: 8, column: 16),
            DiagnosticSpec(message: "'nested' is Int??, which the store cannot hold: an optional of an optional has no stored form",
                           line: 9, column: 17),
        ])
}

@Test func aLetWithAValueIsRefusedWithAFixIt() {
    expand("""
        @StoredModel
        struct Note {
            var id: Int
            let kind: String = "note"
        }
        """, """
        struct Note {
            var id: Int
            let kind: String = "note"
        }
        """, diagnostics: [DiagnosticSpec(
            message: "'kind' is a let with a value, which a model read from a row cannot set; make it a var",
            line: 4, column: 5, fixIts: [FixItSpec(message: "make it a var")])],
        fixedSource: """
        @StoredModel
        struct Note {
            var id: Int
            var kind: String = "note"
        }
        """)
}

@Test func aPropertyWithoutATypeIsRefusedWithAFixItForALiteral() {
    expand("""
        @StoredModel
        struct Note {
            var id: Int
            var stars = 5
        }
        """, """
        struct Note {
            var id: Int
            var stars = 5
        }
        """, diagnostics: [DiagnosticSpec(
            message: "'stars' needs a type annotation: @StoredModel reads each attribute's type from it",
            line: 4, column: 9, fixIts: [FixItSpec(message: "declare it Int")])],
        fixedSource: """
        @StoredModel
        struct Note {
            var id: Int
            var stars: Int = 5
        }
        """)
}

/// A property with a value and no type of its own is not of the type written after it in its
/// group (`var title = "x", stars: Int` declares a `String`).
@Test func aValueInAGroupTakesNoTypeFromTheGroup() {
    expand("""
        @StoredModel
        struct Note {
            var id: Int
            var title = "untitled", stars: Int
        }
        """, """
        struct Note {
            var id: Int
            var title = "untitled", stars: Int
        }
        """, diagnostics: [DiagnosticSpec(
            message: "'title' needs a type annotation: @StoredModel reads each attribute's type from it",
            line: 4, column: 9, fixIts: [FixItSpec(message: "declare it String")])],
        fixedSource: """
        @StoredModel
        struct Note {
            var id: Int
            var title: String = "untitled", stars: Int
        }
        """)
}

@Test func lazyAndWrappedPropertiesAreRefused() {
    expand("""
        @StoredModel
        struct Note {
            var id: Int
            lazy var cache: Int = 0
            @Clamped var stars: Int
        }
        """, """
        struct Note {
            var id: Int
            lazy var cache: Int = 0
            @Clamped var stars: Int
        }
        """, diagnostics: [
            DiagnosticSpec(message: "'cache' is lazy; a @StoredModel property is read from its row when the model is",
                           line: 4, column: 5),
            DiagnosticSpec(message: "'stars' has the attribute @Clamped; a @StoredModel property is stored as it is, without a property wrapper",
                           line: 5, column: 5),
        ])
}

@Test func relationshipsDeclaredAsStaticPropertiesAreListed() {
    expand("""
        @StoredModel
        struct Note {
            static let author = toOne("author", Author.self, inverse: "notes")
            static let tags: ToMany<Note, Tag> = ToMany("tags", inverse: "notes")
            static let unrelated = 5
            var id: Int
            var author: Int?
        }
        """, """
        struct Note {
            static let author = toOne("author", Author.self, inverse: "notes")
            static let tags: ToMany<Note, Tag> = ToMany("tags", inverse: "notes")
            static let unrelated = 5
            var id: Int
            var author: Int?
        }

        extension Note: DataStoreAPI.RowCodable {
            static var entityName: String {
                "Note"
            }
            static var primaryKey: String {
                "id"
            }
            static var relationships: [DataStoreAPI.Relationship] {
                [Self.author.relationship, Self.tags.relationship]
            }
            static func entitySchema() throws -> DataStoreAPI.EntitySchema {
                DataStoreAPI.EntitySchema(
                    "Note", primaryKey: "id",
                    attributes: [DataStoreAPI.StoredModelSupport.attribute("id", \\Note.id), DataStoreAPI.StoredModelSupport.attribute("author", \\Note.author)],
                    indexes: [],
                    relationships: relationships)
            }
            init(row: borrowing DataStoreAPI.Row) throws {
                let __stored0 = try DataStoreAPI.StoredModelSupport.read(row, "id", as: { (model: Self) in
                        model.id
                    })
                let __stored1 = try DataStoreAPI.StoredModelSupport.read(row, "author", as: { (model: Self) in
                        model.author
                    })
                self.id = __stored0
                self.author = __stored1
            }
            private static let _storedModelLayout = DataStoreAPI.StoredModelLayout(["id", "author"])
            func record() throws -> DataStoreAPI.Record {
                var builder = DataStoreAPI.StoredRecordBuilder(Self._storedModelLayout)
                try builder.append(self.id)
                try builder.append(self.author)
                return try builder.record()
            }
            static var storedModelLayout: DataStoreAPI.StoredModelLayout? {
                Self._storedModelLayout
            }
            func writeStoredFields(to fields: inout DataStoreAPI.StoredFieldBuffer) throws {
                try self.id.appendStored(to: &fields)
                try self.author.appendStored(to: &fields)
            }
            static var readsStoredFields: Bool {
                true
            }
            init?(storedFields reader: inout DataStoreAPI.StoredFieldReader) {
                guard let __stored0 = DataStoreAPI.StoredModelSupport.readStored(&reader, as: { (model: Self) in
                        model.id
                    }),
                      let __stored1 = DataStoreAPI.StoredModelSupport.readStored(&reader, as: { (model: Self) in
                        model.author
                    }),
                      reader.isAtEnd else {
                    return nil
                }
                self.id = __stored0
                self.author = __stored1
            }
        }
        """)
}

@Test func aModelWithoutStoredPropertiesOrWithATuplePatternIsRefused() {
    expand("""
        @StoredModel
        struct Empty {
            var computed: Int { 1 }
        }
        """, """
        struct Empty {
            var computed: Int { 1 }
        }
        """, diagnostics: [DiagnosticSpec(message: "@StoredModel needs at least one stored property (its primary key)",
                                          line: 2, column: 8)])
    expand("""
        @StoredModel
        struct Point {
            var id: Int
            var (x, y): (Int, Int)
        }
        """, """
        struct Point {
            var id: Int
            var (x, y): (Int, Int)
        }
        """, diagnostics: [DiagnosticSpec(
            message: "@StoredModel reads properties declared one name at a time, not a tuple pattern", line: 4, column: 9)])
}

@Test func constantInitialValuesBecomeDefaultsAndOthersDoNot() {
    expand("""
        @StoredModel
        struct Note {
            var id: UUID = UUID()
            var stars: Int = -1
            var mood: Mood = .calm
            var title: String = "untitled \\(1)"
            var tag: String? = nil
        }
        """, """
        struct Note {
            var id: UUID = UUID()
            var stars: Int = -1
            var mood: Mood = .calm
            var title: String = "untitled \\(1)"
            var tag: String? = nil
        }

        extension Note: DataStoreAPI.RowCodable {
            static var entityName: String {
                "Note"
            }
            static var primaryKey: String {
                "id"
            }
            static func entitySchema() throws -> DataStoreAPI.EntitySchema {
                DataStoreAPI.EntitySchema(
                    "Note", primaryKey: "id",
                    attributes: [DataStoreAPI.StoredModelSupport.attribute("id", \\Note.id), try DataStoreAPI.StoredModelSupport.attribute("stars", \\Note.stars, default: -1), try DataStoreAPI.StoredModelSupport.attribute("mood", \\Note.mood, default: .calm), DataStoreAPI.StoredModelSupport.attribute("title", \\Note.title), try DataStoreAPI.StoredModelSupport.attribute("tag", \\Note.tag, default: nil)],
                    indexes: [],
                    relationships: relationships)
            }
            init(row: borrowing DataStoreAPI.Row) throws {
                let __stored0 = try DataStoreAPI.StoredModelSupport.read(row, "id", as: { (model: Self) in
                        model.id
                    })
                let __stored1 = try DataStoreAPI.StoredModelSupport.read(row, "stars", as: { (model: Self) in
                        model.stars
                    })
                let __stored2 = try DataStoreAPI.StoredModelSupport.read(row, "mood", as: { (model: Self) in
                        model.mood
                    })
                let __stored3 = try DataStoreAPI.StoredModelSupport.read(row, "title", as: { (model: Self) in
                        model.title
                    })
                let __stored4 = try DataStoreAPI.StoredModelSupport.read(row, "tag", as: { (model: Self) in
                        model.tag
                    })
                self.id = __stored0
                self.stars = __stored1
                self.mood = __stored2
                self.title = __stored3
                self.tag = __stored4
            }
            private static let _storedModelLayout = DataStoreAPI.StoredModelLayout(["id", "stars", "mood", "title", "tag"])
            func record() throws -> DataStoreAPI.Record {
                var builder = DataStoreAPI.StoredRecordBuilder(Self._storedModelLayout)
                try builder.append(self.id)
                try builder.append(self.stars)
                try builder.append(self.mood)
                try builder.append(self.title)
                try builder.append(self.tag)
                return try builder.record()
            }
            static var storedModelLayout: DataStoreAPI.StoredModelLayout? {
                Self._storedModelLayout
            }
            func writeStoredFields(to fields: inout DataStoreAPI.StoredFieldBuffer) throws {
                try self.id.appendStored(to: &fields)
                try self.stars.appendStored(to: &fields)
                try self.mood.appendStored(to: &fields)
                try self.title.appendStored(to: &fields)
                try self.tag.appendStored(to: &fields)
            }
            static var readsStoredFields: Bool {
                true
            }
            init?(storedFields reader: inout DataStoreAPI.StoredFieldReader) {
                guard let __stored0 = DataStoreAPI.StoredModelSupport.readStored(&reader, as: { (model: Self) in
                        model.id
                    }),
                      let __stored1 = DataStoreAPI.StoredModelSupport.readStored(&reader, as: { (model: Self) in
                        model.stars
                    }),
                      let __stored2 = DataStoreAPI.StoredModelSupport.readStored(&reader, as: { (model: Self) in
                        model.mood
                    }),
                      let __stored3 = DataStoreAPI.StoredModelSupport.readStored(&reader, as: { (model: Self) in
                        model.title
                    }),
                      let __stored4 = DataStoreAPI.StoredModelSupport.readStored(&reader, as: { (model: Self) in
                        model.tag
                    }),
                      reader.isAtEnd else {
                    return nil
                }
                self.id = __stored0
                self.stars = __stored1
                self.mood = __stored2
                self.title = __stored3
                self.tag = __stored4
            }
        }
        """)
}

@Test func aPropertyNamedWithBackticksIsStoredUnderItsName() {
    expand("""
        @StoredModel
        struct Setting {
            @StoredKey var `default`: String
        }
        """, """
        struct Setting {
            var `default`: String
        }

        extension Setting: DataStoreAPI.RowCodable {
            static var entityName: String {
                "Setting"
            }
            static var primaryKey: String {
                "default"
            }
            static func entitySchema() throws -> DataStoreAPI.EntitySchema {
                DataStoreAPI.EntitySchema(
                    "Setting", primaryKey: "default",
                    attributes: [DataStoreAPI.StoredModelSupport.attribute("default", \\Setting.`default`)],
                    indexes: [],
                    relationships: relationships)
            }
            init(row: borrowing DataStoreAPI.Row) throws {
                let __stored0 = try DataStoreAPI.StoredModelSupport.read(row, "default", as: { (model: Self) in
                        model.`default`
                    })
                self.`default` = __stored0
            }
            private static let _storedModelLayout = DataStoreAPI.StoredModelLayout(["default"])
            func record() throws -> DataStoreAPI.Record {
                var builder = DataStoreAPI.StoredRecordBuilder(Self._storedModelLayout)
                try builder.append(self.`default`)
                return try builder.record()
            }
            static var storedModelLayout: DataStoreAPI.StoredModelLayout? {
                Self._storedModelLayout
            }
            func writeStoredFields(to fields: inout DataStoreAPI.StoredFieldBuffer) throws {
                try self.`default`.appendStored(to: &fields)
            }
            static var readsStoredFields: Bool {
                true
            }
            init?(storedFields reader: inout DataStoreAPI.StoredFieldReader) {
                guard let __stored0 = DataStoreAPI.StoredModelSupport.readStored(&reader, as: { (model: Self) in
                        model.`default`
                    }),
                      reader.isAtEnd else {
                    return nil
                }
                self.`default` = __stored0
            }
        }
        """)
}
#endif
