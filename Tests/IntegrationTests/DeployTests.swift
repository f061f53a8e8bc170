import Foundation
import TestSupport
import Testing

/// The systemd units in deploy/systemd, checked by systemd itself.
@Suite("deploy: systemd units")
struct DeployTests {
    static let units = ["beacon-gateway@.service", "beacon-brain.service", "beacon-web.service"]

    /// `systemd-analyze verify` loads a unit with everything it references: the targets
    /// it orders itself after and the executables of ExecStart=, which must exist. On this
    /// machine the binaries are not installed and systemd may not even run (a container),
    /// so the check runs against a scratch root (`--root`): the distribution's unit
    /// directory copied in, the units where an administrator puts them, and stand-ins
    /// for /usr/local/bin/beacon-gateway and beacon-brain, as `make install` would leave.
    @Test("systemd-analyze verify accepts every unit without a warning")
    func verify() async throws {
        guard let analyze = Programs.system("systemd-analyze") else {
            throw TestFailure("systemd-analyze is not installed: apt-get install systemd (scripts/install-deps does)")
        }
        let dir = try TemporaryDirectory("systemd-verify")
        let root = dir.path
        let fm = FileManager.default
        let systemUnits = ["/usr/lib/systemd/system", "/lib/systemd/system"].first { fm.fileExists(atPath: $0) }
        let distribution = try #require(systemUnits, "no systemd unit directory on this machine")
        try fm.createDirectory(atPath: root + "/usr/lib/systemd", withIntermediateDirectories: true)
        try fm.copyItem(atPath: distribution, toPath: root + "/usr/lib/systemd/system")
        try fm.createDirectory(atPath: root + "/etc/systemd/system", withIntermediateDirectories: true)
        try fm.createDirectory(atPath: root + "/usr/local/bin", withIntermediateDirectories: true)
        for program in ["beacon-gateway", "beacon-brain", "beacon-web"] {
            let path = root + "/usr/local/bin/" + program
            try "#!/bin/sh\n".write(toFile: path, atomically: true, encoding: .utf8)
            try fm.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
        }
        for unit in Self.units {
            try fm.copyItem(atPath: Programs.repositoryRoot + "/deploy/systemd/" + unit,
                            toPath: root + "/etc/systemd/system/" + unit)
        }
        let check = try ChildProcess(analyze, ["verify", "--root=\(root)",
                                               "/etc/systemd/system/beacon-gateway@door-1.service",
                                               "/etc/systemd/system/beacon-brain.service",
                                               "/etc/systemd/system/beacon-web.service"],
                                     in: dir, name: "systemd-analyze")
        let status = await check.waitForExit(timeout: 60)
        #expect(status == 0, "\(check.diagnostics)")
        // verify exits 0 even for an unknown key; it says so on stderr.
        #expect(check.stderr.isEmpty, "\(check.diagnostics)")
    }

    @Test("the gateway runs unprivileged with exactly CAP_NET_RAW and CAP_NET_ADMIN, in the host's network namespace")
    func gatewayPrivileges() throws {
        let text = try String(contentsOfFile: Programs.repositoryRoot + "/deploy/systemd/beacon-gateway@.service",
                              encoding: .utf8)
        let settings = Dictionary(text.split(separator: "\n").filter { !$0.hasPrefix("#") && $0.contains("=") }.map {
            let parts = $0.split(separator: "=", maxSplits: 1)
            return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
        }, uniquingKeysWith: { $1 })
        #expect(settings["User"] == "beaconbridge")
        #expect(settings["AmbientCapabilities"] == "CAP_NET_RAW CAP_NET_ADMIN")
        #expect(settings["CapabilityBoundingSet"] == "CAP_NET_RAW CAP_NET_ADMIN")
        #expect(settings["NoNewPrivileges"] == "yes")
        #expect(settings["RestrictAddressFamilies"]?.contains("AF_BLUETOOTH") == true)
        #expect(settings["PrivateNetwork"] == nil, "Bluetooth sockets exist only in the host's network namespace")
        #expect(settings["Restart"] == "on-failure")
        #expect(settings["KillSignal"] == "SIGTERM")
        #expect(settings["ExecStart"] == "/usr/local/bin/beacon-gateway --config /etc/beaconbridge/fleet.json --id %i")
    }
}
