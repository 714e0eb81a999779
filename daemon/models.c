/* GET /v1/models from the engine's preset table. */
#include "models.h"

#include "model.h"

json_t *models_describe(void)
{
    json_t *models = json_array();
    for (size_t i = 0; i < lmk_model_preset_count(); i++) {
        const lmk_model_config *c = lmk_model_preset_at(i);
        json_array_append_new(models,
                              json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:I}", "name", c->name, "d_model",
                                        c->d_model, "d_ff", c->d_ff, "num_layers", c->num_layers, "num_heads",
                                        c->num_heads, "d_head", c->d_model / c->num_heads, "vocab_size",
                                        c->vocab_size, "parameters", (json_int_t)lmk_model_param_count(c)));
    }
    return json_pack("{s:o}", "models", models);
}
