public import BeaconKit

/// What a gateway says on `gateways/<id>/events`, dated by its wall clock (`WallTime`): its
/// answer to a command, or what became of a fleet config.
public enum GatewayEvent: Sendable, Equatable {
    case command(CommandReply)
    case config(ConfigReport<ServiceWallClock>)

    public var json: String {
        switch self {
        case .command(let reply): reply.json
        case .config(let report): report.json
        }
    }

    /// Reads an event by its `event` key (`command` or `config`).
    public init(parsing value: JSONValue) throws(PayloadError) {
        let r = PayloadReader(path: "")
        let o = try r.object(value)
        switch try r.string(o["event"], "event", maxLength: 32) {
        case "command": self = .command(try CommandReply(parsing: value))
        case "config": self = .config(try ConfigReport(parsing: value))
        default: throw PayloadError("event must be command or config")
        }
    }

    /// Reads the bytes of a payload.
    public init(parsing bytes: [UInt8]) throws(PayloadError) {
        let value: JSONValue
        do { value = try JSONParser(maxDepth: 8).parse(bytes) } catch { throw PayloadError(error.description) }
        try self.init(parsing: value)
    }
}

/// A gateway's answer to a command on `gateways/<id>/cmd`:
/// `{"event":"command","command","status":"ok"|"rejected","detail"?,"ts"}`. `command` is the
/// command's name (`scan`, `reload`, `advertise`), `?` for a payload that is no command.
public struct CommandReply: Sendable, Equatable {
    public enum Status: String, Sendable { case ok, rejected }

    public var command: String
    public var status: Status
    public var detail: String?
    public var at: WallTime

    public init(command: String, status: Status, detail: String? = nil, at: WallTime) {
        self.command = command
        self.status = status
        self.detail = detail
        self.at = at
    }

    public var json: String {
        var writer = JSONWriter()
        writer.object { o in
            o("event", "command")
            o("command", command)
            o("status", status.rawValue)
            if let detail { o("detail", detail) }
            o("ts", at)
        }
        return writer.text
    }

    public init(parsing value: JSONValue) throws(PayloadError) {
        let r = PayloadReader(path: "")
        let o = try r.object(value)
        guard o["event"] == .string("command") else { throw PayloadError("event must be command") }
        command = try r.string(o["command"], "command", maxLength: 64)
        guard let status = Status(rawValue: try r.string(o["status"], "status", maxLength: 16)) else {
            throw PayloadError("status must be ok or rejected")
        }
        self.status = status
        detail = try r.optionalString(o["detail"], "detail", maxLength: 4096)
        at = try r.time(o["ts"], "ts")
    }
}
