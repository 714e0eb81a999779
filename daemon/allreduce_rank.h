/* `lmperfd __allreduce-rank`: one rank of the MPI CPU all-reduce baseline,
 * started by the allreduce job through mpirun (internal sub-command). */
#ifndef DAEMON_ALLREDUCE_RANK_H
#define DAEMON_ALLREDUCE_RANK_H

#define ALLREDUCE_RANK_COMMAND "__allreduce-rank"

/* lmperfd __allreduce-rank --sizes B1,B2,... --warmup W --iterations N
 *
 * Every rank all-reduces (MPI_SUM, MPI_FLOAT, out of place) host buffers of
 * each size; rank 0 prints one JSON line per size on stdout:
 *   {"bytes": B, "world": n, "times_ms": [...], "mismatches": k}
 * or {"bytes": B, "world": n, "error": "..."}. Times: MPI_Barrier, then
 * MPI_Wtime around MPI_Allreduce; the iteration's time is the slowest rank's.
 * Returns the process exit status (0, 2 on bad arguments or no MPI). */
int allreduce_rank_main(int argc, char **argv);

#endif
