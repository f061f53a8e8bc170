#ifndef BEACONBRIDGE_CLIBCRYPTO_SHIM_H
#define BEACONBRIDGE_CLIBCRYPTO_SHIM_H
// OpenSSL's libcrypto (libssl-dev, already needed for TLS): HMAC-SHA-256 for the history's pseudonyms.
#include <openssl/evp.h>
#include <openssl/hmac.h>
#endif
