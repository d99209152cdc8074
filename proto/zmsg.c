/* The messages of the zygote's link (zmsg.h): one encoder and one decoder
 * per type, the decoder being the check of what came (private.h). */
#include "zmsg.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"

/* The largest integer a JSON number (a double) holds exactly: a counter's
 * or a size's bound. */
#define EXACT_MAX 9007199254740991LL

/* ------------------------------------------------------------ W_SPAWN */

char *zmsg_spawn_encode(const struct zmsg_spawn *m)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "id", m->id);
	cJSON_AddStringToObject(j, "name", m->name);
	cJSON_AddNumberToObject(j, "seed", (double)m->seed);
	cJSON_AddBoolToObject(j, "checkpoint", m->checkpoint);
	cJSON_AddNumberToObject(j, "persist_cap", (double)m->persist_cap);
	return penc_print(j);
}

int zmsg_spawn_decode(const void *data, size_t len, struct zmsg_spawn *m, struct err *e)
{
	struct pdec d;
	long long id = 0, seed = 0, cap = 0;
	*m = (struct zmsg_spawn){ 0 };
	if (pdec_begin(&d, "W_SPAWN", data, len, e) < 0)
		return d.rc;
	pdec_int(&d, "id", PF_REQ, 1, INT_MAX, &id);
	if (pdec_name(&d, "name", PF_REQ, m->name, sizeof m->name) && !m->name[0])
		pdec_fail(&d, "name", "is empty");
	pdec_int(&d, "seed", PF_OPT, -EXACT_MAX, EXACT_MAX, &seed);
	pdec_bool(&d, "checkpoint", PF_OPT, &m->checkpoint);
	pdec_int(&d, "persist_cap", PF_OPT, 0, EXACT_MAX, &cap);
	m->id = (int)id;
	m->seed = seed;
	m->persist_cap = (unsigned long long)cap;
	return pdec_end(&d, NULL);
}

/* ------------------------------------------------------------ W_SPAWNED */

char *zmsg_spawned_encode(const struct zmsg_spawned *m)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "id", m->id);
	cJSON_AddNumberToObject(j, "pid", m->pid);
	if (m->error[0])
		cJSON_AddStringToObject(j, "error", m->error);
	return penc_print(j);
}

int zmsg_spawned_decode(const void *data, size_t len, struct zmsg_spawned *m, struct err *e)
{
	struct pdec d;
	long long id = 0, pid = 0;
	const char *why = NULL;
	*m = (struct zmsg_spawned){ 0 };
	if (pdec_begin(&d, "W_SPAWNED", data, len, e) < 0)
		return d.rc;
	pdec_int(&d, "id", PF_REQ, 1, INT_MAX, &id);
	pdec_int(&d, "pid", PF_REQ, -1, PROTO_PID_MAX, &pid);
	if (pdec_text(&d, "error", PF_OPT, sizeof m->error - 1, false, &why))
		snprintf(m->error, sizeof m->error, "%s", why);
	m->id = (int)id;
	m->pid = (pid_t)pid;
	return pdec_end(&d, NULL);
}

/* ------------------------------------------------------------ W_EXITED */

char *zmsg_exited_encode(const struct zmsg_exited *m)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "pid", m->pid);
	if (m->status_known)
		cJSON_AddNumberToObject(j, "status", m->status);
	cJSON_AddNumberToObject(j, "epoch", (double)m->epoch);
	return penc_print(j);
}

int zmsg_exited_decode(const void *data, size_t len, struct zmsg_exited *m, struct err *e)
{
	struct pdec d;
	long long pid = 0, status = 0, epoch = 0;
	*m = (struct zmsg_exited){ 0 };
	if (pdec_begin(&d, "W_EXITED", data, len, e) < 0)
		return d.rc;
	pdec_int(&d, "pid", PF_REQ, 1, PROTO_PID_MAX, &pid);
	m->status_known = pdec_int(&d, "status", PF_OPT, 0, 65535, &status);
	pdec_int(&d, "epoch", PF_REQ, 0, EXACT_MAX, &epoch);
	m->pid = (pid_t)pid;
	m->status = (int)status;
	m->epoch = (unsigned long long)epoch;
	return pdec_end(&d, NULL);
}

/* ------------------------------------------------------------ W_SWEEP */

char *zmsg_sweep_encode(const struct zmsg_sweep *m)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "epoch", (double)m->epoch);
	cJSON_AddNumberToObject(j, "born_by", (double)m->born_by);
	penc_pids(j, "keep", m->keep, m->n_keep);
	return penc_print(j);
}

int zmsg_sweep_decode(const void *data, size_t len, struct zmsg_sweep *m, struct err *e)
{
	struct pdec d;
	long long epoch = 0, born_by = 0;
	m->epoch = m->born_by = 0;
	m->n_keep = 0;
	if (pdec_begin(&d, "W_SWEEP", data, len, e) < 0)
		return d.rc;
	pdec_int(&d, "epoch", PF_REQ, 0, EXACT_MAX, &epoch);
	pdec_int(&d, "born_by", PF_REQ, 0, EXACT_MAX, &born_by);
	pdec_pids(&d, "keep", PF_REQ, m->keep, ZMSG_PIDS_MAX, &m->n_keep);
	m->epoch = (unsigned long long)epoch;
	m->born_by = (unsigned long long)born_by;
	return pdec_end(&d, NULL);
}

