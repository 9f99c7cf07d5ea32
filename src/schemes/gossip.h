/* Gossip: averaging with graph neighbours through one-sided windows, for decentralized
 * schemes (dpsgd, eventgrad; docs/algorithms.md, docs/transport.md).
 *
 * Each rank holds xhat_j, the last value of its parameters that neighbour j wrote into its
 * window, per tensor. A rank writes the tensors it chooses into every neighbour's window
 * (dt_gossip_send: one-sided puts, passive target: the receiver takes no part), reads what
 * arrived (dt_gossip_receive; or dt_gossip_receive_sync in lock-step: every rank then reads
 * exactly its neighbours' writes of this step) and mixes: x <- (x + sum_j xhat_j) / (deg + 1)
 * (dt_gossip_mix). Lock-step takes two rounds of control messages per step ("my writes up to
 * these sequence numbers have completed", "I have read"), not counted as payload.
 *
 * --compress (lock-step only): parameter payloads against copies. The rank keeps cself, the
 * copy of its parameters that all its neighbours hold (every send goes to every neighbour, so
 * one copy serves them all), sends encode(x[t] - cself[t]) and adds the decoded change to
 * cself; each neighbour adds the same change to its xhat. A one-sided slot keeps only the
 * newest write, so every write must be read exactly once: lock-step guarantees it (checked
 * at each read). */
#ifndef DT_GOSSIP_H
#define DT_GOSSIP_H

/* --gamma's default, as --help tells it: the flag is eventgrad's and choco's, one flag of the
 * command line with one declared default (0.5); choco lowers it for top-k (choco.c) */
#define DT_GAMMA_DEFAULT_HELP "0.5; choco with --compress topk:F: 0.5 sqrt(F), 0.158 for topk:0.1"

#include "schemes/registry.h"

typedef struct dt_gossip dt_gossip;

/* Collective. Neighbours from the topology (ring | torus | exponential | complete), windows
 * for the model's tensors, every neighbour's copy starting from x (with --compress the
 * starting parameters are exchanged once, not counted). spec: none or a codec. */
dt_status dt_gossip_create(dt_step_ctx *c, const char *topology, const dt_codec_spec *spec, dt_gossip **out);
/* This rank's neighbours in the graph. */
int dt_gossip_num_neighbours(const dt_gossip *g);
/* The same graph and copies with a packed lock-step transport: every dt_gossip_send is one
 * two-sided message to each neighbour (a bitmap of the tensors in it, then their payloads,
 * whose sizes both sides know from the codec), every dt_gossip_receive_sync takes one from
 * each. No per-tensor puts, headers, flushes or token rounds: what crosses the link is the
 * counted bytes and MPI's envelope. Lock-step only (dt_gossip_receive is refused). */
dt_status dt_gossip_create_packed(dt_step_ctx *c, const char *topology, const dt_codec_spec *spec, dt_gossip **out);
/* Frees the memory; the windows must be gone (dt_gossip_drain or dt_gossip_abandon). */
void dt_gossip_free(dt_gossip *g);

/* Writes tensors ts[0..n) of x into every neighbour's window (one flush round). Counts the
 * baseline: every tensor to every neighbour. */
dt_status dt_gossip_send(dt_gossip *g, dt_comm *c, const int *ts, int n, const float *x);
/* Asynchronous: reads every slot, taking what arrived. */
dt_status dt_gossip_receive(dt_gossip *g, dt_comm *c);
/* Lock-step: reads exactly what every neighbour wrote this step. */
dt_status dt_gossip_receive_sync(dt_gossip *g, dt_comm *c);
/* The same, only for the tensors of which something new arrived since they were last mixed
 * (with copies several steps old, mixing the same copy again every step pulls x back to it
 * step after step). */
void dt_gossip_mix_fresh(dt_gossip *g, float *x);
/* x <- (x + sum_j xhat_j) / (deg + 1) */
void dt_gossip_mix(const dt_gossip *g, float *x);
/* Consensus with a step size (CHOCO-SGD, Koloskova et al. 2019): x <- x + gamma W sum_j
 * (xhat_j - xhat_self), where xhat_self is the copy of x the neighbours hold. The pull is
 * between copies, so copies several steps old or compressed pull x towards agreement and not
 * back to an old x; gamma < 1 damps what compression leaves out. Needs the own copy
 * (--compress, or dt_gossip_keep_own_copy). */
void dt_gossip_mix_consensus(const dt_gossip *g, float *x, float gamma);
/* The same, only for the tensors of which something new arrived since they were last mixed
 * (asynchronous copies stay the same for several steps, and the same pull added at each of
 * them overshoots): eventgrad's --mix consensus. */
