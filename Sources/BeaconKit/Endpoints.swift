/// Where advertising reports come from (README, "Sources of advertisements").
public enum SourceURI: Sendable, Equatable, CustomStringConvertible {
    /// Kernel HCI socket through libbluetooth: `hci:0`.
    case hci(adapter: Int)
    /// An H4 byte stream on a Unix socket: `h4:unix:/tmp/bt-server-le`.
    case h4Unix(path: String)
    /// An H4 byte stream over TCP: `h4:tcp:127.0.0.1:45550`.
    case h4TCP(host: String, port: UInt16)
    /// A UART: `h4:tty:/dev/ttyAMA0@115200`.
    case h4TTY(path: String, baud: Int)
    /// A capture: `btsnoop:/path/file.log`, optionally `?speed=N&loop`.
    case btsnoop(path: String, speed: Double, loop: Bool)

    public static let supportedBaudRates = [9600, 19200, 38400, 57600, 115200, 230400, 460800,
                                            500000, 921600, 1000000, 1500000, 2000000, 3000000]

    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        public var uri: String
        public var reason: String
        public var description: String { "source \"\(uri)\": \(reason)" }
    }

    public init(parsing text: String) throws(ParseError) {
        func fail(_ reason: String) -> ParseError { ParseError(uri: text, reason: reason) }
        if text.hasPrefix("hci:") {
            let digits = text.dropFirst(4)
            guard digits.allSatisfy(\.isASCIIDigit), let index = Int(digits), (0...255).contains(index) else {
                throw fail("expected hci:N with N an adapter index 0-255")
            }
            self = .hci(adapter: index)
        } else if text.hasPrefix("h4:unix:") {
            let path = String(text.dropFirst(8))
            guard path.hasPrefix("/") else { throw fail("expected h4:unix:/absolute/path") }
            self = .h4Unix(path: path)
        } else if text.hasPrefix("h4:tcp:") {
            let rest = text.dropFirst(7)
            guard let colon = rest.lastIndex(of: ":"), let port = parsePort(rest[rest.index(after: colon)...]),
                  colon != rest.startIndex
            else { throw fail("expected h4:tcp:HOST:PORT") }
            var host = String(rest[..<colon])
            if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            self = .h4TCP(host: host, port: port)
        } else if text.hasPrefix("h4:tty:") {
            let rest = text.dropFirst(7)
            let parts = rest.split(separator: "@", maxSplits: 1)
            guard let path = parts.first, path.hasPrefix("/") else { throw fail("expected h4:tty:/dev/NAME[@BAUD]") }
            var baud = 115200
            if parts.count == 2 {
                guard parts[1].allSatisfy(\.isASCIIDigit), let value = Int(parts[1]), Self.supportedBaudRates.contains(value) else {
                    throw fail("baud rate must be one of \(Self.supportedBaudRates.map(String.init).joined(separator: ", "))")
                }
                baud = value
            }
            self = .h4TTY(path: String(path), baud: baud)
        } else if text.hasPrefix("btsnoop:") {
            let rest = text.dropFirst(8)
            let parts = rest.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
            let path = String(parts[0])
            guard !path.isEmpty else { throw fail("expected btsnoop:/path/to/capture.log") }
            var speed = 1.0
            var loop = false
            if parts.count == 2 {
                for option in parts[1].split(separator: "&") {
                    let pair = option.split(separator: "=", maxSplits: 1)
                    switch pair[0] {
                    case "speed":
                        guard pair.count == 2, let value = Double(pair[1]), value >= 0, value.isFinite else {
                            throw fail("speed must be a number ≥ 0 (0 = as fast as possible)")
                        }
                        speed = value
                    case "loop":
                        guard pair.count == 1 || pair[1] == "true" || pair[1] == "1" else {
                            throw fail("loop takes no value")
                        }
                        loop = true
                    default:
                        throw fail("unknown option \"\(pair[0])\" (known: speed, loop)")
                    }
                }
            }
            self = .btsnoop(path: path, speed: speed, loop: loop)
        } else {
            throw fail("unknown scheme; use hci:N, h4:unix:PATH, h4:tcp:HOST:PORT, h4:tty:DEV[@BAUD] or btsnoop:FILE")
        }
    }

    public var description: String {
        switch self {
        case .hci(let adapter): "hci:\(adapter)"
        case .h4Unix(let path): "h4:unix:\(path)"
        case .h4TCP(let host, let port): host.contains(":") ? "h4:tcp:[\(host)]:\(port)" : "h4:tcp:\(host):\(port)"
        case .h4TTY(let path, let baud): "h4:tty:\(path)@\(baud)"
        case .btsnoop(let path, let speed, let loop):
            "btsnoop:\(path)" + (speed == 1 && !loop ? "" : "?speed=\(speed)" + (loop ? "&loop" : ""))
        }
    }

    /// A capture replayed on its own time rather than a controller heard live.
    public var isReplay: Bool {
        if case .btsnoop = self { return true }
        return false
    }

    /// Whether the gateway owns the controller (resets and restores it).
    public var ownsController: Bool {
        switch self {
        case .h4Unix, .h4TCP, .h4TTY: true
        case .hci, .btsnoop: false
        }
    }
}

