/* The zygote's configuration message (config.h). */
#include "config.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

char *zconfig_encode(const struct zconfig *c)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddStringToObject(j, "skill_text", c->skill_text);
	cJSON_AddStringToObject(j, "skill_source", c->skill_source);
	/* Only an approved project policy goes to the zygote uncut; without
	 * this field the zygote applies the ceiling itself. */
	if (c->approved)
		cJSON_AddBoolToObject(j, "approved", 1);
	cJSON_AddStringToObject(j, "root", c->root);
	cJSON_AddStringToObject(j, "workspace", c->workspace);
	cJSON_AddStringToObject(j, "workspace_display", c->workspace_display);
	if (c->venv)
		cJSON_AddStringToObject(j, "venv", c->venv);
	if (c->venv_pth_off)
		cJSON_AddBoolToObject(j, "venv_pth_off", 1);
	if (c->venv_withheld)
		cJSON_AddBoolToObject(j, "venv_withheld", 1);
	if (c->timeout_s > 0)
		cJSON_AddNumberToObject(j, "timeout_s", c->timeout_s);
	if (c->memory_mb > 0)
		cJSON_AddNumberToObject(j, "memory_mb", (double)c->memory_mb);
	if (c->log_level >= 0)
		cJSON_AddNumberToObject(j, "log_level", c->log_level);
	if (c->check)
		cJSON_AddBoolToObject(j, "check", 1);
	if (c->no_memfd)
		cJSON_AddBoolToObject(j, "no_memfd", 1);
	if (c->stay_readable)
		cJSON_AddBoolToObject(j, "stay_readable", 1);
	if (c->scratch)
		cJSON_AddStringToObject(j, "scratch", c->scratch);
	char *txt = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return txt;
}

static const char *str(const cJSON *j, const char *key)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, key));
}

int zconfig_decode(const void *data, size_t len, struct zconfig *c)
{
	memset(c, 0, sizeof *c);
	c->log_level = -1;
	cJSON *j = cJSON_ParseWithLength(data, len);
	if (!j)
		return -1;
	c->decoded = j;
	c->skill_text = str(j, "skill_text");
	c->skill_source = str(j, "skill_source");
	c->root = str(j, "root");
	c->workspace = str(j, "workspace");
	c->workspace_display = str(j, "workspace_display");
	c->venv = str(j, "venv");
	c->scratch = str(j, "scratch");
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "timeout_s");
	const cJSON *mem = cJSON_GetObjectItemCaseSensitive(j, "memory_mb");
	const cJSON *lvl = cJSON_GetObjectItemCaseSensitive(j, "log_level");
	c->timeout_s = cJSON_IsNumber(t) ? t->valuedouble : -1;
	c->memory_mb = cJSON_IsNumber(mem) ? (long)mem->valuedouble : -1;
	c->log_level = cJSON_IsNumber(lvl) ? lvl->valueint : -1;
	c->approved = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "approved"));
	c->check = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "check"));
	c->venv_pth_off = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "venv_pth_off"));
	c->venv_withheld = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "venv_withheld"));
	c->no_memfd = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "no_memfd"));
	c->stay_readable = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "stay_readable"));
	if (!c->skill_text || !c->skill_source || !c->root || !c->workspace || !c->workspace_display) {
		zconfig_free(c);
		return -1;
	}
	return 0;
}

void zconfig_free(struct zconfig *c)
{
	cJSON_Delete(c->decoded);
	memset(c, 0, sizeof *c);
}
