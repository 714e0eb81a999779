/* GET /v1/models: the model presets with their shapes and parameter counts,
 * from the engine's preset table. */
#ifndef DAEMON_MODELS_H
#define DAEMON_MODELS_H

#include <jansson.h>

/* {"models": [{"name", "d_model", "d_ff", "num_layers", "num_heads",
 * "d_head", "parameters" (at vocab 10000)}...]} (new). */
json_t *models_describe(void);

#endif