/* ------------------------------------------------------------ W_SETTLE */

char *zmsg_settle_encode(const struct zmsg_settle *m)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "pid", m->pid);
	cJSON_AddNumberToObject(j, "keep", m->keep);
	cJSON_AddNumberToObject(j, "epoch", (double)m->epoch);
	cJSON_AddNumberToObject(j, "born_by", (double)m->born_by);
	if (m->has_all)
		penc_pids(j, "all", m->all, m->n_all);
	return penc_print(j);
}

int zmsg_settle_decode(const void *data, size_t len, struct zmsg_settle *m, struct err *e)
{
	struct pdec d;
	long long pid = 0, keep = 0, epoch = 0, born_by = 0;
	m->pid = m->keep = 0;
	m->epoch = m->born_by = 0;
	m->has_all = false;
	m->n_all = 0;
	if (pdec_begin(&d, "W_SETTLE", data, len, e) < 0)
		return d.rc;
	pdec_int(&d, "pid", PF_REQ, 1, PROTO_PID_MAX, &pid);
	pdec_int(&d, "keep", PF_REQ, 0, PROTO_PID_MAX, &keep);
	pdec_int(&d, "epoch", PF_REQ, 0, EXACT_MAX, &epoch);
	pdec_int(&d, "born_by", PF_REQ, 0, EXACT_MAX, &born_by);
	m->has_all = pdec_pids(&d, "all", PF_OPT, m->all, ZMSG_PIDS_MAX, &m->n_all);
	m->pid = (pid_t)pid;
	m->keep = (pid_t)keep;
	m->epoch = (unsigned long long)epoch;
	m->born_by = (unsigned long long)born_by;
	return pdec_end(&d, NULL);
}

/* ------------------------------------------------------------ W_SETTLED */

char *zmsg_settled_encode(const struct zmsg_settled *m)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "pid", m->pid);
	cJSON_AddNumberToObject(j, "ended", m->ended);
	return penc_print(j);
}

int zmsg_settled_decode(const void *data, size_t len, struct zmsg_settled *m, struct err *e)
{
	struct pdec d;
	long long pid = 0, ended = 0;
	*m = (struct zmsg_settled){ 0 };
	if (pdec_begin(&d, "W_SETTLED", data, len, e) < 0)
		return d.rc;
	pdec_int(&d, "pid", PF_REQ, 0, PROTO_PID_MAX, &pid);
	pdec_int(&d, "ended", PF_OPT, 0, INT_MAX, &ended);
	m->pid = (pid_t)pid;
	m->ended = (int)ended;
	return pdec_end(&d, NULL);
}

/* ------------------------------------------------------------ W_JAIL */

char *zmsg_jail_encode(const struct zmsg_jail *m)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "jail", m->report ? m->report : "");
	cJSON_AddBoolToObject(j, "enforceable", m->enforceable);
	cJSON_AddBoolToObject(j, "nsfree", m->nsfree);
	cJSON_AddStringToObject(j, "why", m->why ? m->why : "");
	return penc_print(j);
}

/* Sizes: the report is a few kB (the layers, the remedy); the verdict's
 * reason one line. */
int zmsg_jail_decode(const void *data, size_t len, struct zmsg_jail *m, struct err *e)
{
	struct pdec d;
	*m = (struct zmsg_jail){ .why = "", .report = "" };
	if (pdec_begin(&d, "W_JAIL", data, len, e) < 0)
		return d.rc;
	pdec_bool(&d, "enforceable", PF_REQ, &m->enforceable);
	pdec_bool(&d, "nsfree", PF_OPT, &m->nsfree);
	pdec_text(&d, "why", PF_OPT, 512, false, &m->why);
	pdec_text(&d, "jail", PF_OPT, 16384, true, &m->report);
	if (pdec_end(&d, &m->decoded) < 0) {
		m->why = m->report = "";
		return d.rc;
	}
	return 0;
}

void zmsg_jail_free(struct zmsg_jail *m)
{
	cJSON_Delete(m->decoded);
	*m = (struct zmsg_jail){ .why = "", .report = "" };
}

/* ------------------------------------------------------------ W_READY */

char *zmsg_ready_encode(const struct zmsg_ready *m)
{
	cJSON *j = cJSON_CreateObject();
	if (m->start_ms >= 0)
		cJSON_AddNumberToObject(j, "start_ms", m->start_ms);
	return penc_print(j);
}

int zmsg_ready_decode(const void *data, size_t len, struct zmsg_ready *m, struct err *e)
{
	struct pdec d;
	*m = (struct zmsg_ready){ .start_ms = -1 };
	if (pdec_begin(&d, "W_READY", data, len, e) < 0)
		return d.rc;
	pdec_num(&d, "start_ms", PF_OPT, 0, 1e9, &m->start_ms);
	return pdec_end(&d, NULL);
}

