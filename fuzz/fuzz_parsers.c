/* libFuzzer target: the small text parsers, chosen by the first byte (mod 6):
 *   0 --compress (dt_codec_parse)      1 --schedule (dt_schedule_parse, then the rates)
 *   2 --split (dt_split_parse)          3 eventgrad's --threshold (dt_threshold_parse, its
 *                                         text back, then the sender rule's decisions)
 *   4 --topology (dt_topology_neighbors; byte 1 = ranks, byte 2 = rank)
 *   5 a flag's value of every kind (core/flag.h: dt_flag_set, formatted and set again: the same)
 * The rest of the input is the text. */
#include <math.h>
#include <string.h>

#include "core/flag_table.h"
#include "schemes/paramavg.h"
#include "schemes/trigger.h"
#include "comm/codec.h"
#include "comm/topology.h"
#include "dtrain.h"
#include "fuzz_util.h"

/* one flag of every kind, as the schemes and the CLI declare them */
typedef struct {
    int i;
    long l;
    float f;
    double d;
    const char *t;
    int sw;
    uint64_t seed;
    dt_param_weighting agg;
    dt_threshold th;
} kinds_opts;

static const dt_flag kinds[] = {
    {"i", DT_AT_INT(kinds_opts, i), .min = 1, .max = 1000},
    {"l", DT_AT_INT(kinds_opts, l)},
    {"f", DT_AT_FLOAT(kinds_opts, f), .min = 0, .max = 1, .min_open = 1},
    {"d", DT_AT_FLOAT(kinds_opts, d)},
    {"t", DT_AT_TEXT(kinds_opts, t)},
    {"sw", DT_AT_SWITCH(kinds_opts, sw)},
    {"seed", DT_AT_SEED(kinds_opts, seed)},
    {"aggregate", DT_AT_CHOICE(kinds_opts, agg, dt_param_weighting_words)},
    {"threshold", DT_AT_CUSTOM(kinds_opts, th, dt_threshold, dt_threshold_parse, dt_threshold_format)},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int which = data[0] % 6;
    int size_arg = 1, rank_arg = 0;
    data++, size--;
    if (which == 4) {
        if (size < 2) return 0;
        size_arg = 1 + data[0], rank_arg = data[1] % size_arg;
        data += 2, size -= 2;
    }
    char *text = dt_fuzz_str(data, size);
    switch (which) {
    case 0: {
        dt_codec_spec s;
        if (dt_codec_parse(text, &s) == DT_OK) {
            char buf[64];
            dt_codec_spec_str(&s, buf, sizeof buf);
            dt_codec_spec again;
            /* what the log prints parses to the same codec */
            if (dt_codec_parse(buf, &again) != DT_OK || again.kind != s.kind) abort();
            const size_t ns[] = {0, 1, 7, 256, 1000003};
            for (int i = 0; i < 5; i++) {
                if (dt_codec_topk_count(&s, ns[i]) > ns[i]) abort();
                (void)dt_codec_bytes(&s, ns[i]);
            }
        }
        break;
    }
    case 1: {
        dt_schedule s;
        if (dt_schedule_parse(text, 0.05f, &s) == DT_OK) {
            const double pos[] = {0, 0.5, 1, 9.99, 10, 1e9};
            for (int i = 0; i < 6; i++) (void)dt_schedule_lr(&s, pos[i], 10);
        }
        break;
    }
    case 2: {
        dt_split_kind k;
        (void)dt_split_parse(text, &k);
        break;
    }
    case 3: {
        dt_trigger_opts o = {.horizon = 2.0f, .history = 3, .decay = 0.9f, .warmup = 2};
        if (dt_threshold_parse(text, &o.threshold)) break;
        char back[64];
        dt_threshold again;
        dt_threshold_format(&o.threshold, back, sizeof back);
        /* what the log prints parses to the same threshold */
        if (dt_threshold_parse(back, &again) || again.adaptive != o.threshold.adaptive || again.c != o.threshold.c) abort();
        dt_trigger t;
        if (dt_trigger_init(&t, 2, &o) == DT_OK) {
            const double norms[] = {1, 1, 2, 1e30, INFINITY, NAN, 0};
            for (long k = 0; k < 7; k++) (void)dt_trigger_decide(&t, (int)(k & 1), k, norms[k]);
            dt_trigger_free(&t);
        }
        break;
    }
    case 4: {
        int nbrs[256], count = 0;
        if (dt_topology_neighbors(text, rank_arg, size_arg, nbrs, 256, &count) == DT_OK) {
            for (int i = 0; i < count; i++)
                if (nbrs[i] < 0 || nbrs[i] >= size_arg || nbrs[i] == rank_arg || (i && nbrs[i] <= nbrs[i - 1])) abort();
        }
        break;
    }
    case 5: {
        for (int i = 0; i < (int)(sizeof kinds / sizeof kinds[0]); i++) {
            kinds_opts a = {0}, b = {0};
            if (dt_flag_set(&kinds[i], &a, text) != DT_OK) continue;
            char t1[300], t2[300];
            dt_flag_format(&kinds[i], &a, t1, sizeof t1);
            if (dt_flag_set(&kinds[i], &b, t1) != DT_OK) abort();
            dt_flag_format(&kinds[i], &b, t2, sizeof t2);
            if (strcmp(t1, t2) || (kinds[i].kind != DT_FLAG_TEXT && memcmp((char *)&a + kinds[i].at, (char *)&b + kinds[i].at, kinds[i].size)))
                abort();
        }
        break;
    }
    }
    free(text);
    return 0;
}
