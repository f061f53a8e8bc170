public import BeaconKit

/// Why a TLS connection to the broker failed, in words that say which check failed.
///
/// libmosquitto turns every TLS failure into `MOSQ_ERR_TLS`, "A TLS error occurred". What
/// went wrong is known to OpenSSL: the certificate verification result and the alerts
/// exchanged (recorded by the `CMosquittoTLS` info callback), and the error lines
/// libmosquitto logs (`Error: host name verification failed.`, `OpenSSL Error[0]: …:wrong
/// version number`). This turns them into one sentence and what to do about it.
public struct TLSDiagnosis: Sendable, Equatable {
    /// The X509 verification result (`X509_V_ERR_*`) when a certificate check failed.
    public var verifyResult: Int?
    /// OpenSSL's text for it ("certificate has expired").
    public var verifyText: String?
    /// The alert the broker sent (it refused us), and OpenSSL's text for it.
    public var alertReceived: Int?
    public var alertReceivedText: String?
    /// Error lines libmosquitto logged during the attempt.
    public var log: [String]

    public init(verifyResult: Int? = nil, verifyText: String? = nil, alertReceived: Int? = nil,
                alertReceivedText: String? = nil, log: [String] = []) {
        self.verifyResult = verifyResult
        self.verifyText = verifyText
        self.alertReceived = alertReceived
        self.alertReceivedText = alertReceivedText
        self.log = log
    }

    /// Whether anything points at TLS (otherwise the failure was not a TLS one).
    public var isEmpty: Bool { verifyResult == nil && alertReceived == nil && log.isEmpty }

    // X509_V_ERR_* and TLS alert descriptions (RFC 8446 §6) this names.
    static let unableToGetIssuer = 2, notYetValid = 9, expired = 10, depthZeroSelfSigned = 18,
               selfSignedInChain = 19, unableToGetIssuerLocally = 20, unableToVerifyLeaf = 21,
               unspecified = 1, hostnameMismatch = 62, ipMismatch = 64
    static let badCertificate = 42, certificateUnknown = 46, certificateExpired = 45, unknownCA = 48,
               handshakeFailure = 40, protocolVersion = 70, certificateRequired = 116, accessDenied = 49

    /// One sentence: which check failed and what to do, for `broker` (`host:port`) and
    /// the client's TLS settings.
    public func reason(broker: BrokerURL, tls: TLSConfig?) -> String {
        let ca = tls?.caFile ?? tls?.caPath ?? "the system's CA store"
        let errors = log.joined(separator: " ").lowercased()
        if errors.contains("host name verification failed") || verifyResult == Self.hostnameMismatch
            || verifyResult == Self.ipMismatch {
            return "TLS: the broker's certificate is not for \(broker.host) (host name mismatch); connect by a name "
                + "or address its certificate lists, or issue it for \(broker.host) (beaconctl provision --broker-name)"
        }
        if let result = verifyResult {
            let text = verifyText.map { " (\($0))" } ?? ""
            switch result {
            case Self.expired:
                return "TLS: the broker's certificate has expired\(text); renew it (beaconctl provision)"
            case Self.notYetValid:
                return "TLS: the broker's certificate is not valid yet\(text); check this machine's clock"
            case Self.unableToGetIssuer, Self.unableToGetIssuerLocally, Self.unableToVerifyLeaf,
                 Self.depthZeroSelfSigned, Self.selfSignedInChain:
                return "TLS: the broker's certificate is not signed by a CA this client trusts\(text) (unknown CA); "
                    + "check broker.tls.caFile (\(ca))"
            default:
                return "TLS: the broker's certificate was refused\(text)"
            }
        }
        if let alert = alertReceived {
            let text = alertReceivedText.map { " (\($0))" } ?? ""
            switch alert {
            case Self.certificateRequired:
                return "TLS: the broker requires a client certificate\(text); set broker.tls.certFile and keyFile"
            case Self.unknownCA, Self.badCertificate, Self.certificateUnknown, Self.certificateExpired,
                 Self.accessDenied:
                return "TLS: the broker refused this client's certificate\(text)"
            case Self.protocolVersion:
                return "TLS: the broker refused the handshake\(text): no TLS version in common"
            default:
                return "TLS: the broker refused the handshake\(text)"
            }
        }
        if errors.contains("wrong version number") || errors.contains("packet length too long")
            || errors.contains("record layer failure") || errors.contains("unexpected eof") {
            return "TLS: \(broker.host):\(broker.port) did not answer in TLS (handshake refused); it is probably a "
                + "plain MQTT listener: use its TLS port, or mqtt:// on a trusted network"
        }
        if errors.contains("unable to load ca") || errors.contains("check cafile") || errors.contains("check capath") {
            return "TLS: cannot load the CA certificates from \(ca)"
        }
        if let line = log.last {
            return "TLS: the handshake failed: \(line)"
        }
        return "TLS: the handshake failed"
    }
}
