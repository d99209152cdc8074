/* Building blocks of the tools' JSON schemas: properties, required names,
 * nullable types, and tables of fields so that what a reply holds is
 * written once, as data. */
#ifndef MCP_SCHEMA_H
#define MCP_SCHEMA_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* The fields of an object in a schema: one table per object, so that what
 * a reply holds is written once, as data. */
enum { F_REQ = 1, F_NULL = 2 }; /* required; may be null */
struct field {
	const char *name, *type;
	int flags;
	const char *desc;
};

/* A property of the given type (none when NULL) and description. */
cJSON *prop(cJSON *props, const char *name, const char *type, const char *desc);
/* An object schema; *props receives its properties. */
cJSON *schema(cJSON **props);
/* Adds name to schema_obj's "required". */
void required(cJSON *schema_obj, const char *name);
/* A property whose type is [type, "null"]. */
cJSON *nullable(cJSON *props, const char *name, const char *type, const char *desc);
/* Adds the fields to obj's properties, and the required ones to its
 * "required"; returns the properties. */
cJSON *add_fields(cJSON *obj, const struct field *f, size_t n);
/* The items of the array property `name`: objects with these fields. */
void object_items(cJSON *props, const char *name, const struct field *f, size_t n);
/* An "enum" on property `name`: name_of(i) for i in [from, to). */
void string_enum(cJSON *props, const char *name, const char *(*name_of)(int), int from, int to);

#endif
