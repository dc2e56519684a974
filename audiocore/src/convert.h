/* Float32 <-> PCM16 conversion kernels, one per instruction-set path.
 *
 * Pointers need no alignment: the kernels load and store unaligned, so any
 * slice of a caller's buffer works.  PCM16 is little-endian. */
#ifndef AUDIOCORE_CONVERT_H
#define AUDIOCORE_CONVERT_H

#include <stddef.h>

/* Select a path; returns 0, or -1 when this CPU cannot run it (nothing
 * changes then).  The extension selects ac_best_path() on import. */
int ac_convert_set_path(int path);
int ac_convert_get_path(void);

void ac_f32_to_s16(const void *src, void *dst, ptrdiff_t n);
void ac_s16_to_f32(const void *src, void *dst, ptrdiff_t n);

#endif
