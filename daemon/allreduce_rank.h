/* `lmperfd __allreduce-rank`: one rank of an all-reduce started by the
 * allreduce job through mpirun (internal sub-command): the MPI CPU baseline,
 * or NCCL with one process per GPU. */
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
 *
 * With --backend nccl [--devices D0,D1,...] each rank opens a GPU instead
 * (local rank i of its host: cuda:Di, or cuda:i without --devices), rank 0
 * makes an NCCL id that MPI_Bcast gives the others, and every rank joins one
 * communicator; each size is lmk_nccl_rank_point's loop on device buffers
 * (MPI_Allreduce MIN as the barrier), the slowest rank's time per iteration,
 * the mismatches summed over ranks, and "devices": "host:cuda:N,..." (rank
 * order) in each line. A failure before the communicator exists is an error
 * line for every size with the first failing rank's reason.
 * Returns the process exit status (0, 2 on bad arguments or no MPI). */
int allreduce_rank_main(int argc, char **argv);

#endif
