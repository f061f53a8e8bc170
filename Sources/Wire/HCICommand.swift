import BeaconKit

/// The HCI commands BeaconBridge sends, by name (OGF << 10 | OCF).
public enum HCIOpcode: UInt16, Sendable, CustomStringConvertible, CaseIterable {
    case setEventMask = 0x0C01
    case reset = 0x0C03
    case readLocalVersion = 0x1001
    case readBDAddr = 0x1009
    case leSetEventMask = 0x2001
    case leReadLocalSupportedFeatures = 0x2003
    case leSetAdvertisingParameters = 0x2006
    case leSetAdvertisingData = 0x2008
    case leSetAdvertiseEnable = 0x200A
    case leSetScanParameters = 0x200B
    case leSetScanEnable = 0x200C
    case leSetExtendedScanParameters = 0x2041
    case leSetExtendedScanEnable = 0x2042

    public var description: String {
        switch self {
        case .setEventMask: "Set Event Mask"
        case .reset: "Reset"
        case .readLocalVersion: "Read Local Version Information"
        case .readBDAddr: "Read BD_ADDR"
        case .leSetEventMask: "LE Set Event Mask"
        case .leReadLocalSupportedFeatures: "LE Read Local Supported Features"
        case .leSetAdvertisingParameters: "LE Set Advertising Parameters"
        case .leSetAdvertisingData: "LE Set Advertising Data"
        case .leSetAdvertiseEnable: "LE Set Advertising Enable"
        case .leSetScanParameters: "LE Set Scan Parameters"
        case .leSetScanEnable: "LE Set Scan Enable"
        case .leSetExtendedScanParameters: "LE Set Extended Scan Parameters"
        case .leSetExtendedScanEnable: "LE Set Extended Scan Enable"
        }
    }
}

/// HCI status codes worth a name in an error message (Core spec Vol 1 Part F).
public enum HCIStatus {
    public static func describe(_ status: UInt8) -> String {
        switch status {
        case 0x00: "success"
        case 0x01: "unknown HCI command"
        case 0x02: "unknown connection identifier"
        case 0x03: "hardware failure"
        case 0x0C: "command disallowed"
        case 0x11: "unsupported feature or parameter value"
        case 0x12: "invalid HCI command parameters"
        default: "status 0x" + Hex.encode([status])
        }
    }
}

/// A command ready to send.
public struct HCICommand: Sendable, Equatable {
    public var opcode: HCIOpcode
    public var parameters: [UInt8]

    public init(_ opcode: HCIOpcode, _ parameters: [UInt8] = []) {
        self.opcode = opcode
        self.parameters = parameters
    }

    /// The bytes on an H4 stream: type 0x01, opcode (little-endian), length, parameters.
    public var h4Packet: [UInt8] {
        [H4PacketType.command.rawValue, UInt8(opcode.rawValue & 0xFF), UInt8(opcode.rawValue >> 8),
         UInt8(parameters.count)] + parameters
    }

    /// Event mask with LE Meta (bit 61) plus the defaults a host normally keeps enabled.
    public static let setEventMask = HCICommand(.setEventMask, [0xFF, 0xFF, 0xFB, 0xFF, 0x07, 0xF8, 0xBF, 0x3D])
    /// LE event mask: advertising report (bit 1) and extended advertising report (bit 12).
    public static let leSetEventMask = HCICommand(.leSetEventMask, littleEndian(UInt64(1 << 1 | 1 << 12), 8))

    /// Scan parameters; interval and window in 0.625 ms units.
    public static func leSetScanParameters(active: Bool, interval: UInt16 = 0x0060, window: UInt16 = 0x0060) -> HCICommand {
        HCICommand(.leSetScanParameters,
                   [active ? 1 : 0] + littleEndian(UInt64(interval), 2) + littleEndian(UInt64(window), 2) + [0x00, 0x00])
    }

    /// Scan enable with the controller's duplicate filter off: a tracker needs every
    /// advertisement to follow RSSI.
    public static func leSetScanEnable(_ enable: Bool) -> HCICommand {
        HCICommand(.leSetScanEnable, [enable ? 1 : 0, 0x00])
    }

    /// Extended scan parameters on the LE 1M PHY.
    public static func leSetExtendedScanParameters(active: Bool, interval: UInt16 = 0x0060, window: UInt16 = 0x0060) -> HCICommand {
        HCICommand(.leSetExtendedScanParameters,
                   [0x00, 0x00, 0x01, active ? 1 : 0] + littleEndian(UInt64(interval), 2) + littleEndian(UInt64(window), 2))
    }

    public static func leSetExtendedScanEnable(_ enable: Bool) -> HCICommand {
        HCICommand(.leSetExtendedScanEnable, [enable ? 1 : 0, 0x00, 0x00, 0x00, 0x00, 0x00])
    }

    /// Non-connectable undirected advertising (ADV_NONCONN_IND) on all three channels;
    /// interval in 0.625 ms units (minimum 0x00A0 = 100 ms for non-connectable).
    public static func leSetAdvertisingParameters(interval: UInt16) -> HCICommand {
        let clamped = max(interval, 0x00A0)
        return HCICommand(.leSetAdvertisingParameters,
                          littleEndian(UInt64(clamped), 2) + littleEndian(UInt64(clamped), 2)
                            + [0x03, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0x07, 0x00])
    }

    /// Advertising data padded to 31 bytes; `nil` when it does not fit.
    public static func leSetAdvertisingData(_ data: [UInt8]) -> HCICommand? {
        guard data.count <= 31 else { return nil }
        return HCICommand(.leSetAdvertisingData, [UInt8(data.count)] + data + Array(repeating: 0, count: 31 - data.count))
    }

    public static func leSetAdvertiseEnable(_ enable: Bool) -> HCICommand {
        HCICommand(.leSetAdvertiseEnable, [enable ? 1 : 0])
    }
}

/// A controller's answer to a command: Command Complete or Command Status.
public struct HCICommandResponse: Sendable, Equatable {
    public var opcode: UInt16
    public var status: UInt8
    /// Return parameters after the status byte (empty for Command Status).
    public var returnParameters: [UInt8]

    /// Parses an event (starting at the event code); `nil` for any other event.
    public init?(event: UnsafeRawBufferPointer) {
        guard event.count >= 2, Int(event[1]) == event.count - 2 else { return nil }
        switch event[0] {
        case HCIEvent.commandComplete where event.count >= 5:
            opcode = UInt16(event[3]) | UInt16(event[4]) << 8
            status = event.count >= 6 ? event[5] : 0
            returnParameters = event.count > 6 ? Array(event[6...]) : []
        case HCIEvent.commandStatus where event.count >= 6:
            status = event[2]
            opcode = UInt16(event[4]) | UInt16(event[5]) << 8
            returnParameters = []
        default:
            return nil
        }
    }
}

func littleEndian(_ value: UInt64, _ count: Int) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
}
