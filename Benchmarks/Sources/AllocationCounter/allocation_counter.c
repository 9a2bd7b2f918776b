// Counts the process's heap allocations: this executable defines the allocation functions, so the
// dynamic linker binds every library's calls to them (the Swift runtime's, SQLite's, LMDB's), and
// each forwards to glibc's own (__libc_malloc and the others, which glibc exports for this use).
// free is glibc's, untouched.
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include "allocation_counter.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static _Atomic unsigned long allocations;

static inline void counted(void) { atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed); }

void *malloc(size_t size) { counted(); return __libc_malloc(size); }
void *calloc(size_t count, size_t size) { counted(); return __libc_calloc(count, size); }
void *realloc(void *pointer, size_t size) { counted(); return __libc_realloc(pointer, size); }
void *aligned_alloc(size_t alignment, size_t size) { counted(); return __libc_memalign(alignment, size); }
void *memalign(size_t alignment, size_t size) { counted(); return __libc_memalign(alignment, size); }

int posix_memalign(void **out, size_t alignment, size_t size) {
    counted();
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL) return ENOMEM;
    *out = pointer;
    return 0;
}

unsigned long allocation_count(void) { return atomic_load_explicit(&allocations, memory_order_relaxed); }
