/* Matrix transposes of 16-bit (bf16) or 32-bit (fp32) values between layouts of activations:
 * NCHW <-> channels-last (nhwc) and NCHW <-> 16-channel blocks (nChw16c), the reorders around
 * oneDNN's convolutions (dnnl_op.c). oneDNN 2.6's own reorders ran at ~2 GB/s on these, and a
 * scalar loop no faster: 16 x 16 tiles transposed in AVX-512 registers where the CPU has it
 * (kernels.h), the plain loop elsewhere and at the edges; both give the same bits. */
#ifndef DT_LAYERS_TRANSPOSE_H
#define DT_LAYERS_TRANSPOSE_H

#include <stddef.h>

/* dst[j * dst_pitch + r] = src[r * src_pitch + j] for r < rows, j < cols, values of size bytes
 * (2: bf16, 4: fp32); add: dst[...] += instead (bf16: summed in fp32, rounded once to nearest
 * even, as dt_bf16_store_add). dst and src do not overlap. */
void dt_transpose(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t rows, size_t cols, int size,
                  int add);

#endif
