/* How libdtrain's MPI calls wait (pmpi.c, the profiling interface): spinning, as MPI does,
 * or polling and yielding the core between polls, for ranks that share their cores. */
#ifndef DT_COMM_PMPI_H
#define DT_COMM_PMPI_H

#include <dtrain.h> /* DT_API: the MPI functions pmpi.c defines are exported, as the public ones */

/* 1: waits for requests, MPI_Send and MPI_Recv poll and yield (dt_comm_init turns it on when
 * a host has more ranks than cores, or DTRAIN_WAIT=yield; DTRAIN_WAIT=spin keeps MPI's). */
void dt_pmpi_yield_waits(int on);
/* 1 when they do (the log's config says "waits": "yield" or "spin") */
int dt_pmpi_yielding(void);

#endif
