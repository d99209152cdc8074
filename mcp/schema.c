/* Building blocks of the tools' JSON schemas (schema.h). */
#include "schema.h"

cJSON *prop(cJSON *props, const char *name, const char *type, const char *desc)
{
	cJSON *p = cJSON_AddObjectToObject(props, name);
	if (type)
		cJSON_AddStringToObject(p, "type", type);
	cJSON_AddStringToObject(p, "description", desc);
	return p;
}

cJSON *schema(cJSON **props)
{
	cJSON *s = cJSON_CreateObject();
	cJSON_AddStringToObject(s, "type", "object");
	*props = cJSON_AddObjectToObject(s, "properties");
	return s;
}

void required(cJSON *schema_obj, const char *name)
{
	cJSON *r = cJSON_GetObjectItemCaseSensitive(schema_obj, "required");
	if (!r)
		r = cJSON_AddArrayToObject(schema_obj, "required");
	cJSON_AddItemToArray(r, cJSON_CreateString(name));
}

cJSON *nullable(cJSON *props, const char *name, const char *type, const char *desc)
{
	cJSON *p = prop(props, name, NULL, desc);
	cJSON *t = cJSON_AddArrayToObject(p, "type");
	cJSON_AddItemToArray(t, cJSON_CreateString(type));
	cJSON_AddItemToArray(t, cJSON_CreateString("null"));
	return p;
}

/* Adds the fields to obj's properties, and the required ones to its
 * "required"; returns the properties. */
cJSON *add_fields(cJSON *obj, const struct field *f, size_t n)
{
	cJSON *props = cJSON_GetObjectItemCaseSensitive(obj, "properties");
	if (!props)
		props = cJSON_AddObjectToObject(obj, "properties");
	for (size_t i = 0; i < n; i++) {
		if (f[i].flags & F_NULL)
			nullable(props, f[i].name, f[i].type, f[i].desc);
		else
			prop(props, f[i].name, f[i].type, f[i].desc);
		if (f[i].flags & F_REQ)
			required(obj, f[i].name);
	}
	return props;
}

/* An array property whose items are objects with these fields. */
void object_items(cJSON *props, const char *name, const struct field *f, size_t n)
{
	cJSON *item = cJSON_AddObjectToObject(cJSON_GetObjectItemCaseSensitive(props, name), "items");
	cJSON_AddStringToObject(item, "type", "object");
	add_fields(item, f, n);
}

void string_enum(cJSON *props, const char *name, const char *(*name_of)(int), int from, int to)
{
	cJSON *e = cJSON_AddArrayToObject(cJSON_GetObjectItemCaseSensitive(props, name), "enum");
	for (int i = from; i < to; i++)
		cJSON_AddItemToArray(e, cJSON_CreateString(name_of(i)));
}
