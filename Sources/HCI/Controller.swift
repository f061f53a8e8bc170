import BeaconKit
import Wire
import Config
import Logging

/// A link with the context every command needs: when to give up, where events that
/// arrive meanwhile go, and a logger. Holds the command sequences BeaconBridge sends,
/// one command at a time, each waited for and its status checked.
struct Controller: Sendable {
    let link: HCILink
    let isCancelled: @Sendable () -> Bool
    let deliver: @Sendable ([UInt8]) -> Void
    let logger: Logger

    /// Seconds to wait for each answer.
    static let commandTimeout = 2.0
    /// "Command disallowed": what a controller answers when asked to stop scanning or
    /// advertising that is already off.
    static let commandDisallowed: UInt8 = 0x0C
    /// "Unknown HCI command": a controller without the command at all.
    static let unknownCommand: UInt8 = 0x01

    /// The same controller with another notion of "give up".
    func with(isCancelled: @escaping @Sendable () -> Bool) -> Controller {
        Controller(link: link, isCancelled: isCancelled, deliver: deliver, logger: logger)
    }

    @discardableResult
    func run(_ command: HCICommand, allowing: Set<UInt8> = [], timeout: Double = commandTimeout) throws -> HCICommandResponse {
        let response = try link.run(command, allowing: allowing, timeout: timeout, isCancelled: isCancelled, deliver: deliver)
        logger.debug("HCI command answered", metadata: [
            "source": "\(link.name)", "command": "\(command.opcode)",
            "status": "\(HCIStatus.describe(response.status))",
        ])
        return response
    }

    /// Reset and event masks (advertising reports, extended ones too): only on a
    /// controller the gateway owns. Never on a kernel adapter bluetoothd may share.
    func takeOver() throws {
        try run(HCICommand(.reset))
        try run(.setEventMask)
        try run(.leSetEventMask)
    }

    /// The controller's public address (Read BD_ADDR), for logs and state details.
    func readAddress() throws -> BluetoothAddress {
        let response = try run(HCICommand(.readBDAddr))
        let bytes = response.returnParameters.prefix(6)
        var value: UInt64 = 0
        for (i, byte) in bytes.enumerated() { value |= UInt64(byte) << (8 * UInt64(i)) }
        return BluetoothAddress(rawValue: value)
    }

    /// Scanning off first (a scanner killed mid-scan leaves it on, and a controller
    /// refuses new parameters while scanning), then the scan parameters, with the legacy
    /// commands when the controller takes them and the extended ones when it does not.
    ///
    /// A controller that has seen an extended advertising or scanning command since its
    /// last reset must refuse legacy ones with Command Disallowed (Core spec Vol 4 Part E
    /// 3.1.1); a kernel that drives an adapter with extended commands leaves it that way,
    /// and a Reset is not ours to send on a shared adapter. So Command Disallowed on the
    /// legacy parameters means: use LE Set Extended Scan Parameters/Enable instead.
    func prepareScan(_ scan: ScanConfig) throws -> ScanMode {
        let interval = min(max(scan.intervalUnits, 0x0004), 0x4000)
        let window = min(max(scan.windowUnits, 0x0004), interval)
        try run(ScanMode.legacy.enable(false), allowing: [Self.commandDisallowed])
        let legacy = try run(.leSetScanParameters(active: scan.active, interval: interval, window: window),
                             allowing: [Self.commandDisallowed, Self.unknownCommand])
        guard legacy.status != 0 else { return .legacy }
        logger.notice("the controller refuses legacy scanning; using LE extended scanning", metadata: [
            "source": "\(link.name)", "status": "\(HCIStatus.describe(legacy.status))",
        ])
        try run(ScanMode.extended.enable(false), allowing: [Self.commandDisallowed])
        try run(.leSetExtendedScanParameters(active: scan.active, interval: interval, window: window))
        return .extended
    }

    /// Non-connectable iBeacon advertising: advertising off first (parameters cannot
    /// change while it is on), parameters, data, on.
    func startAdvertising(_ beacon: IBeacon, intervalMs: Int) throws {
        try run(.leSetAdvertiseEnable(false), allowing: [Self.commandDisallowed])
        try run(.leSetAdvertisingParameters(interval: Self.advertisingUnits(intervalMs)))
        // 30 bytes: always fits in the 31 a legacy advertisement carries.
        try run(HCICommand.leSetAdvertisingData(AdvertisingData.iBeacon(beacon))!)
        try run(.leSetAdvertiseEnable(true))
    }

    /// Best effort on the way out: the link may already be gone.
    func stopScanning(_ mode: ScanMode) {
        _ = try? link.execute(mode.enable(false), timeout: 1, deliver: deliver)
    }

    func stopAdvertising() {
        _ = try? link.execute(.leSetAdvertiseEnable(false), timeout: 1, deliver: deliver)
    }

    /// Milliseconds in the controller's 0.625 ms units.
    static func advertisingUnits(_ milliseconds: Int) -> UInt16 {
        UInt16(clamping: Int((Double(milliseconds) / 0.625).rounded()))
    }
}

/// Which command set a controller scans with (see `Controller.prepareScan`).
enum ScanMode: String, Sendable {
    case legacy
    case extended

    /// Scan enable (or disable) with the controller's duplicate filter off.
    func enable(_ on: Bool) -> HCICommand {
        switch self {
        case .legacy: .leSetScanEnable(on)
        case .extended: .leSetExtendedScanEnable(on)
        }
    }
}
