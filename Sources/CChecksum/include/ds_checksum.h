#ifndef DS_CHECKSUM_H
#define DS_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/// CRC-32C (Castagnoli, the polynomial of iSCSI, ext4 and LevelDB) of `count` bytes at `bytes`,
/// continuing from `crc` (0 for a first call). With SSE 4.2's crc32 instruction where the CPU
/// has it (chosen when the program is loaded), tables otherwise: the same value either way.
uint32_t ds_crc32c(uint32_t crc, const void *bytes, size_t count);

/// ds_crc32c without the CPU's instruction: what a machine without SSE 4.2 computes (the tests
/// compare the two).
uint32_t ds_crc32c_table(uint32_t crc, const void *bytes, size_t count);

/// Whether ds_crc32c uses the CPU's instruction on this machine.
int ds_crc32c_is_hardware(void);

/// One field of a row as the record checksum reads it: the CRC-32C of `tag`'s byte, then by
/// `form`: 0, nothing more (a null, a bool); 1, `bits` as 8 little-endian bytes (an int, a double,
/// a date); 2, `bits` in LEB128 and then `bits` bytes at `bytes` (a text, a blob); 3, 16 bytes at
/// `bytes` (a uuid). The bytes a compact record holds for the field (FieldWriter), summed
/// without being written: bytes written and read back at once stall the CPU's loads.
typedef struct {
    uint64_t tag;
    uint64_t bits;
    const void *bytes;
    uint64_t form;
} ds_crc32c_field;

/// The CRC-32C, continued from `crc`, of `count` fields one after another.
uint32_t ds_crc32c_fields(uint32_t crc, const ds_crc32c_field *fields, size_t count);

/// ds_crc32c_fields without the CPU's instruction (what a machine without SSE 4.2 computes).
uint32_t ds_crc32c_fields_table(uint32_t crc, const ds_crc32c_field *fields, size_t count);

#endif
