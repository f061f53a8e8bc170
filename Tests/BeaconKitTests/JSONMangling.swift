import Simulation

/// A payload's text with one to three of its bytes changed to one of `alphabet`'s, dropped,
/// or one of `alphabet`'s inserted, at random: what the fast readers of gateway payloads
/// (`RSSIReportDecodingTests`, `GatewayPresenceDecodingTests`) must read as the general parse
/// does, or leave to it.
func mangled(_ base: [UInt8], alphabet: [UInt8], using random: inout SplitMix64) -> [UInt8] {
    var bytes = base
    for _ in 0..<Int.random(in: 1...3, using: &random) {
        let at = Int.random(in: 0..<bytes.count, using: &random)
        switch Int.random(in: 0..<3, using: &random) {
        case 0: bytes[at] = alphabet.randomElement(using: &random)!
        case 1: bytes.remove(at: at)
        default: bytes.insert(alphabet.randomElement(using: &random)!, at: at)
        }
    }
    return bytes
}
