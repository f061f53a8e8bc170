import BeaconKit
import Contract
import Config
import CoreHost
import GatewayCore
import HCI
import LiveClock
import Logging
import MQTT
import SystemCalls

/// The gateway's commands (`gateways/<id>/cmd`, Contract's `GatewayCommand`), each answered on
/// `gateways/<id>/events` (the brain's `{"reports":"send"}` excepted).
extension GatewayService {
    /// A command on `gateways/<id>/cmd` (`GatewayCommand`), answered on `gateways/<id>/events`.
    func command(_ body: Inbound.Body<GatewayCommand>, payload: String) {
        let topics = config.topics
        func reply(_ command: String, _ status: CommandReply.Status, _ detail: String? = nil) {
            let text = GatewayEvent.command(CommandReply(command: command, status: status, detail: detail, at: self.clock.now())).json
            input { $0.publish(MQTTMessage(topic: topics.events(ofGateway: gateway.id), text: text, qos: 1, retain: false)) }
        }
        guard case .value(let command) = body else {
            logger.warning("ignored a malformed command", metadata: ["payload": "\(payload.prefix(200))"])
            reply("?", .rejected, GatewayCommand.expected)
            return
        }
        switch command {
        case .sendReports(let after):
            // The brain, subscribed again after an outage, asks for what this gateway kept
            // (GatewayEngine.connected), or for what it sent after `after` while the brain's
            // own connection was down: no reply, it is the brain's own handshake.
            input { $0.brainReady(resendingAfter: after) }
        case .scan(let paused):
            let enable = !paused
            host.withLock { $0.core.engine.setScanningPaused(!enable) }
            Task { await source.setScanning(enable) }
            logger.info("scanning \(enable ? "resumed" : "paused") by command")
            reply("scan", .ok, enable ? "resumed" : "paused")
        case .reload:
            guard let configPath else { return reply("reload", .rejected, "the gateway was not started from a config file") }
            do {
                let text = try FileSystem.readText(configPath)
                let new = try FleetConfig.parse(text)
                apply(new, origin: configPath)
                reply("reload", .ok)
            } catch let error as ConfigErrors {
                input { $0.reject(error.errors.map(\.description), origin: configPath, at: self.clock.now()) }
                reply("reload", .rejected, "invalid config; the last good one stays")
            } catch {
                reply("reload", .rejected, "\(error)")
            }
        case .advertise(let advertise):
            let wanted: AdvertiseConfig?
            switch advertise {
            case .stop:
                wanted = nil
            case .configured:
                guard let configured = gateway.advertise else {
                    return reply("advertise", .rejected, "gateway \"\(gateway.id)\" has no advertise settings in the config")
                }
                wanted = resolved(configured)
            case .settings(let value):
                do {
                    wanted = resolved(try AdvertiseConfig.parse(value))
                } catch {
                    return reply("advertise", .rejected, error.errors.map(\.description).joined(separator: "; "))
                }
                if let wanted, wanted.proof, proof == nil || wanted.beacon.major != gateway.advertise?.beacon.major {
                    return reply("advertise", .rejected, "this gateway holds no proof of presence of store \(wanted.beacon.major)")
                }
            }
            Task {
                do {
                    let change = try await source.setAdvertising(wanted)
                    configuredAdvertising.inForce = wanted
                    logger.info("advertising \(change.rawValue) by command", metadata: [
                        "beacon": "\(wanted.map { "\($0.beacon.uuid)/\($0.beacon.major)/\($0.beacon.minor)" } ?? "none")",
                    ])
                    reply("advertise", .ok, Self.describe(change, wanted))
                } catch {
                    logger.warning("advertise command failed", metadata: ["error": "\(error)"])
                    reply("advertise", .rejected, "\(error)")
                }
            }
        case .unknown(let name):
            reply(name, .rejected, "unknown command")
        }
    }

    static func describe(_ change: AdvertisingChange, _ config: AdvertiseConfig?) -> String {
        switch change {
        case .stopped: return "advertising stopped"
        case .pending: return "the controller is not reachable now; the change applies when it is back"
        case .started:
            guard let config else { return "advertising" }
            let beacon = config.beacon
            return "advertising \(beacon.uuid) major \(beacon.major) minor \(beacon.minor), "
                + "\(beacon.txPower) dBm at 1 m, every \(config.intervalMs) ms"
        }
    }
}
