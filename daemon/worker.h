/* The worker process: owns one device for its whole life and runs jobs sent
 * by the daemon as JSON lines.
 *
 * Protocol (one JSON object per line on the socketpair):
 *   worker -> daemon  {"type":"hello","pid":N,"device":{...},"gpu_count":N}
 *                     {"type":"progress","job_id":N,"fraction":F,"message":S}
 *                     {"type":"run","job_id":N,"index":I,"run":{...}}
 *                     {"type":"done","job_id":N,"result":{...}}
 *                     {"type":"failed","job_id":N,"error":S}
 *                     {"type":"cancelled","job_id":N}
 *   daemon -> worker  {"type":"job","job_id":N,"kind":S,"spec":{...},"gpus":[own, reserved...]}
 *                     {"type":"cancel","job_id":N}
 * End of file on the socket tells the worker to exit. */
#ifndef DAEMON_WORKER_H
#define DAEMON_WORKER_H

/* Runs the worker loop on fd for device want (DEVICE_AUTO, DEVICE_CPU or a
 * GPU index). Returns the process exit status. */
int worker_main(int fd, int want);

/* Runs one job spec (already validated) in this process and fills *out (new)
 * with {"kind","status","error","result","runs","environment"}: the
 * one-shot mode. want as above. Returns 0 when the job succeeded. */
int worker_run_oneshot(const json_t *spec, int want, json_t **out);

#endif
