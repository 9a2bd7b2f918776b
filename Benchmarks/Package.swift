// swift-tools-version: 6.1
// The performance harness: every backend and the migration next to the raw C APIs doing the same
// work in the same run, and the typed layer next to GRDB (SQLite) and Fluent (SQLite and PostgreSQL). Its own package, so that
// users of the library never build GRDB. It builds the root package with its `Postgres` trait, so
// that PostgresStore runs next to libpq called from C.
import Foundation
import PackageDescription

// A path dependency's identity is its directory's name, which depends on where the repository
// was cloned.
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().lastPathComponent

let package = Package(
    name: "DataStoreBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: "..", traits: [.defaults, "Postgres"]),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/vapor/fluent-kit", from: "1.57.0"),
        .package(url: "https://github.com/vapor/fluent-sqlite-driver", from: "4.9.0"),
        .package(url: "https://github.com/vapor/fluent-postgres-driver", from: "2.14.0"),
    ],
    targets: [
        .systemLibrary(name: "RawSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "RawLMDB", pkgConfig: "lmdb", providers: [.apt(["liblmdb-dev"])]),
        // The store's CRC-32C (its header; the code comes with DataStoreAPI), for the raw side's
        // row checksums.
        .systemLibrary(name: "RawChecksum"),
        // The raw side of the PostgreSQL rows: libpq called from C.
        .target(name: "RawLibpq", cSettings: [.unsafeFlags(["-I/usr/include/postgresql"])],
                linkerSettings: [.linkedLibrary("pq")]),
        // The workload, and the same work through the API and through the raw C APIs, shared by
        // the harness and `profile-store`.
        .target(
            name: "BenchSupport",
            dependencies: ["RawSQLite", "RawLMDB", "RawChecksum", .product(name: "DataStoreAPI", package: root)],
            swiftSettings: [.swiftLanguageMode(.v6), .enableUpcomingFeature("ExistentialAny")]
        ),
        .executableTarget(
            name: "datastore-bench",
            dependencies: [
                "BenchSupport", "RawSQLite", "RawLMDB", "RawLibpq",
                .product(name: "DataStoreAPI", package: root),
                .product(name: "DataStoreModels", package: root),
                .product(name: "SQLiteStore", package: root),
                .product(name: "LMDBStore", package: root),
                .product(name: "InMemoryStore", package: root),
                .product(name: "JSONLStore", package: root),
                .product(name: "StoreMigration", package: root),
                .product(name: "ForeignStores", package: root),
                .product(name: "PostgresStore", package: root),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "FluentKit", package: "fluent-kit"),
                .product(name: "FluentSQLiteDriver", package: "fluent-sqlite-driver"),
                .product(name: "FluentPostgresDriver", package: "fluent-postgres-driver"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6), .enableUpcomingFeature("ExistentialAny")]
        ),
        // Counts every heap allocation of the process (count-allocations links it).
        .target(name: "AllocationCounter"),
        // Heap allocations per visited record on each backend and on the raw side (see its header).
        .executableTarget(
            name: "count-allocations",
            dependencies: ["AllocationCounter", "BenchSupport", .product(name: "DataStoreAPI", package: root),
                           .product(name: "LMDBStore", package: root), .product(name: "SQLiteStore", package: root),
                           .product(name: "InMemoryStore", package: root)],
            swiftSettings: [.swiftLanguageMode(.v6), .enableUpcomingFeature("ExistentialAny")]
        ),
        // One operation on one backend, for callgrind (see its header).
        .executableTarget(
            name: "profile-store",
            dependencies: ["BenchSupport", .product(name: "DataStoreAPI", package: root), .product(name: "DataStoreModels", package: root), .product(name: "LMDBStore", package: root),
                           .product(name: "InMemoryStore", package: root), .product(name: "JSONLStore", package: root),
                           .product(name: "PostgresStore", package: root),
                           .product(name: "SQLiteStore", package: root), .product(name: "StoreMigration", package: root)],
            swiftSettings: [.swiftLanguageMode(.v6), .enableUpcomingFeature("ExistentialAny")]
        ),
    ]
)
