/* A fake device for tests: memory the host cannot dereference, and a
 * backend that computes on it with the CPU's kernels.
 *
 * The opaque buffer type gives every buffer a distinct non-canonical base
 * address (any read or write through such an address faults) and keeps
 * the real bytes in a private host allocation that set/get/memset copy.
 * The "fakedev" backend has this buffer type and a kernel table wrapping
 * every CPU kernel: each wrapper maps every tensor address it is given to
 * the private allocation of the buffer holding it (found by address
 * range), calls the CPU kernel there and returns its status. An address
 * that lies in no live buffer of the device (a host pointer handed to a
 * kernel) stops the test at once with a message naming the op and the
 * argument. With a chunk set, an op also refuses any argument that
 * crosses one (fdev_set_chunk). Its engine is "cpu", so a model keeps it through compile
 * (nnt_model_set_backend). Results are bitwise the CPU's. */
#ifndef NNT_FAKE_DEVICE_H
#define NNT_FAKE_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "nntrainer/compute/backend.h"

/* Buffer k's base is FDEV_BASE + k * 2^32: non-canonical on x86-64 and
 * beyond 48 bits on aarch64 even once the top byte is ignored. */
#define FDEV_BASE 0x8000800000000000ull

/* What the opaque buffers saw, since the process started. */
typedef struct fdev_counts {
  unsigned buffers;            /* allocated */
  size_t sets, gets, memsets;  /* buffer entries called */
  size_t ops;                  /* kernel calls on the fake device */
  size_t chunk_refusals;       /* op arguments refused for crossing a chunk */
} fdev_counts;
extern fdev_counts fdev_count;

const nnt_buffer_type *fdev_buffer_type(void);
/* Make the opaque buffer type's chunk c bytes (0: none; a multiple of 64)
 * for the models planned after: every op then refuses (NNT_ERR_INVAL, a
 * line on stderr) a tensor argument whose extent crosses a multiple of c
 * in its buffer. */
void fdev_set_chunk(size_t c);
/* The fake device (static: nnt_backend_free does nothing to it). */
nnt_backend *fdev_backend(void);
/* 1 when p is in the opaque address range (whether or not a buffer
 * holds it). */
int fdev_is_opaque(const void *p);
/* The host pointer of opaque address p (NULL for NULL), for a kernel's
 * argument: aborts with a message naming op and arg when p lies in no
 * live buffer. */
void *fdev_host(const void *p, const char *op, const char *arg);

#endif
