#ifndef BEACONBRIDGE_MOSQUITTO_TLS_H
#define BEACONBRIDGE_MOSQUITTO_TLS_H

/// What the last TLS handshake of a client said about why it failed. libmosquitto reports
/// every TLS failure as MOSQ_ERR_TLS ("A TLS error occurred"); OpenSSL knows which check
/// failed, and this records it from an info callback on the connection's SSL object.
typedef struct bb_tls_report {
    /// The certificate verification result (X509_V_ERR_*), 0 when no check failed.
    long verify_result;
    /// The TLS alert description this client sent (a certificate it refused), -1 for none.
    int alert_sent;
    /// The TLS alert description the broker sent (it refused us), -1 for none.
    int alert_received;
} bb_tls_report;

/// Makes the handshake of `ssl` (libmosquitto's `mosquitto_ssl_get`, right after a
/// connection attempt began), and of every later connection made with its context, record
/// into `report`, which must outlive the client.
/// (libmosquitto 2.0.11 cannot take a context of our own: with MOSQ_OPT_SSL_CTX its
/// certificate check never finds its client and refuses every broker.)
void bb_tls_watch(void *ssl, bb_tls_report *report);

/// Forgets what the last handshake recorded.
void bb_tls_report_reset(bb_tls_report *report);

/// OpenSSL's text for a verification result ("certificate has expired").
const char *bb_tls_verify_text(long result);

/// OpenSSL's text for an alert description ("unknown CA").
const char *bb_tls_alert_text(int description);

#endif
