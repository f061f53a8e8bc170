public import Config

/// How an `MQTTClient` connects. Fixed once the client is made.
public struct MQTTClientOptions: Sendable {
    /// Host, port, TLS (`mqtts://`) and a default user name.
    public var broker: BrokerURL
    /// The MQTT client identifier; the broker disconnects an older connection with the same id.
    public var clientID: String
    /// Overrides `broker.username` when set.
    public var username: String?
    public var password: String?
    /// CA, client certificate and key. TLS is used when this is set or `broker.tls` is true;
    /// without a CA file or path the system's store (`/etc/ssl/certs`) is trusted.
    public var tls: TLSConfig?
    /// Seconds between PINGREQs when idle (0 disables, otherwise at least 5).
    public var keepalive: Int = 30
    public var version: MQTTVersion = .v311
    /// The last will: published by the broker when this client vanishes without a DISCONNECT.
    public var will: MQTTMessage?
    /// When false the broker keeps subscriptions and queued QoS>0 messages across connections.
    public var cleanSession: Bool = true
    /// Seconds between reconnection attempts: starts at the lower bound, doubles after each
    /// failure up to the upper bound, and starts over after a successful connection.
    public var reconnectDelay: ClosedRange<Double> = 1...30

    public init(broker: BrokerURL, clientID: String) {
        self.broker = broker
        self.clientID = clientID
    }

    /// The options a fleet config's `broker` section gives: URL, TLS, keepalive and MQTT
    /// version, for the part whose user name is `identity` (`BrokerIdentity`; a command
    /// line's `--broker mqtt://user@…` wins); the password comes from the caller.
    public init(_ broker: BrokerConfig, identity: String, clientID: String, password: String?) {
        self.init(broker: broker.url, clientID: clientID)
        username = broker.username(default: identity)
        self.password = password
        tls = broker.tls
        keepalive = broker.keepalive
        version = broker.mqttVersion
    }
}
