/* GET /v1/models from the engine's preset table. */
#include "models.h"

json_t *models_describe(void)
{
    return json_pack("{s:[]}", "models");
}
