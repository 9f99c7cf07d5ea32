/* Gradient payloads with error feedback (--compress), for the schemes that average
 * gradients: allreduce, ps --ps-mode grad (docs/algorithms.md "Compression").
 *
 * Every rank sends encode(g + e) and keeps e = (g + e) - decode(that), so what one step does
 * not send is sent later. The receivers decode the N payloads and add them in rank order,
 * then multiply by 1/N (as the uncompressed allreduce mean does): every rank that averages
 * gets the same mean bit for bit.
 * (Parameter payloads, the other kind, are a codec call each: dt_codec_encode_delta on the
 * sender, dt_codec_decode_add on the receiver; paramavg.h and gossip.h use them.) */
#ifndef DT_PAYLOAD_H
#define DT_PAYLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "comm/codec.h"
#include "core/tensorfile.h"

typedef struct dt_grad_payload {
    dt_codec *codec;
    size_t n, bytes;      /* floats per gradient, bytes per payload */
    float *residual;      /* error feedback, n floats */
    uint8_t *send;        /* this rank's payload, bytes */
} dt_grad_payload;

/* n floats per gradient; spec must not be none. */
dt_status dt_grad_payload_init(dt_grad_payload *p, const dt_codec_spec *spec, size_t n);
void dt_grad_payload_free(dt_grad_payload *p);
/* p->send = encode(g + residual); residual updated. */
void dt_grad_payload_encode(dt_grad_payload *p, const float *g);
/* out = (sum over r < count of decode(payload r)) * (1/count), payload r at in + r * p->bytes. */
void dt_grad_payload_mean(const dt_grad_payload *p, const uint8_t *in, int count, float *out);
/* Checkpoints: the residual as the record "<name>". */
dt_status dt_grad_payload_save(const dt_grad_payload *p, const char *name, dt_records *out);
dt_status dt_grad_payload_load(dt_grad_payload *p, const char *name, const dt_tfile *f, const char *path);

#endif
