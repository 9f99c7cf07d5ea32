/* The one-sided transport's state (window.h), shared by its three files: window_setup.c (the
 * window's making and its end), window.c (the protocol: puts, reads) and window_overlap.c (the
 * overlap engine, dt_win_set_overlap). Private to src/comm. The simulation build's own layout
 * and calls are here too, chosen by DT_SIM_BUILD (core/sim.h): every build compiles both. */
#ifndef DT_WINDOW_STATE_H
#define DT_WINDOW_STATE_H

#include <assert.h>
#include <limits.h>
#include <string.h>

#include "comm/window.h"
#include "core/hash.h"
#include "core/sim.h"

#define HDR_BYTES 16 /* {uint64 seq, uint64 check} per (slot, tensor) */

struct dt_win {
    dt_comm *c;
    MPI_Win win;
    MPI_Win win_lower;       /* simulated: the same memory again, for puts to lower ranks (win_to) */
    MPI_Comm pcomm;          /* private duplicate of c->comm, only for progress polls */
    int nnbrs, T;
    int *nbrs;               /* nnbrs ranks */
    int *peer_slot;          /* peer_slot[k]: index of this rank in nbrs[k]'s list */
    int float_layout;        /* made by dt_win_create: tensor t is floats [off, off+len) of
                              * the n-float vector, boff = 4 off, cap = 4 len */
    size_t slot_bytes;       /* bytes of one slot: 4n, or the sum of the byte capacities */
    size_t *boff, *cap;      /* T tensors: byte offset inside a slot, capacity in bytes */
    size_t maxcap;
    unsigned char *base;     /* local window memory: headers, then nnbrs slots of slot_bytes */
    size_t hdr_region;       /* nnbrs * T * HDR_BYTES */
    uint64_t *sent;          /* [k * T + t]: puts made to neighbour k of tensor t */
    uint64_t *last;          /* [k * T + t]: sequence number of the last fresh read */
    uint64_t *hdr_out;       /* [2 * (k * T + t)]: header put to neighbour k for tensor t; an
                              * origin buffer, so it lives until the flush that follows */
    unsigned char *scratch;  /* maxcap bytes: reads land here until known consistent */
    unsigned char *stage;    /* slot_bytes: what was last sent of each tensor; the puts' origin
                              * buffer, unchanged until the next write of that tensor */
    /* overlap (dt_win_set_overlap): puts are started, not waited for */
    int overlap;
    unsigned char *stage2;   /* slot_bytes: each tensor's second copy */
    unsigned char *which;    /* [t]: the copy (0 stage, 1 stage2) tensor t last went out from */
    size_t *pend;            /* [t]: 1 + bytes of a newer write waiting in the other copy; 0: none */
    int in_flight;           /* a round of puts has not yet arrived */
    int max_lag;             /* put calls a round may stay in flight before the next waits for it */
    uint64_t calls, round_call; /* put calls made; the call that started the round in flight */
    MPI_Request *req;        /* [2 (t nnbrs + k)]: the data and header puts of tensor t to k; then
                              * nnbrs read-backs */
    uint64_t *probe;         /* [2 k]: neighbour k's header of tensor probe_t, read back */
    uint64_t *probe_want;    /* [k]: the sequence number that shows the round arrived */
    int probe_t;
    MPI_Status *stat;        /* as many (not MPI_STATUSES_IGNORE: GCC 12 warns of MPICH's) */
    size_t *round_bytes;     /* [t]: 1 + bytes of tensor t in the round in flight; 0: not in it */
    unsigned char *mirror;   /* dt_win_mirror_arrived's copy (the caller's), or NULL */
    /* the simulation build's layout (dt_win_put_msg); NULL and 0 in the ordinary build */
    size_t *soff;            /* [t]: tensor t's place in a slot, its header first */
    size_t stride;           /* bytes of a slot, headers included */
    unsigned char *pack;     /* nnbrs * stride: each put's header and data side by side */
    dt_win_stats st;
};

/* Where the header and the data of (slot, t) are in a window: the headers of every slot first,
 * then the slots; in the simulation build each tensor's header just before its data
 * (dt_win_put_msg). */
static inline MPI_Aint hdr_disp(const dt_win *w, int slot, int t) {
    if (DT_SIM_BUILD) return (MPI_Aint)((size_t)slot * w->stride + w->soff[t]);
    return (MPI_Aint)(((size_t)slot * (size_t)w->T + (size_t)t) * HDR_BYTES);
}
static inline uint64_t *hdr_ptr(const dt_win *w, int slot, int t) {
    return (uint64_t *)(void *)(w->base + hdr_disp(w, slot, t));
}
static inline size_t data_byte_off(const dt_win *w, int slot, int t) {
    if (DT_SIM_BUILD) return (size_t)hdr_disp(w, slot, t) + HDR_BYTES;
    return w->hdr_region + (size_t)slot * w->slot_bytes + w->boff[t];
}

/* The overlap engine's requests of a round (w->req): two a put (data, header) for every
 * (neighbour, tensor), then neighbour k's read-back at dt_win_probe_req(w, k). */
static inline int dt_win_nreq(const dt_win *w) { return 2 * w->T * w->nnbrs + w->nnbrs; }
static inline MPI_Request *dt_win_probe_req(dt_win *w, int k) {
    return w->req + 2 * (size_t)w->T * (size_t)w->nnbrs + k;
}

