// swift-tools-version: 6.1
import Foundation
import CompilerPluginSupport
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]

// The test command builds the tests in the debug configuration (testable imports, assertions) but
// compiles the libraries and the tools the tests start with optimization (DATASTORE_OPTIMIZE=1,
// which Scripts/test.sh sets): the tests spend most of their time in the stores' code, and
// unoptimized generic code runs many times slower. Only when the variable is set, so that
// packages that depend on this one never see an unsafe flag.
let librarySettings: [SwiftSetting] = swiftSettings
    + (ProcessInfo.processInfo.environment["DATASTORE_OPTIMIZE"] == "1" ? [.unsafeFlags(["-O"])] : [])

// What only the model macro uses (swift-syntax): resolved and built only with the Models trait,
// so that a build without it (Scripts/demo.sh's, or an app's that turns the default off) does not
// even fetch swift-syntax.
let models: TargetDependencyCondition? = .when(traits: ["Models"])

let package = Package(
    name: "DataStore",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "migrate-store", targets: ["migrate-store"]),
        .library(name: "DataStoreAPI", targets: ["DataStoreAPI"]),
        .library(name: "InMemoryStore", targets: ["InMemoryStore"]),
        .library(name: "SQLiteStore", targets: ["SQLiteStore"]),
        .library(name: "LMDBStore", targets: ["LMDBStore"]),
        .library(name: "PostgresStore", targets: ["PostgresStore"]),
        .library(name: "JSONLStore", targets: ["JSONLStore"]),
        .library(name: "ForeignStores", targets: ["ForeignStores"]),
        .library(name: "StoreMigration", targets: ["StoreMigration"]),
        .library(name: "DataStoreConformance", targets: ["DataStoreConformance"]),
        // The model macro, a product of its own: only apps that import it build swift-syntax.
        .library(name: "DataStoreModels", targets: ["DataStoreModels"]),
    ],
    traits: [
        .trait(name: "Postgres", description: "The PostgreSQL backend (PostgresStore, postgres:// stores in "
            + "migrate-store), built on libpq (Debian's libpq-dev); off by default, so that users who do not need "
            + "it need no libpq."),
        .trait(name: "Models", description: "The model macro (DataStoreModels: @StoredModel and its marks), built on "
            + "swift-syntax; on by default. Without it, swift-syntax is not fetched and DataStoreModels is empty."),
        .default(enabledTraits: ["Models"]),
        .trait(name: "ExampleServer", description: "The example HTTP service notes-server (Examples/NotesServer), "
            + "built on Hummingbird and the model macro; off by default.", enabledTraits: ["Models"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // Any of the releases since Swift 6.0's; 603 is Swift 6.3's, the toolchain's own.
        .package(url: "https://github.com/swiftlang/swift-syntax", "600.0.1"..<"604.0.0"),
    ],
    targets: [
        // CRC-32C of the stored records, with the CPU's instruction where it has one.
        .target(name: "CChecksum"),
        .target(name: "DataStoreAPI",
                dependencies: ["CChecksum", "COpenSSL", .product(name: "Logging", package: "swift-log"),
                               .product(name: "CoreMetrics", package: "swift-metrics")],
                swiftSettings: librarySettings),
        .target(name: "InMemoryStore",
                dependencies: ["DataStoreAPI", .product(name: "HashTreeCollections", package: "swift-collections")],
                swiftSettings: librarySettings),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .target(name: "JSONLStore", dependencies: ["DataStoreAPI", "CZlib"], swiftSettings: librarySettings),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "SQLiteStore", dependencies: ["DataStoreAPI", "CSQLite", "CChecksum"], swiftSettings: librarySettings),
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .target(name: "ForeignStores", dependencies: ["DataStoreAPI", "CSQLite", "CZlib", "COpenSSL"],
                swiftSettings: librarySettings),
        .systemLibrary(name: "CLMDB", pkgConfig: "lmdb", providers: [.apt(["liblmdb-dev"])]),
        .target(name: "LMDBStore",
                dependencies: ["DataStoreAPI", "CLMDB", "CChecksum", .product(name: "Logging", package: "swift-log")],
                swiftSettings: librarySettings),
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .target(
            name: "PostgresStore",
            dependencies: [
                "DataStoreAPI",
                .target(name: "CLibPQ", condition: .when(traits: ["Postgres"])),
                .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Postgres"])),
            ],
            swiftSettings: librarySettings
        ),
        .target(
            name: "StoreMigration",
            dependencies: ["DataStoreAPI", "InMemoryStore", "SQLiteStore", "LMDBStore", "JSONLStore", "PostgresStore",
                           "ForeignStores",
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "CoreMetrics", package: "swift-metrics")],
            swiftSettings: librarySettings
        ),
        .target(
            name: "MigrateStoreCommand",
            dependencies: ["StoreMigration", "DataStoreAPI", "JSONLStore", "ForeignStores",
                           .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: librarySettings
        ),
        // The macros' code, a library the expansion tests import; the macro target is only the
        // compiler plugin that serves them. (A test target that depends on a macro target is built
        // for the host, and with it every module the tests import: the package twice.)
        .target(
            name: "DataStoreMacroExpansion",
            dependencies: [.product(name: "SwiftSyntaxMacros", package: "swift-syntax", condition: models),
                           .product(name: "SwiftSyntaxBuilder", package: "swift-syntax", condition: models),
                           .product(name: "SwiftDiagnostics", package: "swift-syntax", condition: models)],
            swiftSettings: swiftSettings
        ),
        .macro(
            name: "DataStoreMacros",
            dependencies: ["DataStoreMacroExpansion",
                           .product(name: "SwiftSyntax", package: "swift-syntax", condition: models),
                           .product(name: "SwiftSyntaxMacros", package: "swift-syntax", condition: models),
                           .product(name: "SwiftCompilerPlugin", package: "swift-syntax", condition: models)],
            swiftSettings: swiftSettings
        ),
        .target(name: "DataStoreModels", dependencies: ["DataStoreAPI", .target(name: "DataStoreMacros", condition: models)], swiftSettings: librarySettings),
        .executableTarget(name: "migrate-store", dependencies: ["MigrateStoreCommand"], swiftSettings: librarySettings),
        .executableTarget(
            name: "notes-server",
            dependencies: ["DataStoreAPI", "StoreMigration",
                           .target(name: "DataStoreModels", condition: .when(traits: ["ExampleServer"])),
                           .product(name: "ArgumentParser", package: "swift-argument-parser",
                                    condition: .when(traits: ["ExampleServer"])),
                           .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["ExampleServer"])),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle",
                                    condition: .when(traits: ["ExampleServer"]))],
            path: "Examples/NotesServer/Sources",
            swiftSettings: librarySettings
        ),
        // One hot operation of a store, for callgrind's instruction counts (Scripts/instruction-counts.sh).
        .executableTarget(
            name: "hot-paths",
            dependencies: ["SQLiteStore", "LMDBStore", "InMemoryStore"],
            swiftSettings: librarySettings
        ),
        .executableTarget(
            name: "crash-writer",
            dependencies: ["SQLiteStore", "LMDBStore", "InMemoryStore", "PostgresStore", "StoreMigration"],
            swiftSettings: librarySettings
        ),
        // The conformance suite and the tests' support code drive the stores and spend little of
        // the tests' time themselves: compiled without optimization, like the tests (measured
        // here: 122 CPU-s less to build; the embedded backends' conformance runs alone took 25
        // CPU-s more; the whole test run, alone, 573 s before and 577 s after).
        .target(
            name: "DataStoreConformance",
            dependencies: ["DataStoreAPI", .product(name: "PropertyBased", package: "swift-property-based")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "DataStoreTestSupport",
            dependencies: ["DataStoreAPI", "JSONLStore", "DataStoreConformance", "StoreMigration", "CSQLite", "CZlib"],
            path: "Tests/Support",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "JSONLStoreTests",
            dependencies: ["JSONLStore", "DataStoreConformance", "DataStoreTestSupport", "InMemoryStore", "SQLiteStore",
                           "LMDBStore", "StoreMigration",
                           .product(name: "PropertyBased", package: "swift-property-based")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DataStoreMacrosTests",
            dependencies: ["DataStoreMacroExpansion",
                           .product(name: "SwiftSyntaxMacrosGenericTestSupport", package: "swift-syntax", condition: models)],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DataStoreModelsTests",
            dependencies: ["DataStoreModels", "InMemoryStore", "SQLiteStore", "LMDBStore", "PostgresStore",
                           "DataStoreTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DataStoreAPITests",
            dependencies: ["DataStoreAPI", "DataStoreConformance", .product(name: "PropertyBased", package: "swift-property-based")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PostgresStoreTests",
            dependencies: ["PostgresStore", "DataStoreConformance", "DataStoreTestSupport", "StoreMigration",
                           "crash-writer", "migrate-store"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NotesServerTests",
            dependencies: ["DataStoreTestSupport", "notes-server"],
            path: "Examples/NotesServer/Tests",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "InMemoryStoreTests",
            dependencies: ["InMemoryStore", "DataStoreConformance", "DataStoreTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SQLiteStoreTests",
            dependencies: ["SQLiteStore", "CSQLite", "DataStoreConformance", "DataStoreTestSupport", "crash-writer"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LMDBStoreTests",
            dependencies: ["LMDBStore", "CChecksum", "DataStoreConformance", "DataStoreTestSupport", "crash-writer"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "StoreMigrationTests",
            dependencies: ["StoreMigration", "DataStoreConformance", "DataStoreTestSupport", "migrate-store", "crash-writer",
                           "MigrateStoreCommand", "JSONLStore", "ForeignStores", "LMDBStore", "SQLiteStore",
                           "InMemoryStore", .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "MetricsTestKit", package: "swift-metrics")],
            swiftSettings: swiftSettings
        ),
    ]
)
