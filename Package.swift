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
        .executable(name: "beacon-history", targets: ["beacon-history"]),
        // The pure modules, for Benchmarks/; not a supported API.
        .library(name: "BeaconKit",
                 targets: ["BeaconKit", "Contract", "Wire", "Tracking", "Config", "GatewayCore", "BrainCore", "Simulation"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/apple/swift-numerics", from: "1.0.0"),
        // HMAC-SHA256 (sealed records, proof of presence, the history's pseudonyms); Hummingbird's
        // bcrypt already builds it, so it costs the build nothing more.
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        // Base64 for profile photos; Hummingbird's auth already builds it.
        .package(url: "https://github.com/swift-extras/swift-extras-base64", from: "1.0.0"),
        // beacon-web: the HTTP server, its sessions and bcrypt, TLS (Hummingbird also serves --metrics).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        // The gateway's and brain's Prometheus endpoint (--metrics).
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // beacon-history: the store's memory in SQLite (one file, no server).
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // beacon-history for a chain: PostgreSQL's wire protocol over the NIO that Hummingbird
        // already builds (docs/history.md says why this and not libpq).
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    ],
    targets: [
        // The pure core: Swift only, no C, no I/O, no clock of its own. Each module
        // depends only on those listed before it.
        //
        // The base: Instant, JSON, hex and UUIDs, beacon identities and formats,
        // the one message type.
        .target(name: "BeaconKit", dependencies: [.product(name: "Crypto", package: "swift-crypto")],
                swiftSettings: swiftSettings),
        // The wire between the parts: every MQTT topic built and parsed in one place, the
        // beacon as topics name it (BeaconRef), and each payload one module writes and another
        // reads, as one type that encodes and decodes (base64 for the photo of a join).
        .target(name: "Contract", dependencies: ["BeaconKit", .product(name: "ExtrasBase64", package: "swift-extras-base64")],
                swiftSettings: swiftSettings),
        // Bytes on the wire: HCI commands and events, H4 framing, advertising data, the
        // decoder, btsnoop captures.
        .target(name: "Wire", dependencies: ["BeaconKit"], swiftSettings: swiftSettings),
        // RSSI to presence: the filter, distance, proximity, the tracker, hot/cold ranging.
        .target(
            name: "Tracking",
            dependencies: ["BeaconKit", "Contract", "Wire", .product(name: "RealModule", package: "swift-numerics")],
            swiftSettings: swiftSettings),
        // The fleet config: model, parser and validation, source and broker URLs.
        .target(name: "Config", dependencies: ["BeaconKit", "Contract", "Tracking"], swiftSettings: swiftSettings),
        // The gateway's decisions: GatewayEngine, its payloads, the outage outbox.
        .target(name: "GatewayCore", dependencies: ["BeaconKit", "Contract", "Wire", "Tracking", "Config"], swiftSettings: swiftSettings),
        // The brain's decisions: fleet presence, observers, rules, its payloads, BrainCore.
        .target(
            name: "BrainCore",
            dependencies: ["BeaconKit", "Contract", "Tracking", "Config", .product(name: "RealModule", package: "swift-numerics")],
            swiftSettings: swiftSettings),
        // A synthetic store as captures, and the benchmarks' workloads.
        .target(
            name: "Simulation",
            dependencies: ["BeaconKit", "Wire", .product(name: "RealModule", package: "swift-numerics")],
            swiftSettings: swiftSettings),

        // Thin system-library wrappers; everything above them is Swift.
        .systemLibrary(name: "CMosquitto", pkgConfig: "libmosquitto",
                       providers: [.apt(["libmosquitto-dev"])]),
        // Which TLS check failed: an info callback on libmosquitto's OpenSSL context.
        .target(name: "CMosquittoTLS", linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]),
        .systemLibrary(name: "CBlueZ", pkgConfig: "bluez",
                       providers: [.apt(["libbluetooth-dev"])]),
        // A photo over the 20 KiB a join allows, re-encoded smaller (libjpeg-turbo, Debian's libjpeg-dev).
        .target(name: "CJPEG", linkerSettings: [.linkedLibrary("jpeg")]),

        .target(name: "SystemCalls", swiftSettings: swiftSettings),
        // The live time as an Instant: where the system clock meets the pure modules.
        .target(name: "LiveClock", dependencies: ["BeaconKit", "SystemCalls"], swiftSettings: swiftSettings),
        .target(
            name: "HCI",
            dependencies: ["BeaconKit", "Wire", "Config", "CBlueZ", "SystemCalls", "LiveClock",
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings),
        .target(
            name: "MQTT",
            dependencies: ["CMosquitto", "CMosquittoTLS", "BeaconKit", "SystemCalls",
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings),
        // What the gateway's and the brain's services share around their pure cores.
        .target(
            name: "CoreHost",
            dependencies: ["BeaconKit", "MQTT", "LiveClock", "SystemCalls", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings),
        .target(
            name: "Gateway",
            dependencies: ["BeaconKit", "Contract", "Wire", "Config", "GatewayCore", "SystemCalls", "HCI", "MQTT", "LiveClock", "CoreHost",
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            swiftSettings: swiftSettings),
        .target(
            name: "Brain",
            dependencies: ["BeaconKit", "Contract", "Config", "BrainCore", "MQTT", "LiveClock", "SystemCalls", "CoreHost",
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
            dependencies: ["BeaconKit", "Telemetry", "Config", "HCI", "Gateway", "GatewayCore", "Wire", "CommandLineSupport", "LiveClock", "SystemCalls",
                           .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "beacon-brain",
            dependencies: ["Telemetry", "Config", "Brain", "BrainCore", "CommandLineSupport",
                           .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "beaconctl",
            dependencies: ["BeaconKit", "Contract", "Wire", "Tracking", "Config", "GatewayCore", "BrainCore", "Simulation",
                           "HCI", "MQTT", "Gateway", "Brain", "CommandLineSupport", "SystemCalls", "LiveClock",
                           "History", "HistoryStore", "CJPEG",
                           .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "UnixSignals", package: "swift-service-lifecycle")],
            swiftSettings: swiftSettings),
        // What people look at: the fleet's retained state as pages (pure: no I/O, no clock).
        .target(name: "WebDisplay", dependencies: ["BeaconKit", "Contract", "Tracking", "Config",
                                                  .product(name: "RealModule", package: "swift-numerics")],
                swiftSettings: swiftSettings),
        // The HTTP server over Hummingbird and the MQTT client that feeds it.
        .target(
            name: "WebServer",
            dependencies: ["WebDisplay", "BeaconKit", "Config", "MQTT", "SystemCalls", "LiveClock", "History", "HistoryStore",
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
        // Prometheus metrics by their conventions, served on /metrics (beacon-gateway,
        // beacon-brain, beacon-history), read from the daemons' statistics at each scrape.
        .target(
            name: "Telemetry",
            dependencies: [.product(name: "Hummingbird", package: "hummingbird"),
                           .product(name: "NIOCore", package: "swift-nio"),
                           .product(name: "Metrics", package: "swift-metrics"),
                           .product(name: "CoreMetrics", package: "swift-metrics"),
                           .product(name: "Prometheus", package: "swift-prometheus"),
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "beacon-web",
            dependencies: ["WebServer", "WebDisplay", "CommandLineSupport", "SystemCalls", "BeaconKit", "Config",
                           .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                           .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings),
        // The store's memory (pure): visits and zone segments from the brain's decisions,
        // and the figures a shop manager asks for (footfall, dwell, conversion, queue time).
        .target(name: "History", dependencies: ["BeaconKit", "Contract", "Config"], swiftSettings: swiftSettings),
        // Where the history is kept (SQLite through GRDB, versioned migrations) and the
        // service that keeps it (beacon-history).
        .target(
            name: "HistoryStore",
            dependencies: ["History", "BeaconKit", "Contract", "Config", "MQTT", "SystemCalls", "LiveClock",
                           .product(name: "GRDB", package: "GRDB.swift"),
                           .product(name: "PostgresNIO", package: "postgres-nio"),
                           .product(name: "NIOCore", package: "swift-nio"),
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "beacon-history",
            dependencies: ["History", "HistoryStore", "BeaconKit", "Config", "MQTT", "CommandLineSupport", "SystemCalls",
                           "LiveClock", "Telemetry",
                           .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            swiftSettings: swiftSettings),
        // The broker's ceiling in C over libmosquitto, run by `beaconctl bench` (docs/PERFORMANCE.md).
        .executableTarget(
            name: "mqtt-baseline",
            linkerSettings: [.linkedLibrary("mosquitto"), .linkedLibrary("pthread")]),

        // Starts and stops real processes (mosquitto, btvirt, our executables) for tests.
        .target(name: "TestSupport", dependencies: ["BeaconKit", "Contract", "SystemCalls", .product(name: "Logging", package: "swift-log")],
                path: "Tests/TestSupport"),
        // The pure modules' tests (BrainCore's are in BrainTests, beside the brain service's).
        .testTarget(
            name: "BeaconKitTests",
            dependencies: ["BeaconKit", "Contract", "Wire", "Tracking", "Config", "GatewayCore", "Simulation"],
            swiftSettings: swiftSettings),
        .testTarget(name: "HCITests", dependencies: ["HCI", "BeaconKit", "Wire", "Config", "SystemCalls", "LiveClock", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(
            name: "BrainTests",
            dependencies: ["Brain", "BrainCore", "BeaconKit", "Contract", "Tracking", "Config", "MQTT", "TestSupport", "Simulation", "LiveClock", "CoreHost",
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            swiftSettings: swiftSettings),
        .testTarget(name: "MQTTTests", dependencies: ["MQTT", "BeaconKit", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "WebTests", dependencies: ["WebDisplay", "WebServer", "BeaconKit", "Contract", "Tracking", "Config", "BrainCore", "GatewayCore"],
                    swiftSettings: swiftSettings),
        .testTarget(
            name: "HistoryTests",
            dependencies: ["History", "HistoryStore", "BeaconKit", "Contract", "Config", "BrainCore", "Simulation", "MQTT", "TestSupport",
                           "beacon-history", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["BeaconKit", "Contract", "Wire", "Tracking", "Config", "Simulation", "BrainCore", "HCI", "MQTT", "Gateway", "GatewayCore", "LiveClock", "CoreHost", "TestSupport", "CommandLineSupport",
                           "SystemCalls", "History", "HistoryStore",
                           "beacon-gateway", "beacon-brain", "beaconctl", "beacon-web", "beacon-history", "mqtt-baseline",
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings),
    ]
)