/* ------------------------------------------------------------ W_FATAL */

char *zmsg_fatal_encode(const struct zmsg_fatal *m)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "message", m->message ? m->message : "");
	return penc_print(j);
}

int zmsg_fatal_decode(const void *data, size_t len, struct zmsg_fatal *m, struct err *e)
{
	struct pdec d;
	*m = (struct zmsg_fatal){ .message = "unknown error" };
	if (pdec_begin(&d, "W_FATAL", data, len, e) < 0)
		return d.rc;
	if (pdec_text(&d, "message", PF_OPT, 1024, false, &m->message) && !m->message[0])
		m->message = "unknown error";
	if (pdec_end(&d, &m->decoded) < 0) {
		m->message = "unknown error";
		return d.rc;
	}
	return 0;
}

void zmsg_fatal_free(struct zmsg_fatal *m)
{
	cJSON_Delete(m->decoded);
	*m = (struct zmsg_fatal){ .message = "unknown error" };
}

/* ------------------------------------------------------------ W_WARMED */

char *zmsg_warmed_encode(const struct zmsg_warmed *m)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "name", m->name);
	cJSON_AddBoolToObject(j, "ok", m->ok);
	if (m->why)
		cJSON_AddStringToObject(j, "why", m->why);
	if (m->ms >= 0)
		cJSON_AddNumberToObject(j, "ms", m->ms);
	if (m->steps >= 0)
		cJSON_AddNumberToObject(j, "steps", (double)m->steps);
	if (m->longest_ms >= 0)
		cJSON_AddNumberToObject(j, "longest_ms", m->longest_ms);
	return penc_print(j);
}

int zmsg_warmed_decode(const void *data, size_t len, struct zmsg_warmed *m, struct err *e)
{
	struct pdec d;
	long long steps = -1;
	*m = (struct zmsg_warmed){ .ms = -1, .steps = -1, .longest_ms = -1 };
	if (pdec_begin(&d, "W_WARMED", data, len, e) < 0)
		return d.rc;
	if (pdec_name(&d, "name", PF_REQ, m->name, sizeof m->name) && !m->name[0])
		pdec_fail(&d, "name", "is empty");
	pdec_bool(&d, "ok", PF_REQ, &m->ok);
	pdec_text(&d, "why", PF_OPT, 300, false, &m->why);
	pdec_num(&d, "ms", PF_OPT, 0, 1e12, &m->ms);
	pdec_int(&d, "steps", PF_OPT, 0, INT_MAX, &steps);
	pdec_num(&d, "longest_ms", PF_OPT, 0, 1e12, &m->longest_ms);
	m->steps = (long)steps;
	if (pdec_end(&d, &m->decoded) < 0) {
		m->why = NULL;
		return d.rc;
	}
	return 0;
}

void zmsg_warmed_free(struct zmsg_warmed *m)
{
	cJSON_Delete(m->decoded);
	m->decoded = NULL;
	m->why = NULL;
}

/* ------------------------------------------------------------ W_WARM */

char *zmsg_warm_encode(const struct zmsg_warm *m)
{
	cJSON *j = cJSON_CreateObject();
	if (m->n_names) {
		cJSON *names = cJSON_AddArrayToObject(j, "names");
		for (size_t i = 0; i < m->n_names; i++)
			cJSON_AddItemToArray(names, cJSON_CreateString(m->names[i]));
	}
	if (m->has_pause)
		cJSON_AddBoolToObject(j, "pause", m->pause);
	return penc_print(j);
}

int zmsg_warm_decode(const void *data, size_t len, struct zmsg_warm *m, struct err *e)
{
	struct pdec d;
	m->n_names = 0;
	m->has_pause = m->pause = false;
	if (pdec_begin(&d, "W_WARM", data, len, e) < 0)
		return d.rc;
	const cJSON *names = cJSON_GetObjectItemCaseSensitive(d.j, "names");
	char kind[64];
	if (names && !cJSON_IsNull(names) && !cJSON_IsArray(names))
		pdec_fail(&d, "names", "is not a list (it is %s)", pdec_kind(names, kind, sizeof kind));
	const cJSON *list = cJSON_IsArray(names) ? names : NULL, *it;
	cJSON_ArrayForEach(it, list)
	{
		const char *s = cJSON_GetStringValue(it);
		size_t n = s ? strlen(s) : 0;
		if (!n || n > ZMSG_MODULE_MAX || m->n_names == ZMSG_WARM_NAMES) {
			pdec_fail(&d, "names", "holds more than %d names, or one that is not a name of 1 to %d bytes",
				  ZMSG_WARM_NAMES, ZMSG_MODULE_MAX);
			break;
		}
		memcpy(m->names[m->n_names++], s, n + 1);
	}
	m->has_pause = pdec_bool(&d, "pause", PF_OPT, &m->pause);
	int rc = pdec_end(&d, NULL);
	if (rc < 0)
		m->n_names = 0;
	return rc;
}
