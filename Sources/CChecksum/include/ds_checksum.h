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

#endif
