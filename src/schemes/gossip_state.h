/* Gossip's state (gossip.h), shared by its three files: gossip.c (set-up, sending, reading,
 * mixing, the end), gossip_report.c (the transport line every epoch) and gossip_records.c
 * (checkpoint records). Private to src/schemes. */
#ifndef DT_GOSSIP_STATE_H
#define DT_GOSSIP_STATE_H

#include "comm/window.h"
#include "schemes/gossip.h"

struct dt_gossip {
    int nn, *nbrs;
    float W;               /* 1 / (deg + 1) */
    dt_win *win;
    int T;
    size_t *off, *len, np;
    float *xhat;           /* nn x np: the last value received from each neighbour */
    MPI_Request *req;      /* 2 nn */
    MPI_Status *statuses;
    uint64_t *seq_out, *seq_in; /* lock-step: nn x T sequence numbers sent / to expect */
    uint64_t sent_epoch, *fresh_epoch, overwritten_mark, coalesced_mark; /* this epoch's transport figures */
    /* --compress (NULL codec: the plain float window) */
    dt_codec *codec;
    float *cself;          /* np: the copy of x every neighbour holds (with overlap, the window
                            * mirrors into it what arrived) */
    int overlap;           /* dt_gossip_overlap: sends arrive some steps later */
    unsigned char *enc;    /* per tensor ebytes[t] at eoff[t]: this step's encoded change */
    size_t *eoff, *ebytes;
    const void **send_src; /* this step's payloads, in send order */
    size_t *send_bytes;
    unsigned char *rbuf;   /* max ebytes: a payload read from the window */
    int *graph;            /* the saved graph record (records keep pointers until written) */
    unsigned char *fresh_t; /* T: a neighbour's tensor t arrived since it was last mixed */
    /* packed (dt_gossip_create_packed; win NULL): one two-sided message per neighbour a step */
    int packed;
    size_t pk_bitmap, pk_max; /* bitmap bytes; the largest message: bitmap + every payload */
    unsigned char *pk_send;   /* pk_max: this step's message */
    unsigned char *pk_recv;   /* nn x pk_max */
};

#endif
