import BeaconKit
import Contract
import Config
import Testing

@Suite("Topics and endpoints")
struct TopicsTests {
    static let id = BeaconRef(major: 12, minor: 345)
    static let eddystone = BeaconRef(namespace: EddystoneNamespace(hex: "00112233445566778899")!,
                                     instance: EddystoneInstance(hex: "aabbccddeeff")!)

    /// README "MQTT contract": every topic of the contract.
    @Test(arguments: ["", "acme", "acme/shop-12"])
    func build(prefix: String) {
        let topics = Topics(prefix: prefix)
        let p = prefix.isEmpty ? "" : prefix + "/"
        #expect(topics.beacon(Self.id) == p + "beacons/12/345")
        #expect(topics.sightings(of: Self.id) == p + "beacons/12/345")
        #expect(topics.presence(of: Self.id, seenBy: "door-1") == p + "beacons/12/345/presence/door-1")
        #expect(topics.presence(of: Self.id) == p + "beacons/12/345/presence")
        #expect(topics.ad(of: Self.id) == p + "beacons/12/345/ad")
        #expect(topics.zoneEvents(of: Self.id) == p + "beacons/12/345/events")
        #expect(topics.observer("phone-7", of: Self.id) == p + "beacons/12/345/observers/phone-7")
        #expect(topics.status(ofGateway: "door-1") == p + "gateways/door-1/status")
        #expect(topics.health(ofGateway: "door-1") == p + "gateways/door-1/health")
        #expect(topics.commands(ofGateway: "door-1") == p + "gateways/door-1/cmd")
        #expect(topics.events(ofGateway: "door-1") == p + "gateways/door-1/events")
        #expect(topics.rssiReports(ofGateway: "door-1") == p + "gateways/door-1/rssi")
        #expect(topics.calibration(ofGateway: "door-1") == p + "gateways/door-1/calibration")
        #expect(topics.fleetConfig == p + "fleet/config")
        #expect(topics.status(ofObserver: "phone-7") == p + "observers/phone-7/status")
        #expect(topics.inbox(of: "phone-7") == p + "observers/phone-7/inbox")
        #expect(topics.roster(ofStore: 12) == p + "stores/12/roster")
        #expect(topics.customer("phone-7", ofStore: 12) == p + "stores/12/customers/phone-7")
        #expect(topics.bridgeStatus(ofStore: 12) == p + "stores/12/bridge")
        #expect(topics.brainStatus == p + "brain/status")
        #expect(topics.visitRecord(of: Self.id) == p + "brain/visits/12/345")
        #expect(topics.beaconHealth(of: Self.eddystone) == p + "brain/beacons/eddystone/00112233445566778899/aabbccddeeff")
        #expect(topics.presenceFilter(seenBy: "door-1") == [p + "beacons/+/+/presence/door-1", p + "eddystone/+/+/presence/door-1"])
        #expect(topics.beacon(Self.eddystone) == p + "eddystone/00112233445566778899/aabbccddeeff")
        #expect(topics.telemetry(of: Self.eddystone) == p + "eddystone/00112233445566778899/aabbccddeeff/telemetry")
    }

