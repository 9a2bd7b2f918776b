// The store's CRC-32C routines (Sources/CChecksum), which the raw side calls as a C program
// reading the store's layout would: declared here, linked in with DataStoreAPI.
#include "../../../Sources/CChecksum/include/ds_checksum.h"
