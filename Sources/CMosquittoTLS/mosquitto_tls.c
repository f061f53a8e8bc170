#include "mosquitto_tls.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>

static void bb_tls_info(const SSL *ssl, int where, int ret) {
    if (!(where & SSL_CB_ALERT)) return;
    bb_tls_report *report = SSL_get_app_data(ssl);
    if (report == NULL) report = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    int description = ret & 0xff;
    /* close_notify (0) ends every clean connection: nothing to report. */
    if (report == NULL || description == 0) return;
    if (where & SSL_CB_WRITE) {
        report->alert_sent = description;
        long result = SSL_get_verify_result(ssl);
        if (result != X509_V_OK) report->verify_result = result;
    } else {
        report->alert_received = description;
    }
}

void bb_tls_watch(void *ssl, bb_tls_report *report) {
    /* Index 0, the application's slot; libmosquitto keeps its own data at another index. */
    SSL_set_app_data((SSL *)ssl, report);
    SSL_set_info_callback((SSL *)ssl, bb_tls_info);
    /* libmosquitto keeps its context across reconnections: every later connection's SSL
       object inherits the callback from the start, however quickly its handshake runs. */
    SSL_CTX *context = SSL_get_SSL_CTX((SSL *)ssl);
    SSL_CTX_set_app_data(context, report);
    SSL_CTX_set_info_callback(context, bb_tls_info);
}

void bb_tls_report_reset(bb_tls_report *report) {
    report->verify_result = X509_V_OK;
    report->alert_sent = -1;
    report->alert_received = -1;
}

const char *bb_tls_verify_text(long result) {
    return X509_verify_cert_error_string(result);
}

const char *bb_tls_alert_text(int description) {
    /* The alert's level does not change its text: pass it as a fatal one. */
    return SSL_alert_desc_string_long((2 << 8) | description);
}
