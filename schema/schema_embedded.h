/* The files of schema/ embedded in the binary at build time, so lmperfd needs
 * no data directory: SQL migrations (NNNN_name.sql) and JSON Schemas
 * (jobs/<kind>.json). */
#ifndef SCHEMA_EMBEDDED_H
#define SCHEMA_EMBEDDED_H

typedef struct schema_file {
    const char *name; /* path relative to schema/, e.g. "0001_init.sql" */
    const char *text;
} schema_file;

/* Terminated by an entry with name == NULL; migrations are in name order. */
extern const schema_file schema_files[];

/* Returns the text of the named file, or NULL. */
const char *schema_file_text(const char *name);

#endif
