#ifndef MALLOC_COUNTER_H
#define MALLOC_COUNTER_H
#include <stdint.h>

/// Allocations (malloc, calloc, realloc of a new block, posix_memalign, aligned_alloc,
/// memalign) made by the whole process since it started.
uint64_t malloc_counter_allocations(void);
/// Bytes requested by those allocations.
uint64_t malloc_counter_bytes(void);

#endif
