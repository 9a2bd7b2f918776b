// The system's OpenSSL (libcrypto, Debian's libssl-dev): AES and HMAC for Realm's encrypted files.
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/crypto.h>
