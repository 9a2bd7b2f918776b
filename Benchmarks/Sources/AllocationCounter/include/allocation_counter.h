#ifndef ALLOCATION_COUNTER_H
#define ALLOCATION_COUNTER_H
/// How many times malloc, calloc, realloc, aligned_alloc, memalign or posix_memalign was called
/// in this process so far (by Swift, SQLite, LMDB or anything else in it).
unsigned long allocation_count(void);
#endif
