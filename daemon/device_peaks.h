/* Peak dense throughput per device and precision, for MFU. Figures are the
 * vendor's dense (no sparsity) peaks at boost clock; a device not in the
 * table has no MFU (reported as null with the reason), never a guess. */
#ifndef DAEMON_DEVICE_PEAKS_H
#define DAEMON_DEVICE_PEAKS_H

#include "model.h"
#include "runctx.h"

/* Peak FLOP/s of dev for GEMMs in precision prec, or 0 when unknown (the CPU,
 * an unlisted GPU). *source (static) names the table row or the reason. */
double device_peak_flops(const runctx_device *dev, lmk_precision prec, const char **source);

#endif
