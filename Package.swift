// swift-tools-version: 6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "DataStore",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "DataStoreAPI", targets: ["DataStoreAPI"]),
        .library(name: "InMemoryStore", targets: ["InMemoryStore"]),
        .library(name: "DataStoreConformance", targets: ["DataStoreConformance"]),
    ],
    targets: [
        .target(name: "DataStoreAPI", swiftSettings: swiftSettings),
        .target(name: "InMemoryStore", dependencies: ["DataStoreAPI"], swiftSettings: swiftSettings),
        .target(name: "DataStoreConformance", dependencies: ["DataStoreAPI"], swiftSettings: swiftSettings),
        .testTarget(
            name: "DataStoreAPITests",
            dependencies: ["DataStoreAPI"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "InMemoryStoreTests",
            dependencies: ["InMemoryStore", "DataStoreConformance"],
            swiftSettings: swiftSettings
        ),
    ]
)
