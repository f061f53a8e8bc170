public import BeaconKit

/// Builds HCI events as a controller would send them: for the simulator, the tests and
/// the benchmarks.
public enum HCIEventBuilder {
    public struct Report: Sendable, Equatable {
        /// Legacy PDU type: 0 ADV_IND, 2 ADV_SCAN_IND, 3 ADV_NONCONN_IND, 4 SCAN_RSP.
        public var eventType: UInt8
        public var addressType: UInt8
        public var address: BluetoothAddress
        public var data: [UInt8]
        /// dBm; `nil` sends 127, "not available".
        public var rssi: Int8?

        public init(eventType: UInt8 = 0x03, addressType: UInt8 = 0x01, address: BluetoothAddress,
                    data: [UInt8], rssi: Int8?) {
            self.eventType = eventType
            self.addressType = addressType
            self.address = address
            self.data = data
            self.rssi = rssi
        }
    }

    /// LE Meta / LE Advertising Report (0x3E/0x02), starting at the event code.
    public static func legacyReport(_ reports: [Report]) -> [UInt8] {
        var params: [UInt8] = [HCIEvent.leAdvertisingReport, UInt8(reports.count)]
        for report in reports {
            params += [report.eventType, report.addressType] + report.address.littleEndianBytes
            params.append(UInt8(report.data.count))
            params += report.data
            params.append(UInt8(bitPattern: report.rssi ?? HCIEvent.notAvailable))
        }
        return [HCIEvent.leMetaEvent, UInt8(params.count)] + params
    }

    /// LE Meta / LE Extended Advertising Report (0x3E/0x0D) for legacy-PDU adverts.
    public static func extendedReport(_ reports: [Report], txPower: Int8? = nil) -> [UInt8] {
        var params: [UInt8] = [HCIEvent.leExtendedAdvertisingReport, UInt8(reports.count)]
        for report in reports {
            // Event type: legacy PDU (bit 4) plus, for ADV_NONCONN_IND, nothing else set.
            let eventType: UInt16 = 0x0010
            params += [UInt8(eventType & 0xFF), UInt8(eventType >> 8), report.addressType]
            params += report.address.littleEndianBytes
            params += [0x01, 0x00, 0xFF, UInt8(bitPattern: txPower ?? HCIEvent.notAvailable),
                       UInt8(bitPattern: report.rssi ?? HCIEvent.notAvailable), 0x00, 0x00, 0x00]
            params += [0, 0, 0, 0, 0, 0]
            params.append(UInt8(report.data.count))
            params += report.data
        }
        return [HCIEvent.leMetaEvent, UInt8(params.count)] + params
    }

    /// Command Complete for `opcode` with `status` and return parameters.
    public static func commandComplete(_ opcode: UInt16, status: UInt8 = 0, returning extra: [UInt8] = []) -> [UInt8] {
        let params: [UInt8] = [0x01, UInt8(opcode & 0xFF), UInt8(opcode >> 8), status] + extra
        return [HCIEvent.commandComplete, UInt8(params.count)] + params
    }
}