void dt_gossip_mix_consensus_fresh(dt_gossip *g, float *x, float gamma);
/* Sums instead of parameters (eventgrad's --mix sum): what a rank sends is the running sum of
 * its own updates, which starts at zero, so every copy starts there (call after
 * dt_gossip_create, before anything is sent). */
void dt_gossip_zero_copies(dt_gossip *g);
/* Every rank's model is x (an exact average of them all was just taken): every copy, the
 * neighbours' and the own one, becomes x, with no message (every rank knows it). Lock-step: no
 * write is on its way; asynchronous, one still on its way replaces its slot's copy later. */
void dt_gossip_agree(dt_gossip *g, const float *x);
/* For each tensor of which something new arrived: d = sum_j xhat_j - applied (what the
 * neighbours' sums gained since last applied); x += d, base += d, applied += d. */
void dt_gossip_apply_sums_fresh(dt_gossip *g, float *x, float *applied, float *base);
/* Without --compress: keep the copy of its own tensors the neighbours hold, for
 * dt_gossip_mix_consensus: each send copies what it sent, or with dt_gossip_overlap the window
 * mirrors each round into it once the round has arrived (dt_win_mirror_arrived). Call after
 * dt_gossip_create. */
dt_status dt_gossip_keep_own_copy(dt_gossip *g, const float *x);
/* The own copy (NULL without one): what every neighbour holds of this rank's parameters. */
const float *dt_gossip_own_copy(const dt_gossip *g);

/* Collective, every epoch: logs the transport line (tensors sent, fresh arrivals from each
 * neighbour, overwritten) and warns of a neighbour that sent but of which nothing arrived. */
dt_status dt_gossip_end_epoch(dt_gossip *g, dt_step_ctx *c);
/* Collective, at the end: every neighbour announces its writes to this rank and this rank
 * reads until all have arrived (every put read or counted overwritten); frees the windows. */
dt_status dt_gossip_drain(dt_gossip *g, dt_comm *c);
/* Async schemes: sends do not wait for the link (dt_win_set_overlap); a tensor's write asked
 * for while its previous one is in flight is coalesced with the next; a send waits only for a
 * round still on its way after max_lag steps. */
dt_status dt_gossip_overlap(dt_gossip *g, int max_lag);
/* Lets the transport move along (puts in flight, incoming writes that need this rank's help):
 * called between layers of backward, so a round arrives and the next starts within a step. */
dt_status dt_gossip_progress(dt_gossip *g);
/* Collective: frees the windows without draining (after a failure at start). */
void dt_gossip_abandon(dt_gossip *g);

/* Checkpoints, as records "graph", ... (the trainer prefixes the scheme's name): the graph (the scheme's own settings that shape its
 * saved state, extra[0..nextra), then this rank's neighbours), the neighbours' values this
 * rank holds and (--compress) the copy of its own they hold. Loading refuses another graph
 * with one line naming the flags that shape it (`what`, e.g. "--topology"). Taken at an
 * epoch's end; in lock-step every write has been read by then, so a resumed run repeats the
 * uninterrupted one (the windows start afresh on both sides, their sequence numbers too). */
dt_status dt_gossip_save(dt_gossip *g, const int *extra, int nextra, dt_records *out);
dt_status dt_gossip_load(dt_gossip *g, const dt_comm *c, const int *extra, int nextra, const char *what,
                         const dt_tfile *f, const char *path);

/* The copies alone (the neighbours' values, and the own copy where kept) as records of the given
 * names: a second gossip over the same graph (gradient tracking's) in the same checkpoint. */
dt_status dt_gossip_save_copies(const dt_gossip *g, const char *neighbours, const char *own, dt_records *out);
dt_status dt_gossip_load_copies(dt_gossip *g, const char *neighbours, const char *own, const dt_tfile *f,
                                const char *path);

/* The hooks every gossip scheme has alike, for schemes whose state (s->impl) starts with its
 * dt_gossip pointer: the transport line every epoch, the drain at the end, freeing the
 * windows after a failed start, and (dpsgd, choco) the checkpoint records. */
dt_status dt_gossip_hook_end_epoch(dt_scheme *s, dt_step_ctx *c);
dt_status dt_gossip_hook_finish(dt_scheme *s, dt_step_ctx *c);
/* Checkpoints of a scheme whose saved state is gossip's alone, shaped by --topology. */
dt_status dt_gossip_hook_save(dt_scheme *s, dt_step_ctx *c, dt_records *out);
dt_status dt_gossip_hook_load(dt_scheme *s, dt_step_ctx *c, const dt_tfile *f, const char *path);
void dt_gossip_hook_abandon(dt_scheme *s, dt_step_ctx *c);

#endif
