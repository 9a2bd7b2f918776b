#include "ds_checksum.h"

#include <string.h>

// The reflected Castagnoli polynomial.
#define POLY 0x82F63B78u

static uint32_t table[8][256];

// Runs before main: the tables are read-only afterwards, so no call pays for a once-flag.
__attribute__((constructor)) static void ds_crc32c_tables(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = table[0][n];
        for (int k = 1; k < 8; k++) {
            c = table[0][c & 0xFF] ^ (c >> 8);
            table[k][n] = c;
        }
    }
}

// Eight bytes per step through eight tables (slicing-by-8).
uint32_t ds_crc32c_table(uint32_t crc, const void *bytes, size_t n) {
    const unsigned char *p = bytes;
    crc = ~crc;
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
        word = __builtin_bswap64(word);
#endif
        word ^= crc;
        crc = table[7][word & 0xFF] ^ table[6][(word >> 8) & 0xFF] ^ table[5][(word >> 16) & 0xFF]
            ^ table[4][(word >> 24) & 0xFF] ^ table[3][(word >> 32) & 0xFF] ^ table[2][(word >> 40) & 0xFF]
            ^ table[1][(word >> 48) & 0xFF] ^ table[0][word >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) crc = table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

// A field's bytes before its payload: the tag, and for form 1 the 8 bytes of `bits`, for form 2
// `bits` in LEB128. Returns how many were written at `out` (at most 11).
static size_t ds_field_head(const ds_crc32c_field *f, unsigned char *out) {
    size_t n = 0;
    out[n++] = (unsigned char)f->tag;
    if (f->form == 1) {
        uint64_t bits = f->bits;
        for (int i = 0; i < 8; i++, bits >>= 8) out[n++] = (unsigned char)bits;
    } else if (f->form == 2) {
        uint64_t v = f->bits;
        do {
            unsigned char low = v & 0x7F;
            v >>= 7;
            out[n++] = v ? low | 0x80 : low;
        } while (v);
    }
    return n;
}

uint32_t ds_crc32c_fields_table(uint32_t crc, const ds_crc32c_field *fields, size_t count) {
    unsigned char head[11];
    for (size_t i = 0; i < count; i++) {
        const ds_crc32c_field *f = &fields[i];
        crc = ds_crc32c_table(crc, head, ds_field_head(f, head));
        if (f->form == 2 && f->bits > 0) crc = ds_crc32c_table(crc, f->bytes, f->bits);
        if (f->form == 3) crc = ds_crc32c_table(crc, f->bytes, 16);
    }
    return crc;
}

#if defined(__x86_64__) && defined(__ELF__)
// SSE 4.2's crc32: eight bytes per instruction, two words per step while there are. Of 8 bytes or
// more, the last 1 to 7 take one more instruction without a branch on their count: the 8 bytes
// that end the input are read (those before the tail were summed already), the tail kept at the
// top of the word with the state's low bytes added to it, and summed from a state of 0 (leading
// zero bytes leave a state of 0 as it is); the state's bytes beyond the tail's count are what
// that many steps shift out of it. The CRC is linear, so the two parts add. Fewer than 8 bytes
// go by eight, four, two and one byte. Short fields are summed in pieces of varying length (a
// row's texts), where a branch per size of the tail was mispredicted.
__attribute__((target("sse4.2"))) static uint32_t ds_crc32c_sse42(uint32_t crc, const void *bytes, size_t n) {
    const unsigned char *p = bytes;
    uint64_t c = (uint32_t)~crc;
    uint64_t w0, w1;
    if (n >= 8) {
        const unsigned char *end = p + n;
        for (; n >= 16; p += 16, n -= 16) {
            memcpy(&w0, p, 8);
            memcpy(&w1, p + 8, 8);
            c = __builtin_ia32_crc32di(__builtin_ia32_crc32di(c, w0), w1);
        }
        if (n >= 8) {
            memcpy(&w0, p, 8);
            c = __builtin_ia32_crc32di(c, w0);
            n -= 8;
        }
        if (n > 0) {
            unsigned shift = 64 - 8 * (unsigned)n;
            memcpy(&w0, end - 8, 8);
            uint64_t tail = ((w0 >> shift) << shift) ^ (c << shift);
            c = (c >> (8 * n)) ^ __builtin_ia32_crc32di(0, tail);
        }
        return ~(uint32_t)c;
    }
    uint32_t c32 = (uint32_t)c;
    if (n & 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        c32 = __builtin_ia32_crc32si(c32, w);
        p += 4;
    }
    if (n & 2) {
        uint16_t w;
        memcpy(&w, p, 2);
        c32 = __builtin_ia32_crc32hi(c32, w);
        p += 2;
    }
    if (n & 1) c32 = __builtin_ia32_crc32qi(c32, *p);
    return ~c32;
}

// The fields' heads from registers (a tag's byte, a number's 8 bytes, a length's LEB128 bytes),
// their payloads where they are.
__attribute__((target("sse4.2"))) static uint32_t ds_crc32c_fields_sse42(uint32_t crc, const ds_crc32c_field *fields,
                                                                         size_t count) {
    uint32_t c = ~crc;
    for (size_t i = 0; i < count; i++) {
        const ds_crc32c_field *f = &fields[i];
        c = __builtin_ia32_crc32qi(c, (unsigned char)f->tag);
        switch (f->form) {
        case 1:
            c = (uint32_t)__builtin_ia32_crc32di(c, f->bits);
            break;
        case 2: {
            uint64_t v = f->bits;
            do {
                unsigned char low = v & 0x7F;
                v >>= 7;
                c = __builtin_ia32_crc32qi(c, v ? low | 0x80 : low);
            } while (v);
            if (f->bits > 0) c = ~ds_crc32c_sse42(~c, f->bytes, f->bits);
            break;
        }
        case 3:
            c = ~ds_crc32c_sse42(~c, f->bytes, 16);
            break;
        default:
            break;
        }
    }
    return ~c;
}

static uint32_t (*ds_crc32c_fields_resolve(void))(uint32_t, const ds_crc32c_field *, size_t) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") ? ds_crc32c_fields_sse42 : ds_crc32c_fields_table;
}

uint32_t ds_crc32c_fields(uint32_t crc, const ds_crc32c_field *fields, size_t count)
    __attribute__((ifunc("ds_crc32c_fields_resolve")));

// Chosen once, when the program is loaded (an ELF indirect function): each call goes straight
// to the CPU's instruction or to the tables, with no flag to test.
static uint32_t (*ds_crc32c_resolve(void))(uint32_t, const void *, size_t) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") ? ds_crc32c_sse42 : ds_crc32c_table;
}

uint32_t ds_crc32c(uint32_t crc, const void *bytes, size_t count) __attribute__((ifunc("ds_crc32c_resolve")));

int ds_crc32c_is_hardware(void) { return ds_crc32c_resolve() == ds_crc32c_sse42; }
#else
uint32_t ds_crc32c(uint32_t crc, const void *bytes, size_t count) { return ds_crc32c_table(crc, bytes, count); }

uint32_t ds_crc32c_fields(uint32_t crc, const ds_crc32c_field *fields, size_t count) {
    return ds_crc32c_fields_table(crc, fields, count);
}

int ds_crc32c_is_hardware(void) { return 0; }
#endif
