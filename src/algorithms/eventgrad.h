/* Shared by eventgrad.c and dpsgd.c: D-PSGD is EventGraD in lock-step with threshold 0. */
#ifndef DT_EVENTGRAD_H
#define DT_EVENTGRAD_H

#include "algorithms/strategy.h"

/* Sets s up as event-triggered decentralized SGD; threshold "adaptive" or "const:C". */
dt_status dt_eventgrad_setup(dt_strategy *s, int sync, const char *threshold);

#endif