/* The window a put, get or flush to `target` goes through. In the simulation build puts to
 * lower ranks go through a second window over the same memory, so that in either window a pair
 * of neighbours only ever puts one way. SMPI 3.32 keeps a put's receiving request in the
 * target's window until a flush retires it, and MPI_Win_flush(target) also waits for the
 * target's puts into this rank's window: with one window, flushing a neighbour waited for its
 * puts in flight (two ranks putting to each other took turns), and never flushing (the overlap
 * engine) left every put of the run in SimGrid's activity lists, whose cost grows with them
 * (gpt-tiny's eventgrad: minutes a step). With two, a flush waits only for this rank's puts. */
static inline MPI_Win win_to(const dt_win *w, int target) {
    if (DT_SIM_BUILD && target < w->c->rank) return w->win_lower;
    return w->win;
}

/* MPI_Win_sync: puts completed at this rank become visible to its loads. The simulation
 * build has no such call (SMPI 3.32 warns it is not implemented) and needs none: every
 * simulated rank runs on one thread, and a put is copied in when it completes. */
static inline int dt_win_sync(MPI_Win win) {
    if (DT_SIM_BUILD) return MPI_SUCCESS;
    return MPI_Win_sync(win);
}

/* The check word of write `seq` whose data hashes to `h`: a bijection of seq for a fixed h,
 * so a header whose two words come from different writes never matches either write's data. */
static inline uint64_t check_word(uint64_t h, uint64_t seq) {
    return dt_mix64(h ^ (seq * 0x9E3779B97F4A7C15ULL));
}

/* One put of the protocol, as both the plain path (window.c) and the overlap engine
 * (window_overlap.c) make it and count it. The data put of `bytes` bytes of tensor t from src (a staging copy): as floats in the float
 * layout (as it always was), as bytes otherwise; with req, a request-based put (MPI_Rput).
 * An MPI error code. */
static inline int dt_win_put_data(dt_win *w, int target, int slot, int t, size_t bytes, const unsigned char *src,
                                  MPI_Request *req) {
    const MPI_Aint disp = (MPI_Aint)data_byte_off(w, slot, t);
    MPI_Datatype type = MPI_BYTE;
    int cnt = (int)bytes;
    assert(bytes <= (size_t)INT_MAX);
    if (w->float_layout && bytes % sizeof(float) == 0) {
        type = MPI_FLOAT;
        cnt = (int)(bytes / sizeof(float));
    }
    if (req) return MPI_Rput(src, cnt, type, target, disp, cnt, type, win_to(w, target), req);
    return MPI_Put(src, cnt, type, target, disp, cnt, type, win_to(w, target));
}

/* The simulation's put: the header and the data of tensor t to neighbour k in ONE message (from
 * k's part of the pack buffer, which stays unchanged until the next put of (k, t)). SMPI copies
 * a put into the target's memory whole when its transfer ends, and two puts are two flows on
 * the link: the 16-byte header arrived long before its data, so a read-back that found it took
 * a round for arrived with its data still on the link (the next round piled up behind it), and
 * waiting for the data would stall the rank. As one message the header shows exactly when its
 * data has landed, as a real MPI's in-order stream makes it show. An MPI error code. */
static inline int dt_win_put_msg(dt_win *w, int k, int t, size_t bytes, const unsigned char *src, MPI_Request *req) {
    assert(bytes <= (size_t)INT_MAX - HDR_BYTES);
    unsigned char *p = w->pack + (size_t)k * w->stride + w->soff[t];
    memcpy(p, w->hdr_out + 2 * ((size_t)k * (size_t)w->T + (size_t)t), HDR_BYTES);
    if (bytes) memcpy(p + HDR_BYTES, src, bytes);
    const int n = (int)(HDR_BYTES + bytes), target = w->nbrs[k];
    const MPI_Aint disp = hdr_disp(w, w->peer_slot[k], t);
    if (req) return MPI_Rput(p, n, MPI_BYTE, target, disp, n, MPI_BYTE, win_to(w, target), req);
    return MPI_Put(p, n, MPI_BYTE, target, disp, n, MPI_BYTE, win_to(w, target));
}

/* The simulation's flush of every neighbour (win_to: each waits only for this rank's puts to
 * it), counted. An MPI error code. */
static inline int dt_win_flush_nbrs(dt_win *w) {
    int err = MPI_SUCCESS;
    for (int k = 0; k < w->nnbrs && err == MPI_SUCCESS; k++) err = MPI_Win_flush(w->nbrs[k], win_to(w, w->nbrs[k]));
    w->st.flushes += (uint64_t)w->nnbrs;
    return err;
}

/* n data puts of `bytes` bytes each, and their headers: the messages counted, the protocol's
 * overhead in the window's own figures */
static inline void dt_win_count_puts(dt_win *w, int n, size_t bytes) {
    dt_count_send(w->c, (uint64_t)n, (uint64_t)n * (uint64_t)bytes);
    w->st.puts += (uint64_t)n;
    w->st.put_bytes += (uint64_t)n * (uint64_t)bytes;
    w->st.header_puts += (uint64_t)n;
    w->st.header_bytes += (uint64_t)n * HDR_BYTES;
    dt_count_other(w->c, (uint64_t)n * HDR_BYTES); /* protocol: each data put's checked header */
}

/* window_overlap.c, for window.c: a batch of puts queued with overlap on (arguments as
 * window.c's put_batch); the engine moved along (dt_win_progress) */
dt_status dt_win_put_overlapped(dt_win *w, const int *ts, int nt, const void *const *src, const size_t *nbytes,
                                const unsigned char *x);
dt_status dt_win_overlap_advance(dt_win *w);

#endif
