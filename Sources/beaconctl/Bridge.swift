import ArgumentParser
import BeaconKit
import CommandLineSupport
import SystemCalls
import Config

struct Bridge: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a store broker's Mosquitto bridge to the central broker, from the fleet config.",
        discussion: """
        For a chain with a broker in every store (stores[].broker) bridged to a central broker
        (the fleet's broker; bridge.url when the stores reach it by another address). The bridge
        carries out what the store's gateways and apps publish (sightings at QoS 0, retained
        presence, joins, statuses at QoS 1) and brings in what the brain publishes for the store
        (fleet presence, ads, roster, inbox replies, the rules' topics, fleet/config, commands).
        Sessions are persistent on both sides, so what changes while the WAN is down is queued in
        the store and delivered in order. Mosquitto says 1 on stores/<major>/bridge while the
        bridge is up; its will at the centre says 0, and the brain then holds the store's
        presence as unknown instead of taking everyone as gone. docs/fleet.md explains each line.

        Without --out, prints the store's bridge configuration. With --out DIR, writes for each
        store:
          DIR/bridge-<major>.conf          for /etc/mosquitto/conf.d/ on the store's broker
                                           (mode 0600: it holds the bridge's password)
          DIR/bridge-<major>.store.acl     the bridge's lines for the store broker's ACL
          DIR/bridge-<major>.central.acl   the bridge's lines for the central broker's ACL

        The password is read from stores[].bridge.passwordFile (Mosquitto 2.0 takes a bridge's
        password from its configuration only). Warnings on stderr for a bridge without TLS or
        without credentials.

        Examples:
          beaconctl bridge fleet.json --store 100 > /etc/mosquitto/conf.d/bridge.conf
          beaconctl bridge fleet.json --all --out /tmp/bridges
        """)

    @Argument(help: ArgumentHelp("The fleet config.", valueName: "FLEET.json"))
    var path: String

    @Option(name: .long, help: ArgumentHelp("The store (major), or several comma-separated.", valueName: "MAJOR"))
    var store: String?

    @Flag(name: .long, help: "Every store with a broker of its own.")
    var all = false

    @Option(name: .long, help: ArgumentHelp("Write the files into this directory (created if missing).", valueName: "DIR"))
    var out: String?

    func validate() throws {
        guard (store == nil) != !all else { throw ValidationError("give --store MAJOR or --all (one of them)") }
        _ = try majors()
        if all && out == nil { throw ValidationError("--all writes several files: give --out DIR") }
    }

    func majors() throws -> [UInt16]? {
        guard let store else { return nil }
        return try store.split(separator: ",", omittingEmptySubsequences: false).map { part in
            let text = String(part.trimmingBlanks)
            guard let major = UInt16(text), String(major) == text else {
                throw ValidationError("--store: \"\(text)\" is not a store number (0-65535)")
            }
            return major
        }
    }

    func run() throws {
        let config = try ConfigLoading.load(path)
        let list = try majors() ?? config.bridgedStores.map(\.major)
        guard !list.isEmpty else { throw CommandFailure("\(path): no store has a broker of its own (stores[].broker)") }
        if list.count > 1 && out == nil { throw CommandFailure("several stores write several files: give --out DIR") }
        let plans: [BridgePlan]
        do {
            plans = try list.map { major throws(BridgePlan.PlanError) in try BridgePlan(config: config, store: major) }
        } catch {
            throw CommandFailure("\(path): \(error)")
        }
        warn(config, plans)
        if let out {
            do { try FileSystem.makeDirectories(out) } catch { throw CommandFailure("cannot create \(out): \(error)", status: .failure) }
        }
        for plan in plans {
            let text = plan.mosquittoConfiguration(password: try password(plan))
            guard let out else {
                printLine(text.hasSuffix("\n") ? String(text.dropLast()) : text)
                continue
            }
            let base = out + "/bridge-\(plan.store)"
            do {
                try FileSystem.write(base + ".conf", Array(text.utf8), mode: 0o600)
                try FileSystem.write(base + ".store.acl", Array(plan.storeACL.utf8))
                try FileSystem.write(base + ".central.acl", Array(plan.centralACL.utf8))
            } catch {
                throw CommandFailure("cannot write \(base).*: \(error)", status: .failure)
            }
            printLine("wrote \(base).conf, .store.acl, .central.acl (store \(plan.store) → \(plan.address), "
                      + "\(plan.topics.count) topics)")
        }
    }

    func password(_ plan: BridgePlan) throws -> String? {
        guard let file = plan.credentials?.passwordFile else { return nil }
        let text: String
        do { text = try FileSystem.readText(file) } catch {
            throw CommandFailure("store \(plan.store)'s bridge password: cannot read \(file): \(error)", status: .failure)
        }
        let first = String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
        guard !first.trimmingBlanks.isEmpty else {
            throw CommandFailure("store \(plan.store)'s bridge password: \(file) is empty", status: .failure)
        }
        return first
    }

    func warn(_ config: FleetConfig, _ plans: [BridgePlan]) {
        if !config.bridgeURL.tls {
            writeStandardError("warning: the bridges reach \(config.bridgeURL) without TLS: the stores' traffic crosses the WAN in clear (use mqtts:// and bridge.tls)\n")
        }
        if config.bridgeTLS?.insecure == true {
            writeStandardError("warning: bridge.tls.insecure skips the central broker's host-name check; never in production\n")
        }
        for plan in plans where plan.credentials?.username == nil && plan.credentials?.certFile == nil {
            writeStandardError("warning: store \(plan.store)'s bridge has no credentials (stores[].bridge.username/passwordFile or certFile/keyFile): the central broker must accept it anonymously\n")
        }
    }
}