/// `mqtt://[user@]host[:port]` or `mqtts://…` (TLS). Passwords never appear in URLs.
///
/// Several hosts, comma-separated (`mqtt://n1:1883,n2:1883,n3:1883`), name the nodes of one
/// clustered broker (docs/fleet.md): a client connects to the first and moves to the next
/// when its node goes away, keeping its session. A host without a port takes the scheme's
/// default (1883, or 8883 for `mqtts://`); the user name and TLS are the same for all.
public struct BrokerURL: Sendable, Equatable, CustomStringConvertible {
    /// One node of the broker: a host name or address, and its port.
    public struct Endpoint: Sendable, Equatable, CustomStringConvertible {
        public var host: String
        public var port: UInt16

        public init(host: String, port: UInt16) {
            self.host = host
            self.port = port
        }

        public var description: String { (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }
    }

    public var tls: Bool
    public var username: String?
    /// The broker's nodes, in the order to try them; never empty.
    public var endpoints: [Endpoint]

    /// The first node's host (the only one of a single-host URL).
    public var host: String {
        get { endpoints[0].host }
        set { endpoints[0].host = newValue }
    }

    /// The first node's port.
    public var port: UInt16 {
        get { endpoints[0].port }
        set { endpoints[0].port = newValue }
    }

    public init(tls: Bool = false, username: String? = nil, host: String, port: UInt16? = nil) {
        self.tls = tls
        self.username = username
        endpoints = [Endpoint(host: host, port: port ?? (tls ? 8883 : 1883))]
    }

    /// `localhost`, 127.0.0.0/8 or `::1`.
    public static func isLoopback(host: String) -> Bool {
        if host == "localhost" || host == "::1" || host == "[::1]" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// A URL naming several nodes; `endpoints` must not be empty.
    public init(tls: Bool = false, username: String? = nil, endpoints: [Endpoint]) {
        precondition(!endpoints.isEmpty, "a broker URL names at least one host")
        self.tls = tls
        self.username = username
        self.endpoints = endpoints
    }

    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        public var url: String
        public var reason: String
        public var description: String { "broker URL \"\(url)\": \(reason)" }
    }

    public init(parsing text: String) throws(ParseError) {
        func fail(_ reason: String) -> ParseError { ParseError(url: text, reason: reason) }
        let rest: Substring
        if text.hasPrefix("mqtt://") {
            tls = false
            rest = text.dropFirst(7)
        } else if text.hasPrefix("mqtts://") {
            tls = true
            rest = text.dropFirst(8)
        } else {
            throw fail("expected mqtt://[user@]host[:port][,host[:port]…] or mqtts://…")
        }
        var authority = rest
        if authority.hasSuffix("/") { authority = authority.dropLast() }
        guard !authority.contains("/"), !authority.contains("?") else { throw fail("a broker URL has no path or query") }
        username = nil
        if let at = authority.lastIndex(of: "@") {
            let user = authority[..<at]
            guard !user.isEmpty else { throw fail("empty user name before '@'") }
            guard !user.contains(":") else {
                throw fail("a password does not belong in the URL; use the config's passwordFile or BEACONBRIDGE_MQTT_PASSWORD")
            }
            guard !user.contains(",") else { throw fail("one user name for all hosts: put it once, before the first host") }
            username = String(user)
            authority = authority[authority.index(after: at)...]
        }
        let defaultPort: UInt16 = tls ? 8883 : 1883
        var list: [Endpoint] = []
        for part in authority.split(separator: ",", omittingEmptySubsequences: false) {
            var hostPart = part
            var portValue: UInt16?
            if part.hasPrefix("[") {
                guard let close = part.firstIndex(of: "]") else { throw fail("unclosed '[' in an IPv6 host") }
                hostPart = part[part.index(after: part.startIndex)..<close]
                let after = part[part.index(after: close)...]
                if !after.isEmpty {
                    guard after.hasPrefix(":"), let p = parsePort(after.dropFirst()) else { throw fail("bad port") }
                    portValue = p
                }
            } else if let colon = part.lastIndex(of: ":") {
                hostPart = part[..<colon]
                guard let p = parsePort(part[part.index(after: colon)...]) else {
                    throw fail("port must be 1-65535")
                }
                portValue = p
            }
            guard !hostPart.isEmpty else {
                throw fail(list.isEmpty && !authority.contains(",") ? "missing host" : "an empty host between commas")
            }
            let endpoint = Endpoint(host: String(hostPart), port: portValue ?? defaultPort)
            guard !list.contains(endpoint) else { throw fail("\(endpoint) is named twice") }
            list.append(endpoint)
        }
        endpoints = list
    }

    public var description: String {
        (tls ? "mqtts://" : "mqtt://") + (username.map { $0 + "@" } ?? "")
            + endpoints.map(\.description).joined(separator: ",")
    }
}

/// A TCP port, 1–65535, written as plain digits (no sign).
func parsePort(_ text: Substring) -> UInt16? {
    guard !text.isEmpty, text.allSatisfy(\.isASCIIDigit), let port = UInt16(text), port > 0 else { return nil }
    return port
}

extension Character {
    var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
