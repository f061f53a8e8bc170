import TestSupport
import Testing

/// The test broker itself: on a machine where many tests take loopback ports at once, a
/// broker that could not bind must not pass for the process that did.
@Suite("Test broker")
struct BrokerHarnessTests {
    @Test("a broker whose port another process holds fails to start rather than pass for that one")
    func takenPort() async throws {
        let holder = try await MosquittoBroker.start(in: try TemporaryDirectory("mqtt-port-holder"))
        await #expect(throws: MosquittoBroker.StartError.self) {
            let second = try await MosquittoBroker.start(in: try TemporaryDirectory("mqtt-port-taken"), port: holder.port)
            await second.stop()
        }
        #expect(holder.isRunning)
        await holder.stop()
    }
}
