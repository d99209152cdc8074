/* The messages of a session's link (smsg.h). */
#include "smsg.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "private.h"

/* ------------------------------------------------------------ W_HELLO */

char *smsg_hello_encode(const struct smsg_hello *m)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "pid", m->pid);
	if (m->resumed)
		cJSON_AddBoolToObject(j, "resumed", 1);
	return penc_print(j);
}

/* ------------------------------------------------------------ W_CHECKPOINT */

char *smsg_checkpoint_encode(const struct smsg_checkpoint *m)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "pid", m->pid);
	return penc_print(j);
}

int smsg_checkpoint_decode(const void *data, size_t len, struct smsg_checkpoint *m, struct err *e)
{
	struct pdec d;
	long long pid = 0;
	m->pid = 0;
	if (pdec_begin(&d, "W_CHECKPOINT", data, len, e) < 0)
		return d.rc;
	pdec_int(&d, "pid", PF_REQ, -1, PROTO_PID_MAX, &pid);
	m->pid = (pid_t)pid;
	return pdec_end(&d, NULL);
}

/* ------------------------------------------------------------ W_FORK */

char *smsg_fork_encode(const struct smsg_fork *m)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "name", m->name);
	return penc_print(j);
}

int smsg_fork_decode(const void *data, size_t len, struct smsg_fork *m, struct err *e)
{
	struct pdec d;
	m->name[0] = '\0';
	if (pdec_begin(&d, "W_FORK", data, len, e) < 0)
		return d.rc;
	if (pdec_name(&d, "name", PF_REQ, m->name, sizeof m->name) && !m->name[0])
		pdec_fail(&d, "name", "is empty");
	return pdec_end(&d, NULL);
}

/* ------------------------------------------------------------ W_FORKED */

char *smsg_forked_encode(const struct smsg_forked *m)
{
	cJSON *j = cJSON_CreateObject();
	if (m->pid > 0)
		cJSON_AddNumberToObject(j, "pid", m->pid);
	if (m->error[0])
		cJSON_AddStringToObject(j, "error", m->error);
	return penc_print(j);
}

int smsg_forked_decode(const void *data, size_t len, struct smsg_forked *m, struct err *e)
{
	struct pdec d;
	long long pid = 0;
	const char *why = NULL;
	*m = (struct smsg_forked){ 0 };
	if (pdec_begin(&d, "W_FORKED", data, len, e) < 0)
		return d.rc;
	pdec_int(&d, "pid", PF_OPT, 1, PROTO_PID_MAX, &pid);
	if (pdec_text(&d, "error", PF_OPT, sizeof m->error - 1, false, &why))
		snprintf(m->error, sizeof m->error, "%s", why);
	m->pid = (pid_t)pid;
	return pdec_end(&d, NULL);
}

/* ------------------------------------------------------------ W_EXEC */

char *smsg_exec_encode(const struct smsg_exec *m)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "op", "exec");
	cJSON_AddStringToObject(j, "code", m->code ? m->code : "");
	cJSON_AddNumberToObject(j, "cell", m->cell);
	if (m->restore) {
		cJSON_AddNumberToObject(j, "restore", (double)m->restore);
		cJSON_AddNumberToObject(j, "restore_format", m->restore_format);
		if (m->restore_direct)
			cJSON_AddBoolToObject(j, "restore_direct", true);
	}
	if (m->no_self_view)
		cJSON_AddBoolToObject(j, "no_self_view", true);
	return penc_print(j);
}

