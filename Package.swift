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
        // The pure modules, for Benchmarks/; not a supported API.
        .library(name: "BeaconKit",
                 targets: ["BeaconKit", "Wire", "Tracking", "Config", "GatewayCore", "BrainCore", "Simulation"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/apple/swift-numerics", from: "1.0.0"),
    ],
    targets: [
        // The pure core: Swift only, no C, no I/O, no clock of its own. Each module
        // depends only on those listed before it.
        //
        // The base: Instant, JSON, hex and UUIDs, beacon identities and formats, topics,
        // the one message type.
        .target(name: "BeaconKit", swiftSettings: swiftSettings),
        // Bytes on the wire: HCI commands and events, H4 framing, advertising data, the
        // decoder, btsnoop captures.
        .target(name: "Wire", dependencies: ["BeaconKit"], swiftSettings: swiftSettings),
        // RSSI to presence: the filter, distance, proximity, the tracker, hot/cold ranging.
        .target(
            name: "Tracking",
            dependencies: ["BeaconKit", "Wire", .product(name: "RealModule", package: "swift-numerics")],
            swiftSettings: swiftSettings),
        // The fleet config: model, parser and validation, source and broker URLs.
        .target(name: "Config", dependencies: ["BeaconKit", "Tracking"], swiftSettings: swiftSettings),
        // The gateway's decisions: GatewayEngine, its payloads, the outage outbox.
        .target(name: "GatewayCore", dependencies: ["BeaconKit", "Wire", "Tracking", "Config"], swiftSettings: swiftSettings),
        // The brain's decisions: fleet presence, observers, rules, its payloads, BrainCore.
        .target(name: "BrainCore", dependencies: ["BeaconKit", "Tracking", "Config"], swiftSettings: swiftSettings),
        // A synthetic store as captures, and the benchmarks' workloads.
        .target(
            name: "Simulation",
            dependencies: ["BeaconKit", "Wire", .product(name: "RealModule", package: "swift-numerics")],
            swiftSettings: swiftSettings),

        // Thin system-library wrappers; everything above them is Swift.
        .systemLibrary(name: "CMosquitto", pkgConfig: "libmosquitto",
                       providers: [.apt(["libmosquitto-dev"])]),
        .systemLibrary(name: "CBlueZ", pkgConfig: "bluez",
                       providers: [.apt(["libbluetooth-dev"])]),

        .target(name: "SystemCalls", swiftSettings: swiftSettings),
        // The one place the live clock is read.
        .target(name: "LiveClock", dependencies: ["BeaconKit"], swiftSettings: swiftSettings),
        .target(
            name: "HCI",
            dependencies: ["BeaconKit", "Wire", "Config", "CBlueZ", "SystemCalls", "LiveClock",
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings),
        .target(
            name: "MQTT",
            dependencies: ["CMosquitto", "BeaconKit", "SystemCalls", "LiveClock",
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings),
        .target(
            name: "Gateway",
            dependencies: ["BeaconKit", "Wire", "Config", "GatewayCore", "SystemCalls", "HCI", "MQTT", "LiveClock",
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            swiftSettings: swiftSettings),
        .target(
            name: "Brain",
            dependencies: ["BeaconKit", "Config", "BrainCore", "MQTT", "LiveClock",
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            swiftSettings: swiftSettings),
        .target(
            name: "CommandLineSupport",
            dependencies: ["BeaconKit", "Config", "SystemCalls",
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                           .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                           .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings),

        .executableTarget(
            name: "beacon-gateway",
            dependencies: ["BeaconKit", "Config", "HCI", "Gateway", "CommandLineSupport",
                           .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "beacon-brain",
            dependencies: ["Config", "Brain", "CommandLineSupport",
                           .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "beaconctl",
            dependencies: ["BeaconKit", "Wire", "Tracking", "Config", "GatewayCore", "BrainCore", "Simulation",
                           "HCI", "MQTT", "Gateway", "Brain", "CommandLineSupport", "SystemCalls", "LiveClock",
                           .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "UnixSignals", package: "swift-service-lifecycle")],
            swiftSettings: swiftSettings),
        // The broker's ceiling in C over libmosquitto, run by `beaconctl bench` (docs/PERFORMANCE.md).
        .executableTarget(
            name: "mqtt-baseline",
            linkerSettings: [.linkedLibrary("mosquitto"), .linkedLibrary("pthread")]),

        // Starts and stops real processes (mosquitto, btvirt, our executables) for tests.
        .target(name: "TestSupport", dependencies: ["BeaconKit", "SystemCalls"], path: "Tests/TestSupport"),
        // The pure modules' tests (BrainCore's are in BrainTests, beside the brain service's).
        .testTarget(
            name: "BeaconKitTests",
            dependencies: ["BeaconKit", "Wire", "Tracking", "Config", "GatewayCore", "Simulation"],
            swiftSettings: swiftSettings),
        .testTarget(name: "HCITests", dependencies: ["HCI", "BeaconKit", "Wire", "Config", "SystemCalls", "LiveClock", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(
            name: "BrainTests",
            dependencies: ["Brain", "BrainCore", "BeaconKit", "Tracking", "Config", "MQTT", "TestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(name: "MQTTTests", dependencies: ["MQTT", "BeaconKit", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["BeaconKit", "Wire", "Config", "Simulation", "HCI", "MQTT", "Gateway", "TestSupport",
                           "beacon-gateway", "beacon-brain", "beaconctl", "mqtt-baseline"],
            swiftSettings: swiftSettings),
    ]
)
