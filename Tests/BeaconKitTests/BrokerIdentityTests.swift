import BeaconKit
import Config
import Testing

/// One fleet config serves every gateway and brain: nothing in it may make them share an
/// identity, and connecting in a risky way is refused or said loudly.
@Suite("Broker identity and risks")
struct BrokerIdentityTests {
    @Test(arguments: [
        (#"{"broker": {"clientId": "shop-12"}}"#,
         "broker.clientId: a client id shared by every gateway and brain makes each take the others' connection over; "
         + "remove it: a gateway connects as beacon-gateway-<id>, a brain as beacon-brain[-<stores>] or its --client-id"),
        (#"{"broker": {"username": "gateway"}}"#,
         "broker.username: a user name shared by every gateway and brain lets each speak for all of them; remove it: "
         + #"a gateway logs in as its id, the brain as "brain" (beaconctl provision writes their passwords and the ACL)"#),
        (#"{"broker": {"url": "mqtt://gateway@127.0.0.1"}}"#,
         #"broker.url: the user "gateway" would be shared by every gateway and brain; remove it (each logs in as "#
         + "itself; --broker mqtt://user@host picks a user for one process)"),
    ])
    func sharedIdentitiesAreConfigErrors(_ json: String, _ error: String) {
        #expect(FleetConfigTests.errors(json) == [error])
    }

    @Test func identitiesDerivedFromRoleAndName() {
        #expect(BrokerIdentity.gatewayUser("door") == "door")
        #expect(BrokerIdentity.gatewayClientID("door") == "beacon-gateway-door")
        #expect(BrokerIdentity.brainClientID(stores: []) == "beacon-brain")
        #expect(BrokerIdentity.brainClientID(stores: [101, 100]) == "beacon-brain-100-101")
        var broker = BrokerConfig(url: BrokerURL(host: "localhost"))
        #expect(broker.username(default: BrokerIdentity.brain) == "brain")
        broker.username = "brain-north"  // --broker mqtt://brain-north@…
        #expect(broker.username(default: BrokerIdentity.brain) == "brain-north")
    }

    @Test func gatewayIdsCannotTakeTheRolesNames() {
        let roles = "brain, display, display-<name>, homeassistant, operator"
        #expect(FleetConfigTests.errors(#"{"gateways": [{"id": "brain"}, {"id": "display"}, {"id": "display-lobby"}, {"id": "homeassistant"}]}"#) == [
            #"gateways[0].id: "brain" is the name of another role (\#(roles)); pick another id"#,
            #"gateways[1].id: "display" is the name of another role (\#(roles)); pick another id"#,
            #"gateways[2].id: "display-lobby" is the name of another role (\#(roles)); pick another id"#,
            #"gateways[3].id: "homeassistant" is the name of another role (\#(roles)); pick another id"#,
        ])
    }

    @Test func plaintextToAnotherHostIsRefusedUnlessAllowed() throws {
        #expect(FleetConfigTests.errors(#"{"broker": {"url": "mqtt://broker.store.lan"}}"#) == [
            "broker.url: plaintext MQTT to broker.store.lan, another host: use mqtts:// with broker.tls.caFile "
            + "(beaconctl provision writes the certificates), or set broker.allowPlaintext to true for a network you trust"])
        for url in ["mqtt://localhost", "mqtt://127.0.0.1:1884", "mqtt://[::1]", "mqtts://broker.store.lan"] {
            #expect(FleetConfigTests.errors(#"{"broker": {"url": "\#(url)"}}"#) == [], "\(url)")
        }
        let allowed = try FleetConfig.parse(#"{"broker": {"url": "mqtt://10.0.0.5", "allowPlaintext": true}}"#)
        #expect(allowed.broker.risks(hasPassword: true).map(\.kind) == [.plaintext])
        #expect(!BrokerURL.isLoopback(host: "127.example.com"))
        #expect(!BrokerURL.isLoopback(host: "10.0.0.5"))
    }

    /// A path to another host is bounded by default; a loopback broker has no path to lose.
    @Test func linkTimeoutByDefaultToAnotherHostOnly() throws {
        let config = try FleetConfig.parse(#"{"broker": {"url": "mqtt://10.0.0.5,127.0.0.1:1884", "allowPlaintext": true}}"#)
        #expect(config.broker.linkTimeout == nil)
        var options = MQTTClientOptions(config.broker, identity: "brain", clientID: "brain", password: nil)
        #expect(options.linkTimeout(to: "10.0.0.5") == MQTTClientOptions.defaultLinkTimeout)
        #expect(options.linkTimeout(to: "127.0.0.1") == 0)
        #expect(options.linkTimeout(to: "localhost") == 0)
        options.linkTimeout = 0
        #expect(options.linkTimeout(to: "10.0.0.5") == 0)
        options.linkTimeout = 2
        #expect(options.linkTimeout(to: "127.0.0.1") == 2)
    }

    @Test func risksSaidLoudly() throws {
        let secure = try FleetConfig.parse(#"{"broker": {"url": "mqtts://b.lan", "tls": {"caFile": "/ca.pem"}}}"#)
        #expect(secure.broker.risks(hasPassword: true) == [])
        #expect(secure.broker.risks(hasPassword: nil) == [])
        #expect(secure.broker.risks(hasPassword: false).map(\.kind) == [.anonymous])
        let insecure = try FleetConfig.parse(#"{"broker": {"url": "mqtts://b.lan", "tls": {"caFile": "/ca.pem", "insecure": true}}}"#)
        let risks = insecure.broker.risks(hasPassword: false)
        #expect(risks.map(\.kind) == [.anonymous, .insecureTLS])
        #expect(risks.last?.message.hasPrefix("broker.tls.insecure: the broker's certificate is not checked") == true)
    }
}