int smsg_exec_decode(const void *data, size_t len, struct smsg_exec *m, struct err *e)
{
	struct pdec d;
	long long cell = 0, restore = 0, format = 1;
	const char *op = NULL;
	*m = (struct smsg_exec){ .code = "", .restore_format = 1 };
	if (pdec_begin(&d, "W_EXEC", data, len, e) < 0)
		return d.rc;
	if (pdec_str(&d, "op", PF_REQ, 16, &op) && strcmp(op, "exec") != 0)
		pdec_fail(&d, "op", "is not \"exec\"");
	pdec_str(&d, "code", PF_REQ, WIRE_MAX_PAYLOAD, &m->code);
	pdec_int(&d, "cell", PF_REQ, 1, INT_MAX, &cell);
	pdec_int(&d, "restore", PF_OPT, 0, 9007199254740991LL, &restore);
	pdec_int(&d, "restore_format", PF_OPT, 1, 255, &format);
	pdec_bool(&d, "restore_direct", PF_OPT, &m->restore_direct);
	pdec_bool(&d, "no_self_view", PF_OPT, &m->no_self_view);
	m->cell = (int)cell;
	m->restore = (unsigned long long)restore;
	m->restore_format = (int)format;
	if (pdec_end(&d, &m->decoded) < 0) {
		m->code = "";
		return d.rc;
	}
	return 0;
}

void smsg_exec_free(struct smsg_exec *m)
{
	cJSON_Delete(m->decoded);
	*m = (struct smsg_exec){ .code = "", .restore_format = 1 };
}

/* ------------------------------------------------------------ W_TAKE_CHECKPOINT */

char *smsg_take_checkpoint_encode(const struct smsg_take_checkpoint *m)
{
	cJSON *j = cJSON_CreateObject();
	if (m->save)
		cJSON_AddBoolToObject(j, "save", 1);
	if (m->save && m->known && *m->known)
		cJSON_AddStringToObject(j, "known", m->known);
	return penc_print(j);
}

int smsg_take_checkpoint_decode(const void *data, size_t len, struct smsg_take_checkpoint *m, struct err *e)
{
	struct pdec d;
	*m = (struct smsg_take_checkpoint){ .known = "" };
	if (pdec_begin(&d, "W_TAKE_CHECKPOINT", data, len, e) < 0)
		return d.rc;
	pdec_bool(&d, "save", PF_OPT, &m->save);
	pdec_str(&d, "known", PF_OPT, SMSG_KNOWN_MAX, &m->known);
	int r = pdec_end(&d, &m->decoded);
	if (r == 0 && strspn(m->known, "0123456789abcdef") != strlen(m->known))
		r = err_set(e, -EPROTO, "W_TAKE_CHECKPOINT: known is not hexadecimal");
	if (r == 0 && strlen(m->known) % 32 != 0)
		r = err_set(e, -EPROTO, "W_TAKE_CHECKPOINT: known is not whole labels of 32 hex digits");
	if (r < 0)
		smsg_take_checkpoint_free(m);
	return r;
}

void smsg_take_checkpoint_free(struct smsg_take_checkpoint *m)
{
	cJSON_Delete(m->decoded);
	*m = (struct smsg_take_checkpoint){ .known = "" };
}

/* ------------------------------------------------------------ W_THUMB */

char *smsg_thumb_encode(const struct smsg_thumb *m)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "op", "thumb");
	cJSON_AddStringToObject(j, "path", m->path ? m->path : "");
	cJSON_AddNumberToObject(j, "max_bytes", (double)m->max_bytes);
	return penc_print(j);
}

int smsg_thumb_decode(const void *data, size_t len, struct smsg_thumb *m, struct err *e)
{
	struct pdec d;
	long long max = 0;
	const char *op = NULL;
	*m = (struct smsg_thumb){ .path = "" };
	if (pdec_begin(&d, "W_THUMB", data, len, e) < 0)
		return d.rc;
	if (pdec_str(&d, "op", PF_REQ, 16, &op) && strcmp(op, "thumb") != 0)
		pdec_fail(&d, "op", "is not \"thumb\"");
	if (pdec_str(&d, "path", PF_REQ, 8192, &m->path) && m->path[0] != '/')
		pdec_fail(&d, "path", "is not an absolute path");
	pdec_int(&d, "max_bytes", PF_REQ, 1, WIRE_MAX_PAYLOAD, &max);
	m->max_bytes = (long)max;
	if (pdec_end(&d, &m->decoded) < 0) {
		m->path = "";
		return d.rc;
	}
	return 0;
}

void smsg_thumb_free(struct smsg_thumb *m)
{
	cJSON_Delete(m->decoded);
	*m = (struct smsg_thumb){ .path = "" };
}
