// swift-tools-version:6.1
import PackageDescription

// The benchmarks live in their own package so that the main build and CI never compile
// them. Run them with one command (docs/PERFORMANCE.md):
//
//   swift run -c release --package-path Benchmarks beacon-benchmarks
let package = Package(
    name: "BeaconBridgeBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "BeaconBridge", path: ".."),
    ],
    targets: [
        // Counts every malloc/calloc/realloc/free of the process by defining them in the
        // executable, which takes precedence over glibc's in symbol resolution.
        .target(name: "MallocCounter"),
        .executableTarget(
            name: "beacon-benchmarks",
            dependencies: [.product(name: "BeaconKit", package: "BeaconBridge"), "MallocCounter"]),
    ]
)
