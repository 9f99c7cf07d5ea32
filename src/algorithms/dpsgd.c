/* dpsgd: decentralized neighbour averaging every step (Lian et al. 2017). By the spec it is
 * EventGraD in lock-step with threshold 0: every tensor goes to every neighbour every step
 * through the same one-sided windows, and step k mixes the neighbours' x_j(k). */
#include "algorithms/eventgrad.h"

dt_status dt_dpsgd_create(dt_strategy *s) { return dt_eventgrad_setup(s, 1, "const:0"); }
