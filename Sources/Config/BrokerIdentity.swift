public import BeaconKit
/// Who each part of BeaconBridge is on the broker.
///
/// Every part logs in as itself, so a broker ACL can bind topics to the login: the user
/// name is the name its topics carry (`gateways/<id>/…`, `observers/<client>/…`), and the
/// client id is derived from the role and that name, so no two parts share one and take
/// each other's connection over. A fleet config therefore names no user and no client id:
/// one config serves every gateway and brain. `--broker mqtt://user@host` on a command
/// line still picks another user for that one process.
public enum BrokerIdentity {
    /// The brain's user name (`beaconctl provision` writes its password and ACL).
    public static let brain = "brain"
    /// The operator's tools: `beaconctl config push`, commands to gateways.
    public static let operatorUser = "operator"
    /// A read-only screen: rosters, fleet presence, gateway status (the store page). The
    /// one shared display login of fleets provisioned before displays had one each
    /// (`displayUser(_:)`); kept by `beaconctl provision` while its password exists.
    public static let display = "display"
    /// Home Assistant's login: reads the discovery configs and the topics its entities
    /// read, writes nothing but its birth message.
    public static let homeAssistant = "homeassistant"
    /// Names no gateway or observer may take: they belong to the roles above.
    public static let reserved: Set<String> = [brain, operatorUser, display, homeAssistant]

    /// Whether `name` belongs to a role: one of `reserved`, or a display's login.
    public static func isReserved(_ name: String) -> Bool {
        reserved.contains(name) || name.hasPrefix(displayPrefix)
    }

    /// The roles' names as a config error lists them.
    public static var reservedList: String {
        (reserved.sorted() + [displayPrefix + "<name>"]).sorted().joined(separator: ", ")
    }

    static let displayPrefix = "display-"

    /// Each screen (one `beacon-web`) logs in as `display-<name>`, and takes that as its
    /// client id: two screens on one login would knock each other off the broker, which
    /// uses user names as client ids.
    public static func displayUser(_ name: String) -> String { displayPrefix + name }

    /// A gateway logs in as its id.
    public static func gatewayUser(_ id: String) -> String { id }

    /// A gateway's client id: `beacon-gateway-<id>`.
    public static func gatewayClientID(_ id: String) -> String { "beacon-gateway-" + id }

    /// A brain's default client id: `beacon-brain`, with its stores appended
    /// (`beacon-brain-100-101`) so brains splitting a fleet keep apart.
    public static func brainClientID(stores: Set<UInt16>) -> String {
        stores.isEmpty ? "beacon-brain" : "beacon-brain-" + stores.sorted().map(String.init).joined(separator: "-")
    }
}

/// Something risky about how a part connects to its broker, said loudly at start-up and by
/// `beaconctl config check`.
public struct BrokerRisk: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// No TLS to another host: passwords and personal data readable on the network.
        case plaintext
        /// No password: the part connects anonymously.
        case anonymous
        /// `tls.insecure`: the broker's host name is not checked.
        case insecureTLS
    }

    public var kind: Kind
    public var message: String

    public var description: String { message }
}

extension BrokerConfig {
    /// Whether the connection uses TLS (`mqtts://` or a `tls` section).
    public var usesTLS: Bool { url.tls || tls != nil }

    /// Whether the broker is on this machine (plaintext is fine there).
    public var isLoopback: Bool { BrokerURL.isLoopback(host: url.host) }

    /// What is risky about connecting this way. `hasPassword`: whether a password was found
    /// (password file, credential or environment); `nil` when that is not known yet.
    public func risks(hasPassword: Bool?) -> [BrokerRisk] {
        var risks: [BrokerRisk] = []
        if !usesTLS && !isLoopback {
            risks.append(BrokerRisk(kind: .plaintext, message:
                "plaintext MQTT to \(url.host): passwords, profiles and photos cross the network readable by anyone on it; "
                + "use mqtts:// (beaconctl provision writes a CA and the broker's certificate)"))
        }
        if hasPassword == false {
            risks.append(BrokerRisk(kind: .anonymous, message:
                "no broker password (passwordFile, $CREDENTIALS_DIRECTORY/mqtt-password or BEACONBRIDGE_MQTT_PASSWORD): "
                + "connecting anonymously; a broker that lets anonymous clients in lets anyone forge presence, joins "
                + "and config and read every profile (beaconctl provision writes credentials and an ACL)"))
        }
        if tls?.insecure == true {
            risks.append(BrokerRisk(kind: .insecureTLS, message:
                "broker.tls.insecure: the broker's certificate is not checked against its host name, so any server "
                + "holding a certificate of the same CA can pose as the broker; never in production"))
        }
        return risks
    }

    /// Why this broker may not be used, or `nil`: plaintext to another host unless
    /// `allowPlaintext` says the network is trusted.
    public var refusal: String? {
        guard !usesTLS, !isLoopback, !allowPlaintext else { return nil }
        return "plaintext MQTT to \(url.host), another host: use mqtts:// with broker.tls.caFile (beaconctl provision "
            + "writes the certificates), or set broker.allowPlaintext to true for a network you trust"
    }
}