    /// Every topic parses back to what built it, in one `parse`.
    @Test(arguments: ["", "acme", "acme/shop-12"])
    func parseRoundTrip(prefix: String) {
        let topics = Topics(prefix: prefix)
        let e = Self.eddystone
        let cases: [(String, Topics.Kind)] = [
            (topics.sightings(of: Self.id), .beacon(Self.id, .sighting)),
            (topics.presence(of: Self.id, seenBy: "door-1"), .beacon(Self.id, .gatewayPresence(gateway: "door-1"))),
            (topics.presence(of: Self.id), .beacon(Self.id, .fleetPresence)),
            (topics.observer("phone-7", of: Self.id), .beacon(Self.id, .observer(client: "phone-7"))),
            (topics.ad(of: Self.id), .beacon(Self.id, .ad)),
            (topics.zoneEvents(of: Self.id), .beacon(Self.id, .zoneEvents)),
            (topics.sightings(of: e), .beacon(e, .sighting)),
            (topics.presence(of: e, seenBy: "door-1"), .beacon(e, .gatewayPresence(gateway: "door-1"))),
            (topics.presence(of: e), .beacon(e, .fleetPresence)),
            (topics.observer("phone-7", of: e), .beacon(e, .observer(client: "phone-7"))),
            (topics.ad(of: e), .beacon(e, .ad)),
            (topics.zoneEvents(of: e), .beacon(e, .zoneEvents)),
            (topics.telemetry(of: e), .beacon(e, .telemetry)),
            (topics.status(ofGateway: "door-1"), .gatewayStatus("door-1")),
            (topics.health(ofGateway: "door-1"), .gatewayHealth("door-1")),
            (topics.commands(ofGateway: "door-1"), .gatewayCommand("door-1")),
            (topics.events(ofGateway: "door-1"), .gatewayEvents("door-1")),
            (topics.rssiReports(ofGateway: "door-1"), .gatewayRSSI("door-1")),
            (topics.calibration(ofGateway: "door-1"), .gatewayCalibration("door-1")),
            (topics.status(ofObserver: "phone-7"), .observerStatus("phone-7")),
            (topics.inbox(of: "phone-7"), .inbox("phone-7")),
            (topics.roster(ofStore: 12), .roster(12)),
            (topics.customer("phone-7", ofStore: 12), .customer(store: 12, client: "phone-7")),
            (topics.bridgeStatus(ofStore: 12), .bridgeStatus(12)),
            (topics.fleetConfig, .fleetConfig),
            (topics.brainStatus, .brainStatus),
            (topics.visitRecord(of: Self.id), .brainRecord(.visit(Self.id))),
            (topics.visitRecord(of: e), .brainRecord(.visit(e))),
            (topics.answeredRecord(of: Self.id, client: "phone-7"), .brainRecord(.answered(Self.id, client: "phone-7"))),
            (topics.answeredRecord(of: e, client: "phone-7"), .brainRecord(.answered(e, client: "phone-7"))),
            (topics.beaconHealth(of: Self.id), .brainRecord(.health(Self.id))),
            (topics.sightings(of: BeaconRef(major: 0, minor: 65535)), .beacon(BeaconRef(major: 0, minor: 65535), .sighting)),
            (topics.brainEvents, .brainEvents),
            (topics.brainHealth("brain-1"), .brainHealth("brain-1")),
            (topics.brainSync("brain-1"), .brainSync("brain-1")),
            (topics.shardStatus("north"), .shardStatus("north")),
            (topics.shardHolder("north"), .shardHolder("north")),
            (topics.shardSync("north"), .shardSync("north")),
        ]
        for (topic, parsed) in cases {
            #expect(topics.parse(topic) == parsed, "\(topic)")
        }
        // A topic under another prefix, or under none, is not ours.
        #expect(Topics(prefix: "other").parse(topics.brainStatus) == nil)
        if !prefix.isEmpty {
            #expect(Topics().parse(topics.brainStatus) == nil)
            #expect(topics.parse("brain/status") == nil)
            #expect(topics.parse(prefix + "x/brain/status") == nil)
        }
    }

