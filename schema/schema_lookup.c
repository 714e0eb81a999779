/* Lookup of embedded schema files by name. */
#include "schema_embedded.h"

#include <string.h>

const char *schema_file_text(const char *name)
{
    for (const schema_file *f = schema_files; f->name; f++)
        if (strcmp(f->name, name) == 0)
            return f->text;
    return NULL;
}
