/* Gradient payloads with error feedback (see payload.h). */
#include "core/alloc.h"
#include "schemes/payload.h"

#include <stdlib.h>
#include <string.h>

dt_status dt_grad_payload_init(dt_grad_payload *p, const dt_codec_spec *spec, size_t n) {
    memset(p, 0, sizeof *p);
    dt_status st = dt_codec_create(spec, n, &p->codec);
    if (st != DT_OK) return st;
    p->n = n;
    p->bytes = dt_codec_bytes(spec, n);
    DT_TRY(dt_calloc(p->residual, n, "compression buffers of %zu values", n));
    return dt_malloc(p->send, p->bytes, "compression buffers of %zu values", n);
}

void dt_grad_payload_free(dt_grad_payload *p) {
    dt_codec_free(p->codec);
    dt_free_all(p->residual, p->send);
    memset(p, 0, sizeof *p);
}

void dt_grad_payload_encode(dt_grad_payload *p, const float *g) {
    dt_codec_encode_ef(p->codec, g, p->residual, p->n, p->send);
}

void dt_grad_payload_mean(const dt_grad_payload *p, const uint8_t *in, int count, float *out) {
    memset(out, 0, p->n * sizeof(float));
    for (int r = 0; r < count; r++) dt_codec_decode_add(p->codec, in + (size_t)r * p->bytes, p->n, out);
    const float inv = 1.0f / (float)count;
    for (size_t i = 0; i < p->n; i++) out[i] *= inv;
}

dt_status dt_grad_payload_save(const dt_grad_payload *p, const char *name, dt_records *out) {
    return dt_records_add(out, name, p->residual, p->n);
}

dt_status dt_grad_payload_load(dt_grad_payload *p, const char *name, const dt_tfile *f, const char *path) {
    return dt_tfile_take(f, path, name, p->residual, p->n * sizeof(float));
}
