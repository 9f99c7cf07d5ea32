/* Payload compression (--compress, docs/algorithms.md "Compression"): turns n floats
 * into the bytes that travel and back. Pure computation, no MPI.
 *
 *   none     4n bytes, the floats as they are
 *   fp16     2n bytes, IEEE half precision, round to nearest even (overflow -> inf,
 *            subnormals kept, nan stays nan)
 *   bf16     2n bytes, the top 16 bits of the float rounded to nearest even
 *   int8     per chunk of DT_CODEC_CHUNK values one float scale s = max|x|/127, then the n
 *            values q = round(x/s) as int8: ceil(n/256)*4 + n bytes (scales first)
 *   topk:F   the k = max(1, round(F*n)) entries of largest magnitude as (uint32 index,
 *            float value) pairs: 8k bytes; the others decode as 0
 * (powersgd:R parses here too, but is allreduce's low-rank compression, schemes/powersgd.h:
 * no payload codec is made of it.)
 *
 * Two ways to use a lossy codec (the spec's two payload kinds):
 *   gradient payloads (error feedback): p = g + e, send encode(p), e = p - decode(encode(p));
 *     dt_codec_encode_ef keeps e in a buffer of the caller's;
 *   parameter payloads: the sender keeps the copy c its receiver holds, sends encode(x - c),
 *     and both do c += decode(...) with dt_codec_decode_add (dt_codec_encode_delta does the
 *     sender's half): the two copies stay identical bit for bit.
 *
 * Byte order is the host's (every rank of a run is the same machine kind). Encoded buffers
 * need no alignment. A dt_codec holds the scratch for payloads of up to max_n floats, made
 * once by dt_codec_create: encoding and decoding allocate nothing. */
#ifndef DT_CODEC_H
#define DT_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "core/bf16.h"
#include "dtrain.h"
#include "dtrain/comm.h"

#define DT_CODEC_CHUNK 256 /* int8: values per scale */

/* dt_codec_kind and dt_codec_spec (what --compress says) are in dtrain/comm.h: a scheme's
 * dt_scheme holds the run's */

typedef struct dt_codec dt_codec;

/* Parses none | fp16 | bf16 | int8 | topk:F (NULL means none). DT_ERR_ARG naming
 * "--compress TEXT" and what was expected. */
dt_status dt_codec_parse(const char *text, dt_codec_spec *out);
/* "none", "fp16", ..., "topk:0.1" into buf. */
const char *dt_codec_spec_str(const dt_codec_spec *spec, char *buf, size_t len);
/* topk: entries sent out of n (max(1, round(F*n)), at most n); others: n. */
size_t dt_codec_topk_count(const dt_codec_spec *spec, size_t n);
/* Encoded size in bytes of n floats. */
size_t dt_codec_bytes(const dt_codec_spec *spec, size_t n);

/* A codec with scratch for payloads of up to max_n floats. */
dt_status dt_codec_create(const dt_codec_spec *spec, size_t max_n, dt_codec **out);
void dt_codec_free(dt_codec *c);
const dt_codec_spec *dt_codec_get_spec(const dt_codec *c);

/* Encodes x[0..n) into out (dt_codec_bytes(spec, n) bytes, returned). n <= max_n. */
size_t dt_codec_encode(dt_codec *c, const float *x, size_t n, void *out);
/* x[0..n) = decode(in). */
void dt_codec_decode(const dt_codec *c, const void *in, size_t n, float *x);
/* x[0..n) += decode(in): the receiver's update of its copy, and the sender's. */
void dt_codec_decode_add(const dt_codec *c, const void *in, size_t n, float *x);

/* Gradient payload with error feedback: p = g + residual; out = encode(p);
 * residual = p - decode(out). The residual (n floats) starts at zero and is the caller's. */
size_t dt_codec_encode_ef(dt_codec *c, const float *g, float *residual, size_t n, void *out);
/* Parameter payload: out = encode(x - copy); copy += decode(out) (exactly what the receiver
 * does with dt_codec_decode_add, so both copies stay equal bit for bit). */
size_t dt_codec_encode_delta(dt_codec *c, const float *x, float *copy, size_t n, void *out);

/* The scalar conversions, round to nearest even (exposed for the tests); bf16's are
 * core/bf16.h's. */
uint16_t dt_f32_to_f16(float f);
float dt_f16_to_f32(uint16_t h);

#endif
