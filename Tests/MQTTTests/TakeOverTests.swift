import BeaconKit
import Foundation
import MQTT
import TestSupport
import Testing

/// Two clients with one client id knock each other off a broker, over and over (Mosquitto
/// closes the older connection); each side says why rather than "connection lost" alone.
@Suite("Client id taken over")
struct TakeOverTests {
    static func explained(_ log: EventLog) -> Bool {
        log.all.contains { event in
            if case .disconnected(let reason) = event { reason.contains("same client id") } else { false }
        }
    }

    @Test("a connection closed within seconds of being accepted, again and again, is explained")
    func twoClientsOneID() async throws {
        let directory = try TemporaryDirectory("mqtt-takeover")
        let broker = try await MosquittoBroker.start(in: directory)
        let id = "screen-\(UUID().uuidString.prefix(6))"
        var settings = options(broker, id: id)
        settings.username = "display-lobby"
        let (first, firstLog) = try startedClient(settings)
        #expect(await firstLog.waitForConnection())
        let (second, secondLog) = try startedClient(settings)
        #expect(await eventually(timeout: 30) { Self.explained(firstLog) || Self.explained(secondLog) },
                "\(firstLog.all)\n\(secondLog.all)\n\(broker.diagnostics)")
        let reasons = (firstLog.all + secondLog.all).compactMap { event -> String? in
            if case .disconnected(let reason) = event, reason.contains("same client id") { reason } else { nil }
        }
        #expect(reasons.first?.hasPrefix("connection lost; the broker closed the connection 3 times in a row within 5 s") == true,
                "\(reasons)")
        #expect(reasons.first?.contains(#"same client id "\#(id)""#) == true && reasons.first?.contains(#""display-lobby""#) == true)
        #expect(broker.log.contains("already connected, closing old connection"))
        await second.stop(timeout: 2)

        // One client alone, its broker restarted once: no such explanation.
        let (alone, aloneLog) = try startedClient(options(broker))
        #expect(await aloneLog.waitForConnection())
        await broker.kill()
        _ = await aloneLog.waitForDisconnection()
        try await broker.restart()
        #expect(await aloneLog.waitForConnection(number: 2), "\(aloneLog.all)")
        #expect(!Self.explained(aloneLog), "\(aloneLog.all)")
        await alone.stop(timeout: 2)
        await first.stop(timeout: 2)
        await broker.stop()
    }
}