    /// Filters and ACL patterns come from the same builders, with `+` or `%u` in a level.
    @Test(arguments: ["", "acme"])
    func filtersAndPatterns(prefix: String) {
        let topics = Topics(prefix: prefix)
        let p = prefix.isEmpty ? "" : prefix + "/"
        let any = Topics.anyLevel
        let key = Self.eddystone.eddystone!
        #expect(topics.presence(of: .anyIBeacon, seenBy: any) == p + "beacons/+/+/presence/+")
        #expect(topics.observer(Topics.aclUser, of: .anyEddystone) == p + "eddystone/+/+/observers/%u")
        #expect(topics.observer(any, of: .ofStore(12)) == p + "beacons/12/+/observers/+")
        #expect(topics.ad(of: .eddystone(key)) == p + "eddystone/00112233445566778899/aabbccddeeff/ad")
        #expect(topics.presence(of: .one(Self.id)) == topics.presence(of: Self.id))
        #expect(topics.presence(of: .one(Self.eddystone)) == topics.presence(of: Self.eddystone))
        #expect(topics.visitRecord(of: .ofStore(12)) == p + "brain/visits/12/+")
        #expect(topics.answeredRecord(of: .anyEddystone, client: any) == p + "brain/answered/eddystone/+/+/+")
        #expect(topics.beaconHealth(of: .one(Self.eddystone)) == topics.beaconHealth(of: Self.eddystone))
        #expect(topics.everything(under: .stores) == p + "stores/#")
        #expect(topics.beaconHealthFilter == p + "brain/beacons/#")
        #expect(topics.inbox(of: Topics.aclUser) == p + "observers/%u/inbox")
        #expect(topics.gatewayStatusFilter == p + "gateways/+/status")
        #expect(topics.rosterFilter(ofStore: nil) == p + "stores/+/roster")
        #expect(topics.rosterFilter(ofStore: 12) == topics.roster(ofStore: 12))
        #expect(topics.customersFilter(ofStore: 12) == p + "stores/12/customers/+")
        #expect(topics.bridgeStatusFilter(ofStore: 12) == topics.bridgeStatus(ofStore: 12))
        #expect(topics.brainRecordFilters(ofStore: 12) == ["beacons/12/+/presence", "beacons/12/+/ad", "brain/visits/12/+",
                                                           "brain/answered/12/+/+", "brain/beacons/12/+"].map { p + $0 })
        #expect(topics.eddystoneFilters(of: nil) == ["eddystone/+/+/presence/+", "eddystone/+/+/observers/+",
                                                     "eddystone/+/+/telemetry"].map { p + $0 })
    }

    @Test(arguments: [
        "beacons/+/1", "beacons/1/#", "beacons/01/2", "beacons/1/02", "beacons/65536/1", "beacons/-1/2", "beacons/+1/2",
        "beacons/1/2/presence/", "beacons/1/2/presence/a+b", "beacons/1/2/presence/a#", "beacons/1/2/presence/$SYS",
        "beacons/1/2/observers/a\u{0}b", "beacons/1/2/unknown", "beacons/1/2/presence/door/extra", "beacons//2",
        "beacons/1", "beacons/١/2", "beacons/１/2", "gateways/$SYS/status", "gateways//status", "gateways/+/status",
        "gateways/door/reboot", "gateways/door/status/x", "observers/#/inbox", "observers/a/outbox",
        "stores/x/roster", "stores/12/ad", "fleet/configs", "brain/status/x", "/beacons/1/2", "beacons/1/2/",
        "", "/", "eddystone/00112233445566778899/AABBCCDDEEFF", "eddystone/0011/aabbccddeeff",
        "eddystone/00112233445566778899/aabbccddeeff/unknown", "beacons/1/2/telemetry", "stores/1/customers/a/b",
        "brain/visits/1", "brain/answered/1/2", "brain/visits/1/2/x", "gateways/door/calibration/x",
    ])
    func rejectsHostileOrForeignTopics(_ topic: String) {
        #expect(Topics().parse(topic) == nil)
    }

    /// `beaconctl forget --beacon` takes a beacon as the record topics name it.
    @Test func aBeaconIsReadBackFromItsRecordLevels() throws {
        let eddystone = BeaconRef(namespace: try #require(EddystoneNamespace(hex: "00112233445566778899")),
                                  instance: try #require(EddystoneInstance(hex: "aabbccddeeff")))
        for ref in [BeaconRef(major: 100, minor: 7), BeaconRef(major: 0, minor: 65535), eddystone] {
            #expect(BeaconRef(recordLevels: ref.recordLevels) == ref)
        }
        for text in ["100", "100/07", "100/65536", "100/7/x", "beacons/100/7", "/100/7", "eddystone/00112233445566778899",
                     "eddystone/00112233445566778899/AABBCCDDEEFF", "00112233445566778899/aabbccddeeff", ""] {
            #expect(BeaconRef(recordLevels: text) == nil, "\(text)")
        }
    }

    /// Levels are split on the byte `/`, as a broker splits them, even where a combining mark
    /// follows (one `Character` with the slash); names are checked as `problem(withSegment:)` does.
    @Test func levelsSplitAsABrokerSplitsThem() {
        #expect(Topics().segments(of: "observers/a/\u{301}inbox") == ["observers", "a", "\u{301}inbox"])
        #expect(Topics(prefix: "acme/shop-12").segments(of: "acme/shop-12/gateways/door/rssi") == ["gateways", "door", "rssi"])
        #expect(Topics().segments(of: "/a//") == ["", "a", "", ""])
        #expect(Topics().parse("gateways/door-1/rssi") == .gatewayRSSI("door-1"))
        #expect(Topics().parse("gateways/dǿr/rssi") == .gatewayRSSI("dǿr"))
        #expect(Topics().parse("observers/$me/inbox") == nil)
        #expect(Topics().parse("observers/a\u{7}b/inbox") == nil)
    }

    /// The topic the builders write for what `parse` found: `parse` must accept exactly these.
    static func built(_ kind: Topics.Kind, _ t: Topics) -> String {
        switch kind {
        case .beacon(let ref, let about):
            switch about {
            case .sighting: t.sightings(of: ref)
            case .gatewayPresence(let gateway): t.presence(of: ref, seenBy: gateway)
            case .fleetPresence: t.presence(of: ref)
            case .observer(let client): t.observer(client, of: ref)
            case .ad: t.ad(of: ref)
            case .zoneEvents: t.zoneEvents(of: ref)
            case .telemetry: t.telemetry(of: ref)
            }
        case .gatewayStatus(let g): t.status(ofGateway: g)
        case .gatewayHealth(let g): t.health(ofGateway: g)
        case .gatewayCommand(let g): t.commands(ofGateway: g)
        case .gatewayEvents(let g): t.events(ofGateway: g)
        case .gatewayRSSI(let g): t.rssiReports(ofGateway: g)
        case .gatewayCalibration(let g): t.calibration(ofGateway: g)
        case .observerStatus(let c): t.status(ofObserver: c)
        case .inbox(let c): t.inbox(of: c)
        case .roster(let store): t.roster(ofStore: store)
        case .customer(let store, let client): t.customer(client, ofStore: store)
        case .bridgeStatus(let store): t.bridgeStatus(ofStore: store)
        case .brainRecord(.visit(let ref)): t.visitRecord(of: ref)
        case .brainRecord(.answered(let ref, let client)): t.answeredRecord(of: ref, client: client)
        case .brainRecord(.health(let ref)): t.beaconHealth(of: ref)
        case .shardStatus(let s): t.shardStatus(s)
        case .shardHolder(let s): t.shardHolder(s)
        case .shardSync(let s): t.shardSync(s)
        case .fleetConfig: t.fleetConfig
        case .brainStatus: t.brainStatus
        case .brainEvents: t.brainEvents
        case .brainHealth(let c): t.brainHealth(c)
        case .brainSync(let c): t.brainSync(c)
        }
    }

    /// `parse` reads the topic's bytes (levels as byte ranges, the prefix and keywords
    /// compared byte for byte): every topic it accepts, among 20,000 made by changing the
    /// contract's topics a level or a byte at a time, is the one the builders write for what
    /// it found, with names checked as `problem(withSegment:)` checks them; and each change
    /// that makes a topic the builders cannot write is refused.
    @Test(arguments: ["", "acme", "acme/shop-12", "café"])
    func whatParsesIsWhatTheBuildersWrite(prefix: String) throws {
        let t = Topics(prefix: prefix)
        let e = Self.eddystone
        let seeds = [
            t.sightings(of: Self.id), t.presence(of: Self.id, seenBy: "door-1"), t.presence(of: Self.id),
            t.observer("phone-7", of: e), t.telemetry(of: e), t.zoneEvents(of: Self.id), t.ad(of: e),
            t.rssiReports(ofGateway: "s12-door"), t.status(ofGateway: "g"), t.calibration(ofGateway: "door-1"),
            t.inbox(of: "phone-7"), t.customer("phone-7", ofStore: 12), t.bridgeStatus(ofStore: 0), t.fleetConfig,
            t.answeredRecord(of: e, client: "phone-7"), t.beaconHealth(of: Self.id), t.shardHolder("north"),
            t.brainHealth("brain-1"), t.brainEvents, t.roster(ofStore: 65535),
        ]
        // Whole levels: keywords of other places, numbers spelled other ways, names no id can be.
        let levels = ["beacons", "eddystone", "gateways", "observers", "stores", "brain", "fleet", "config", "presence",
                      "observers", "ad", "events", "telemetry", "rssi", "status", "health", "cmd", "calibration", "inbox",
                      "roster", "bridge", "customers", "visits", "answered", "shards", "holder", "sync", "0", "00", "7",
                      "65535", "65536", "-1", "+", "#", "", "$SYS", "a+b", "dǿr", "d\u{301}", "\u{212A}", "tab\t",
                      "Presence", "presence ", "00112233445566778899", "aabbccddeeff", "AABBCCDDEEFF", "acme", "café"]
        var random = SystemRandomNumberGenerator()
        var accepted = 0
        for _ in 0..<20_000 {
            var topic = seeds.randomElement(using: &random)!
            for _ in 0...Int.random(in: 0...2, using: &random) {
                var parts = topic.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
                let i = Int.random(in: 0..<parts.count, using: &random)
                switch Int.random(in: 0..<5, using: &random) {
                case 0: parts[i] = levels.randomElement(using: &random)!
                case 1: parts.insert(levels.randomElement(using: &random)!, at: i)
                case 2: if parts.count > 1 { parts.remove(at: i) }
                case 3: parts.append(levels.randomElement(using: &random)!)
                default:
                    // One byte of the level changed (a character of the contract's alphabet or a slash).
                    var bytes = Array(parts[i].utf8)
                    let byte = Array("/+#$a0Z-\u{0}é".utf8).randomElement(using: &random)!
                    if bytes.isEmpty { bytes = [byte] } else { bytes[Int.random(in: 0..<bytes.count, using: &random)] = byte }
                    parts[i] = String(decoding: bytes, as: UTF8.self)
                }
                topic = parts.joined(separator: "/")
            }
            guard let kind = t.parse(topic) else { continue }
            accepted += 1
            #expect(Self.built(kind, t) == topic, "\(topic) parsed as \(kind)")
        }
        // Enough were accepted for the property to say something (about 550-850 a run).
        #expect(accepted > 300)
        for seed in seeds { #expect(t.parse(seed).map { Self.built($0, t) } == seed) }
    }

    /// Byte for byte, as a broker: a prefix matches only its own bytes (not a canonically
    /// equal spelling, which `String` comparison would take), and a level `/` ends however a
    /// combining mark follows it.
    @Test func prefixAndLevelsAreBytes() {
        let composed = Topics(prefix: "caf\u{E9}"), decomposed = Topics(prefix: "cafe\u{301}")
        #expect(composed.parse("caf\u{E9}/brain/status") == .brainStatus)
        #expect(composed.parse("cafe\u{301}/brain/status") == nil)
        #expect(decomposed.parse("cafe\u{301}/brain/status") == .brainStatus)
        #expect(Topics(prefix: "acme").parse("acme/\u{301}brain/status") == nil)
        #expect(Topics(prefix: "acme").parse("acme") == nil)
        #expect(Topics(prefix: "acme").parse("acme/") == nil)
        #expect(Topics(prefix: "acme").parse("acmebrain/status") == nil)
        // The Kelvin sign is canonically equal to `K`, as a `String`; not as bytes.
        #expect(Topics().parse("gateways/\u{212A}/rssi") == .gatewayRSSI("\u{212A}"))
        #expect(Topics().parse("brain/\u{212A}") == nil)
        // Seven levels and more: no topic of the contract.
        #expect(Topics().parse("brain/answered/eddystone/00112233445566778899/aabbccddeeff/phone-7")
                == .brainRecord(.answered(Self.eddystone, client: "phone-7")))
        #expect(Topics().parse("brain/answered/eddystone/00112233445566778899/aabbccddeeff/phone-7/x") == nil)
        #expect(Topics().parse("a/b/c/d/e/f/g/h/i/j") == nil)
    }

    @Test(arguments: [
        ("door-1", nil as String?), ("", "is empty"), ("a+b", "contains an MQTT wildcard (+ or #)"),
        ("a#", "contains an MQTT wildcard (+ or #)"), ("a/b", "contains '/'"), ("$SYS", "starts with '$' (reserved by brokers)"),
        ("tab\there", "contains a control character"),
    ])
    func segmentProblems(_ segment: String, _ problem: String?) {
        #expect(Topics.problem(withSegment: segment) == problem)
    }

    @Test func prefixProblems() {
        #expect(Topics.problem(withSegment: "acme/shop", allowSlash: true) == nil)
        #expect(Topics.problem(withSegment: "/acme", allowSlash: true) == "starts or ends with '/'")
        #expect(Topics.problem(withSegment: "acme/", allowSlash: true) == "starts or ends with '/'")
    }

    // MARK: Source URIs (README, "Sources of advertisements")

    @Test(arguments: [
        ("hci:0", SourceURI.hci(adapter: 0)), ("hci:255", .hci(adapter: 255)),
        ("h4:unix:/tmp/bt-server-le", .h4Unix(path: "/tmp/bt-server-le")),
        ("h4:tcp:127.0.0.1:45550", .h4TCP(host: "127.0.0.1", port: 45550)),
        ("h4:tcp:[::1]:45550", .h4TCP(host: "::1", port: 45550)),
        ("h4:tcp:pi.local:1", .h4TCP(host: "pi.local", port: 1)),
        ("h4:tty:/dev/ttyAMA0@115200", .h4TTY(path: "/dev/ttyAMA0", baud: 115_200)),
        ("h4:tty:/dev/ttyUSB0@3000000", .h4TTY(path: "/dev/ttyUSB0", baud: 3_000_000)),
        ("h4:tty:/dev/ttyUSB0", .h4TTY(path: "/dev/ttyUSB0", baud: 115_200)),
        ("btsnoop:/var/log/capture.log", .btsnoop(path: "/var/log/capture.log", speed: 1, loop: false)),
        ("btsnoop:capture.log?speed=0", .btsnoop(path: "capture.log", speed: 0, loop: false)),
        ("btsnoop:/c.log?speed=2.5&loop", .btsnoop(path: "/c.log", speed: 2.5, loop: true)),
        ("btsnoop:/c.log?loop=true", .btsnoop(path: "/c.log", speed: 1, loop: true)),
    ])
    func goodSources(_ text: String, _ source: SourceURI) throws {
        #expect(try SourceURI(parsing: text) == source)
        #expect(try SourceURI(parsing: source.description) == source)
    }

    @Test func sourceDescriptionsAndOwnership() throws {
        #expect(SourceURI.h4TCP(host: "::1", port: 45550).description == "h4:tcp:[::1]:45550")
        #expect(SourceURI.btsnoop(path: "/c.log", speed: 1, loop: false).description == "btsnoop:/c.log")
        #expect(SourceURI.btsnoop(path: "/c.log", speed: 4, loop: true).description == "btsnoop:/c.log?speed=4.0&loop")
        #expect(SourceURI.h4TTY(path: "/dev/ttyS0", baud: 9600).description == "h4:tty:/dev/ttyS0@9600")
        #expect(SourceURI.h4Unix(path: "/tmp/x").ownsController)
        #expect(SourceURI.h4TCP(host: "h", port: 1).ownsController)
        #expect(SourceURI.h4TTY(path: "/dev/x", baud: 9600).ownsController)
        #expect(!SourceURI.hci(adapter: 0).ownsController)
        #expect(!SourceURI.btsnoop(path: "/x", speed: 1, loop: false).ownsController)
    }

    static let schemes = "unknown scheme; use hci:N, h4:unix:PATH, h4:tcp:HOST:PORT, h4:tty:DEV[@BAUD] or btsnoop:FILE"

    @Test(arguments: [
        ("", schemes), ("usb:1", schemes), ("HCI:0", schemes), ("h4:/tmp/x", schemes),
        ("hci:", "expected hci:N with N an adapter index 0-255"), ("hci:256", "expected hci:N with N an adapter index 0-255"),
        ("hci:-1", "expected hci:N with N an adapter index 0-255"), ("hci:hci0", "expected hci:N with N an adapter index 0-255"),
        ("h4:unix:relative/path", "expected h4:unix:/absolute/path"), ("h4:unix:", "expected h4:unix:/absolute/path"),
        ("h4:tcp:host", "expected h4:tcp:HOST:PORT"), ("h4:tcp::45550", "expected h4:tcp:HOST:PORT"),
        ("h4:tcp:host:0", "expected h4:tcp:HOST:PORT"), ("h4:tcp:host:65536", "expected h4:tcp:HOST:PORT"),
        ("h4:tcp:host:http", "expected h4:tcp:HOST:PORT"),
        ("h4:tty:ttyAMA0", "expected h4:tty:/dev/NAME[@BAUD]"), ("h4:tty:", "expected h4:tty:/dev/NAME[@BAUD]"),
        ("h4:tty:/dev/ttyAMA0@1234", "baud rate must be one of 9600, 19200, 38400, 57600, 115200, 230400, 460800, 500000, 921600, 1000000, 1500000, 2000000, 3000000"),
        ("btsnoop:", "expected btsnoop:/path/to/capture.log"), ("btsnoop:?speed=1", "expected btsnoop:/path/to/capture.log"),
        ("btsnoop:/c.log?speed=-1", "speed must be a number ≥ 0 (0 = as fast as possible)"),
        ("btsnoop:/c.log?speed=fast", "speed must be a number ≥ 0 (0 = as fast as possible)"),
        ("btsnoop:/c.log?speed=inf", "speed must be a number ≥ 0 (0 = as fast as possible)"),
        ("btsnoop:/c.log?speed", "speed must be a number ≥ 0 (0 = as fast as possible)"),
        ("btsnoop:/c.log?loop=2", "loop takes no value"),
        ("btsnoop:/c.log?rate=2", "unknown option \"rate\" (known: speed, loop)"),
    ])
    func badSources(_ text: String, _ reason: String) {
        do {
            let source = try SourceURI(parsing: text)
            Issue.record("accepted \(text) as \(source)")
        } catch {
            #expect(error.reason == reason)
            #expect(error.uri == text)
            #expect(error.description == "source \"\(text)\": \(reason)")
        }
    }

    // MARK: Broker URLs (README, "Parts")

    @Test(arguments: [
        ("mqtt://localhost", BrokerURL(host: "localhost"), "mqtt://localhost:1883"),
        ("mqtts://broker.example", BrokerURL(tls: true, host: "broker.example"), "mqtts://broker.example:8883"),
        ("mqtt://gateway@10.0.0.2:1884", BrokerURL(username: "gateway", host: "10.0.0.2", port: 1884), "mqtt://gateway@10.0.0.2:1884"),
        ("mqtt://[::1]:1883", BrokerURL(host: "::1", port: 1883), "mqtt://[::1]:1883"),
        ("mqtts://[fe80::1]", BrokerURL(tls: true, host: "fe80::1"), "mqtts://[fe80::1]:8883"),
        ("mqtt://host/", BrokerURL(host: "host"), "mqtt://host:1883"),
        ("mqtt://first.last@host", BrokerURL(username: "first.last", host: "host"), "mqtt://first.last@host:1883"),
        // A cluster's nodes (docs/fleet.md): tried in order, each with its own port or the scheme's.
        ("mqtt://n1:1883,n2:1884,[::1]", BrokerURL(endpoints: [.init(host: "n1", port: 1883), .init(host: "n2", port: 1884),
                                                                .init(host: "::1", port: 1883)]),
         "mqtt://n1:1883,n2:1884,[::1]:1883"),
        ("mqtts://brain@a,b", BrokerURL(tls: true, username: "brain", endpoints: [.init(host: "a", port: 8883), .init(host: "b", port: 8883)]),
         "mqtts://brain@a:8883,b:8883"),
    ])
    func goodBrokers(_ text: String, _ url: BrokerURL, _ description: String) throws {
        #expect(try BrokerURL(parsing: text) == url)
        #expect(url.description == description)
        #expect(try BrokerURL(parsing: url.description) == url)
    }

    @Test(arguments: [
        ("tcp://host", "expected mqtt://[user@]host[:port][,host[:port]…] or mqtts://…"),
        ("host:1883", "expected mqtt://[user@]host[:port][,host[:port]…] or mqtts://…"),
        ("MQTT://host", "expected mqtt://[user@]host[:port][,host[:port]…] or mqtts://…"),
        ("mqtt://user:secret@host", "a password does not belong in the URL; use the config's passwordFile or BEACONBRIDGE_MQTT_PASSWORD"),
        ("mqtts://user:@host", "a password does not belong in the URL; use the config's passwordFile or BEACONBRIDGE_MQTT_PASSWORD"),
        ("mqtt://@host", "empty user name before '@'"),
        ("mqtt://", "missing host"), ("mqtt://user@", "missing host"), ("mqtt://:1883", "missing host"),
        ("mqtt://host:0", "port must be 1-65535"), ("mqtt://host:65536", "port must be 1-65535"),
        ("mqtt://host:", "port must be 1-65535"), ("mqtt://host:mqtt", "port must be 1-65535"),
        ("mqtt://host/path", "a broker URL has no path or query"), ("mqtt://host?x=1", "a broker URL has no path or query"),
        ("mqtt://a,,b", "an empty host between commas"), ("mqtt://a:1883,", "an empty host between commas"),
        ("mqtt://a,b:0", "port must be 1-65535"), ("mqtt://a:1883,a", "a:1883 is named twice"),
        ("mqtt://[::1", "unclosed '[' in an IPv6 host"), ("mqtt://[::1]1883", "bad port"), ("mqtt://[::1]:0", "bad port"),
    ])
    func badBrokers(_ text: String, _ reason: String) {
        do {
            let url = try BrokerURL(parsing: text)
            Issue.record("accepted \(text) as \(url)")
        } catch {
            #expect(error.reason == reason)
            #expect(error.description == "broker URL \"\(text)\": \(reason)")
        }
    }
}
