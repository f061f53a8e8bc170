// swift-tools-version:6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "BeaconBridge",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "beacon-gateway", targets: ["beacon-gateway"]),
        .executable(name: "beacon-brain", targets: ["beacon-brain"]),
        .executable(name: "beaconctl", targets: ["beaconctl"]),
        .executable(name: "beacon-web", targets: ["beacon-web"]),
        .library(name: "BeaconKit", targets: ["BeaconKit"]),
        // For Benchmarks/ (the gateway pipeline without a broker); not a supported API.
        .library(name: "Gateway", targets: ["Gateway"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/apple/swift-numerics", from: "1.0.0"),
        // beacon-web only: the HTTP server, its sessions and bcrypt, TLS.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
    ],
    targets: [
        // Pure Swift: no C, no I/O, no clock of its own.
        .target(
            name: "BeaconKit",
            dependencies: [.product(name: "RealModule", package: "swift-numerics")],
            swiftSettings: swiftSettings),

        // Thin system-library wrappers; everything above them is Swift.
        .systemLibrary(name: "CMosquitto", pkgConfig: "libmosquitto",
                       providers: [.apt(["libmosquitto-dev"])]),
        .systemLibrary(name: "CBlueZ", pkgConfig: "bluez",
                       providers: [.apt(["libbluetooth-dev"])]),

        .target(name: "SystemCalls", dependencies: ["BeaconKit"], swiftSettings: swiftSettings),
        .target(
            name: "HCI",
            dependencies: ["BeaconKit", "CBlueZ", "SystemCalls",
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings),
        .target(
            name: "MQTT",
            dependencies: ["CMosquitto", "BeaconKit", "SystemCalls",
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings),
        .target(
            name: "Gateway",
            dependencies: ["BeaconKit", "HCI", "MQTT",
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            swiftSettings: swiftSettings),
        .target(
            name: "Brain",
            dependencies: ["BeaconKit", "MQTT", "SystemCalls",
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            swiftSettings: swiftSettings),
        .target(
            name: "CommandLineSupport",
            dependencies: ["BeaconKit", "SystemCalls",
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                           .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                           .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings),

        .executableTarget(
            name: "beacon-gateway",
            dependencies: ["Gateway", "CommandLineSupport",
                           .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "beacon-brain",
            dependencies: ["Brain", "CommandLineSupport",
                           .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "beaconctl",
            dependencies: ["BeaconKit", "HCI", "MQTT", "Gateway", "Brain", "CommandLineSupport", "SystemCalls",
                           .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "UnixSignals", package: "swift-service-lifecycle")],
            swiftSettings: swiftSettings),
        // What people look at: the fleet's retained state as pages (pure: no I/O, no clock).
        .target(name: "WebDisplay", dependencies: ["BeaconKit", .product(name: "RealModule", package: "swift-numerics")],
                swiftSettings: swiftSettings),
        // The HTTP server over Hummingbird and the MQTT client that feeds it.
        .target(
            name: "WebServer",
            dependencies: ["WebDisplay", "BeaconKit", "MQTT", "SystemCalls",
                           .product(name: "Hummingbird", package: "hummingbird"),
                           .product(name: "HummingbirdCore", package: "hummingbird"),
                           .product(name: "HummingbirdTLS", package: "hummingbird"),
                           .product(name: "HTTPTypes", package: "swift-http-types"),
                           .product(name: "HummingbirdAuth", package: "hummingbird-auth"),
                           .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                           .product(name: "NIOCore", package: "swift-nio"),
                           .product(name: "NIOPosix", package: "swift-nio"),
                           .product(name: "NIOSSL", package: "swift-nio-ssl"),
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "beacon-web",
            dependencies: ["WebServer", "WebDisplay", "CommandLineSupport", "SystemCalls", "BeaconKit",
                           .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                           .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings),
        // The broker's ceiling in C over libmosquitto, run by `beaconctl bench` (docs/PERFORMANCE.md).
        .executableTarget(
            name: "mqtt-baseline",
            linkerSettings: [.linkedLibrary("mosquitto"), .linkedLibrary("pthread")]),

        // Starts and stops real processes (mosquitto, btvirt, our executables) for tests.
        .target(name: "TestSupport", dependencies: ["BeaconKit", "SystemCalls"], path: "Tests/TestSupport"),
        .testTarget(name: "BeaconKitTests", dependencies: ["BeaconKit"], swiftSettings: swiftSettings),
        .testTarget(name: "HCITests", dependencies: ["HCI", "BeaconKit", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "BrainTests", dependencies: ["Brain", "BeaconKit", "MQTT", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "MQTTTests", dependencies: ["MQTT", "BeaconKit", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "WebTests", dependencies: ["WebDisplay", "WebServer", "BeaconKit", "TestSupport"],
                    swiftSettings: swiftSettings),
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["BeaconKit", "HCI", "MQTT", "Gateway", "TestSupport",
                           "beacon-gateway", "beacon-brain", "beaconctl", "beacon-web", "mqtt-baseline"],
            swiftSettings: swiftSettings),
    ]
)
