/* The models of the PyTorch oracles (tests/test_oracle.c, tests/test_optim.c): a zoo name, or
 * gpt-micro (dt_gpt_spec(2, 4, 32, 40, 256), the structure of gpt-tiny at a size whose oracle
 * files stay small, 40 positions to take the attention layer through more than one block:
 * scripts/torch_oracle.py's gpt_micro). */
#ifndef DTRAIN_TESTS_ORACLE_MODELS_H
#define DTRAIN_TESTS_ORACLE_MODELS_H

#include <stdlib.h>
#include <string.h>

#include "dtrain.h"
#include "models/model.h"

static inline dt_status open_oracle_model(const char *name, dt_model **m) {
    if (strcmp(name, "gpt-micro") != 0) return dt_model_from_name(name, m);
    char *spec = dt_gpt_spec(2, 4, 32, 40, 256);
    if (!spec) return DT_ERR_NOMEM;
    const dt_status st = dt_model_from_spec(spec, name, m);
    free(spec);
    return st;
}

#endif
