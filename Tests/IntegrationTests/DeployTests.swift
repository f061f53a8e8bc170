import Foundation
import TestSupport
import Testing

/// The systemd units in deploy/systemd, checked by systemd itself.
@Suite("deploy: systemd units")
struct DeployTests {
    static let units = ["beacon-gateway@.service", "beacon-brain.service", "beacon-web.service", "beacon-history.service"]

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
        for program in ["beacon-gateway", "beacon-brain", "beacon-web", "beacon-history"] {
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
                                               "/etc/systemd/system/beacon-web.service",
                                               "/etc/systemd/system/beacon-history.service"],
                                     in: dir, name: "systemd-analyze")
        let status = await check.waitForExit(timeout: 60)
        #expect(status == 0, "\(check.diagnostics)")
        // verify exits 0 even for an unknown key; it says so on stderr.
        #expect(check.stderr.isEmpty, "\(check.diagnostics)")
    }

    /// `systemd-analyze security --offline=true` rates the units as installed (exposure 0–10,
    /// lower is better); `--threshold` makes it fail above the bound.
    @Test("systemd-analyze security rates the brain, the gateway and the history at most 1.5", arguments: [
        ("beacon-brain.service", 15), ("beacon-gateway@.service", 15), ("beacon-history.service", 15),
    ])
    func exposure(_ unit: String, _ threshold: Int) async throws {
        let analyze = try #require(Programs.system("systemd-analyze"), "apt-get install systemd (scripts/install-deps does)")
        let dir = try TemporaryDirectory("systemd-security")
        let path = dir.file(unit)
        try FileManager.default.copyItem(atPath: Programs.repositoryRoot + "/deploy/systemd/" + unit, toPath: path)
        let check = try ChildProcess(analyze, ["security", "--offline=true", "--threshold=\(threshold)", path], in: dir,
                                     name: "systemd-analyze")
        #expect(await check.waitForExit(timeout: 60) == 0, "\(check.diagnostics)")
        #expect(check.stdout.contains("Overall exposure level"), "\(check.diagnostics)")
    }

    static func settings(_ unit: String) throws -> [String: String] {
        let text = try String(contentsOfFile: Programs.repositoryRoot + "/deploy/systemd/" + unit, encoding: .utf8)
        return Dictionary(text.split(separator: "\n").filter { !$0.hasPrefix("#") && $0.contains("=") }.map {
            let parts = $0.split(separator: "=", maxSplits: 1)
            return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
        }, uniquingKeysWith: { $1 })
    }

    @Test("both units: notify with a watchdog that restarts a hung service, bounded memory and tasks, the password as a credential")
    func watchdogAndLimits() throws {
        for unit in ["beacon-gateway@.service", "beacon-brain.service"] {
            let settings = try Self.settings(unit)
            #expect(settings["Type"] == "notify", "\(unit)")
            #expect(settings["NotifyAccess"] == "main", "\(unit)")
            #expect(settings["WatchdogSec"] == "4", "\(unit)")
            #expect(settings["Restart"] == "on-failure", "\(unit): a watchdog timeout counts as a failure")
            // A stuck loop is reported after 2 × WatchdogSec (checked every WatchdogSec / 2) and
            // the service is back RestartSec later: within 15 s.
            let watchdog = Double(settings["WatchdogSec"] ?? "") ?? 99, restart = Double(settings["RestartSec"] ?? "") ?? 99
            #expect(2.5 * watchdog + restart <= 15, "\(unit)")
            #expect(settings["MemoryMax"] != nil && settings["TasksMax"] != nil, "\(unit)")
            #expect(settings["SystemCallFilter"] == "~@privileged @resources", "\(unit)")
            #expect(settings["LoadCredential"]?.hasPrefix("mqtt-password:/etc/beaconbridge/credentials/") == true
                        || unit == "beacon-brain.service", "\(unit)")
        }
        let text = try String(contentsOfFile: Programs.repositoryRoot + "/deploy/systemd/beacon-brain.service", encoding: .utf8)
        #expect(text.contains("LoadCredential=mqtt-password:/etc/beaconbridge/credentials/brain.password"))
        #expect(text.contains("LoadCredential=brain-secret:/etc/beaconbridge/credentials/brain.secret"))
    }

    @Test("the gateway runs unprivileged with exactly CAP_NET_RAW, in the host's network namespace; its adapter is brought up as root before")
    func gatewayPrivileges() throws {
        let settings = try Self.settings("beacon-gateway@.service")
        #expect(settings["User"] == "beaconbridge")
        #expect(settings["AmbientCapabilities"] == "CAP_NET_RAW")
        #expect(settings["CapabilityBoundingSet"] == "CAP_NET_RAW")
        #expect(settings["ExecStartPre"]
                    == "-+/usr/local/bin/beacon-gateway --config /etc/beaconbridge/fleet.json --id %i --adapter-up")
        #expect(settings["NoNewPrivileges"] == "yes")
        // No AF_UNIX: the notifications go out on a socketpair (ServiceManagerTests.gatewayWithoutUnixSockets).
        #expect(settings["RestrictAddressFamilies"] == "AF_INET AF_INET6 AF_BLUETOOTH")
        #expect(settings["PrivateNetwork"] == nil, "Bluetooth sockets exist only in the host's network namespace")
        #expect(settings["Restart"] == "on-failure")
        #expect(settings["KillSignal"] == "SIGTERM")
        #expect(settings["ExecStart"] == "/usr/local/bin/beacon-gateway --config /etc/beaconbridge/fleet.json --id %i")
    }
}
