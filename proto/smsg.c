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
