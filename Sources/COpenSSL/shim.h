// The system's OpenSSL (libcrypto, Debian's libssl-dev): ChaCha20-Poly1305, scrypt and random
// bytes for encrypted stores; AES and HMAC for Realm's encrypted files.
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/err.h>
