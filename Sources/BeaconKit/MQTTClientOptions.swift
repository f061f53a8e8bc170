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
    /// Seconds after which the connection is given up when the path to the broker has gone
    /// silent: data sent and not acknowledged by the broker's host for this long, or an idle
    /// connection whose keepalive probes go unanswered as long (`TCPLiveness`). A node cut off
    /// from the network is noticed in this time rather than in one to two `keepalive`s, and
    /// the client moves to the next node of its URL. 0 turns it off; nil (the default) means
    /// `defaultLinkTimeout` to another host and off to a loopback broker, which has no path
    /// to lose (a dead local broker resets the connection at once; a stalled one is
    /// `keepalive`'s to notice).
    ///
    /// The cost: a live path that leaves what was sent unacknowledged this long (a queue of
    /// seconds on a saturated uplink, a broker host that stops reading while the client's
    /// data fills its window) is dropped and connected again: set it above the worst
    /// round-trip time of the slowest live link.
    public var linkTimeout: Double?
    /// `linkTimeout`'s default for a broker on another host (s).
    public static let defaultLinkTimeout = 3.0
    public var version: MQTTVersion = .v311
    /// The last will: published by the broker when this client vanishes without a DISCONNECT.
    public var will: MQTTMessage?
    /// When false the broker keeps subscriptions and queued QoS>0 messages across connections.
    public var cleanSession: Bool = true
    /// Seconds between reconnection attempts: starts at the lower bound, doubles after each
    /// failure up to the upper bound, and starts over after a successful connection.
    public var reconnectDelay: ClosedRange<Double> = 1...30
    /// Topics (exact names, no wildcards) whose every message replaces the last, as a
    /// retained config does: they arrive on `MQTTClient.newest(on:)` rather than `events`,
    /// which holds at most one of each not yet taken, so pushes that come faster than
    /// they are read wait as one message, not as a queue (the older ones are dropped
    /// unread and counted: `MQTTClient.supersededMessages`).
    public var newestOnly: Set<String> = []
    /// The highest QoS a retained message goes out at (nil: as the message says). The brain
    /// sets 0 at a NATS centre: nats-server 2.9 acknowledges a QoS 1 retained publish only
    /// once JetStream has stored it on the replicas, one at a time per connection, so a
    /// connection's retained QoS 1 publishes queue behind each other (docs/fleet.md, "What
    /// the brain's output costs at a NATS centre"). The broker stores a QoS 0 one alike.
    public var retainedQoS: Int?
    /// Seconds at least between the starts of two rounds of the network loop while a steady
    /// stream comes (0: none). For a consumer that handles its messages on the network thread
    /// (`EventSink`), which says after each round whether what it read was such a stream
    /// (`EventSink.roundEnded`): then the thread pauses until this much time has passed since
    /// the round began, what arrives meanwhile waits in the socket, and the next round reads
    /// all of it, so the stream takes one wake-up for several messages rather than one each
    /// (its acknowledgements too). A message after a quiet spell, or after a round the
    /// consumer did not call a stream (a request whose sender waits), is read at once. The
    /// brain: docs/PERFORMANCE.md section 11, "Fewer wake-ups".
    public var roundSpacing: Double = 0

    /// The link timeout for a connection to `host` (s); 0 when off.
    public func linkTimeout(to host: String) -> Double {
        linkTimeout ?? (BrokerURL.isLoopback(host: host) ? 0 : Self.defaultLinkTimeout)
    }

    /// Whether the connection uses TLS (`mqtts://` or TLS settings).
    public var usesTLS: Bool { broker.tls || tls != nil }

    public init(broker: BrokerURL, clientID: String) {
        self.broker = broker
        self.clientID = clientID
    }
}

/// The MQTT protocol version a client speaks.
public enum MQTTVersion: String, Sendable, Equatable {
    case v311 = "3.1.1"
    case v5 = "5"
}

/// TLS to the broker: the CA that verifies it (a file or a directory; the system's store
/// when neither), and a client certificate and key where the broker asks for one.
public struct TLSConfig: Sendable, Equatable {
    public var caFile: String?
    public var caPath: String?
    public var certFile: String?
    public var keyFile: String?
    /// Skip the host-name check (a lab broker with an IP-only certificate). Never in production.
    public var insecure: Bool

    public init(caFile: String? = nil, caPath: String? = nil, certFile: String? = nil, keyFile: String? = nil,
                insecure: Bool = false) {
        self.caFile = caFile
        self.caPath = caPath
        self.certFile = certFile
        self.keyFile = keyFile
        self.insecure = insecure
    }
}
