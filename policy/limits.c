/* The schema's limits: section: each limit's key, type, range and unit in
 * one table (lim_specs), its parse, and the command line's flags that may
 * only tighten them (policy_tighten).  The ranges are the decisions listed
 * at the top of policy.c. */
#include "private.h"

#include "../common/escape.h"
#include "../common/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum lim_type { LIM_NUM, LIM_INT, LIM_BOOL };

struct lim_spec {
	const char *key;
	enum lim_type type;
	double min, max;
	const char *unit;
	size_t off; /* where in struct policy_limits: a double (LIM_NUM), long
		     * (LIM_INT) or bool (LIM_BOOL) */
};

/* Each limit by name: lim_specs[LIM_MEMORY_MB], never a position. */
enum lim_id {
	LIM_TIMEOUT_S,
	LIM_MAX_TIMEOUT_S,
	LIM_MEMORY_MB,
	LIM_MAX_OUTPUT_CHARS,
	LIM_MAX_PROCESSES,
	LIM_MAX_FILE_MB,
	LIM_MAX_SESSIONS,
	LIM_MAX_WORKSPACE_MB,
	LIM_CHECKPOINT,
	LIM_SEED,
	LIM_PERSIST,
	LIM_PERSIST_MB,
	LIM_COUNT
};

#define LIM(id, key, type, min, max, unit) \
	[id] = { #key, type, min, max, unit, offsetof(struct policy_limits, key) }

/* The ranges are the decisions listed at the top of policy.c.  The upper
 * bounds keep every later conversion (to bytes, to milliseconds, to an
 * rlimit) far from overflow; a timeout under 1 ms would round to 0, which
 * timer APIs (alarm, setitimer) read as "no timeout at all". */
static const struct lim_spec lim_specs[LIM_COUNT] = {
	LIM(LIM_TIMEOUT_S, timeout_s, LIM_NUM, 0.001, 86400, "seconds"),
	LIM(LIM_MAX_TIMEOUT_S, max_timeout_s, LIM_NUM, 0.001, 86400, "seconds"),
	LIM(LIM_MEMORY_MB, memory_mb, LIM_INT, 64, 1048576, "megabytes; the interpreter needs at least 64"),
	LIM(LIM_MAX_OUTPUT_CHARS, max_output_chars, LIM_INT, 200, 10000000, "characters per stream"),
	LIM(LIM_MAX_PROCESSES, max_processes, LIM_INT, 4, 65536,
	    "processes and threads; the interpreter and numpy start several threads"),
	LIM(LIM_MAX_FILE_MB, max_file_mb, LIM_INT, 1, 1048576, "megabytes per file"),
	LIM(LIM_MAX_SESSIONS, max_sessions, LIM_INT, 1, 256, "sessions"),
	LIM(LIM_MAX_WORKSPACE_MB, max_workspace_mb, LIM_INT, 1, 1073741824, "megabytes of disk the workspace may take"),
	LIM(LIM_CHECKPOINT, checkpoint, LIM_BOOL, 0, 0, NULL),
	LIM(LIM_SEED, seed, LIM_INT, 0, 4294967295.0, "a 32-bit seed"),
	LIM(LIM_PERSIST, persist, LIM_BOOL, 0, 0, NULL),
	LIM(LIM_PERSIST_MB, persist_mb, LIM_INT, 1, 1048576, "megabytes per saved session"),
};
#define N_LIMS LIM_COUNT
#define LIM_KEYS "timeout_s, max_timeout_s, memory_mb, max_output_chars, max_processes, " \
		 "max_file_mb, max_sessions, max_workspace_mb, checkpoint, seed, persist, persist_mb"

bool limits_known(const struct ynode *k)
{
	for (size_t s = 0; s < N_LIMS; s++)
		if (fm_eq(k, lim_specs[s].key))
			return true;
	return false;
}

static int want_limit(const struct pctx *c, const struct ynode *n, const struct lim_spec *s,
		      double *num, long long *ll, bool *b)
{
	char key[64], buf[SHOW_MAX * 4 + 40];
	snprintf(key, sizeof key, "limits.%s", s->key);

	if (s->type == LIM_BOOL)
		return fm_want_bool(c, n, key, b);
	if (n->tagged)
		return fm_tag_error(c, n, key);
	if (n->kind == Y_SCALAR && n->plain) {
		if (s->type == LIM_INT && fm_int_text(n->s, n->len)) {
			const char *bad = NULL;
			*ll = strtonum(n->s, (long long)s->min, (long long)s->max, &bad);
			if (!bad)
				return 0;
		} else if (s->type == LIM_NUM && fm_float_text(n->s, n->len)) {
			*num = strtod(n->s, NULL);
			if (isfinite(*num) && *num >= s->min && *num <= s->max)
				return 0;
		}
	}
	if (n->kind == Y_SCALAR && !n->plain && (fm_int_text(n->s, n->len) || fm_float_text(n->s, n->len)))
		return fm_err(c, n->line, key,
			    "expected %s from %.15g to %.15g (%s), got %s; write the number without quotes",
			    s->type == LIM_INT ? "an integer" : "a number", s->min, s->max, s->unit,
			    fm_show(n, buf, sizeof buf));
	return fm_err(c, n->line, key, "expected %s from %.15g to %.15g (%s), got %s",
		    s->type == LIM_INT ? "an integer" : "a number", s->min, s->max, s->unit,
		    fm_show(n, buf, sizeof buf));
}

int limits_parse(const struct pctx *c, const struct ynode *m, struct policy *p)
{
	char key[256];
	unsigned line[N_LIMS] = { 0 };
	struct policy_limits *L = &p->limits;
	int rc = fm_want_mapping(c, m, "limits", LIM_KEYS);
	if (rc < 0)
		return rc;

	for (size_t i = 0; i < m->n; i += 2) {
		const struct ynode *k = m->kids[i], *v = m->kids[i + 1];
		double num = 0;
		long long ll = 0;
		bool b = false;
		size_t s;

		rc = fm_mapping_key(c, m, i, "limits", key, sizeof key);
		if (rc < 0)
			return rc;
		for (s = 0; s < N_LIMS; s++)
			if (fm_eq(k, lim_specs[s].key))
				break;
		if (s == N_LIMS)
			return fm_err(c, k->line, key, "unknown key; accepted keys: " LIM_KEYS);
		rc = want_limit(c, v, &lim_specs[s], &num, &ll, &b);
		if (rc < 0)
			return rc;
		line[s] = v->line;
		char *field = (char *)L + lim_specs[s].off;
		switch (lim_specs[s].type) {
		case LIM_NUM: *(double *)(void *)field = num; break;
		case LIM_INT: *(long *)(void *)field = (long)ll; break;
		case LIM_BOOL: *(bool *)field = b; break;
		}
	}
	if (L->timeout_s > L->max_timeout_s) {
		if (line[LIM_TIMEOUT_S])
			return fm_err(c, line[LIM_TIMEOUT_S], "limits.timeout_s",
				    "%g exceeds limits.max_timeout_s (%g%s); lower timeout_s or raise max_timeout_s",
				    L->timeout_s, L->max_timeout_s, line[LIM_MAX_TIMEOUT_S] ? "" : ", the default");
		return fm_err(c, line[LIM_MAX_TIMEOUT_S], "limits.max_timeout_s",
			    "%g is below limits.timeout_s (%g, the default); set timeout_s too or raise max_timeout_s",
			    L->max_timeout_s, L->timeout_s);
	}
	return 0;
}

int policy_tighten(struct policy *p, double timeout_s, long memory_mb, struct err *e)
{
	/* Validate both before changing either. "!(x < 0)" treats NaN as
	 * given, so it is refused rather than ignored. */
	bool t_given = !(timeout_s < 0), m_given = memory_mb >= 0;

	if (!p)
		return err_set(e, -EINVAL, "policy_tighten: no policy");
	if (t_given) {
		if (!isfinite(timeout_s) || timeout_s < lim_specs[LIM_TIMEOUT_S].min)
			return err_set(e, -EINVAL,
				       "--timeout %g: expected a number of seconds from 0.001 to %g",
				       timeout_s, p->limits.timeout_s);
		if (timeout_s > p->limits.timeout_s)
			return err_set(e, -EINVAL,
				       "--timeout %g exceeds the policy's timeout_s (%g); flags can only tighten",
				       timeout_s, p->limits.timeout_s);
	}
	if (m_given) {
		if (memory_mb < (long)lim_specs[LIM_MEMORY_MB].min)
			return err_set(e, -EINVAL,
				       "--memory %ld: expected megabytes from 64 to %ld; the interpreter needs at least 64",
				       memory_mb, p->limits.memory_mb);
		if (memory_mb > p->limits.memory_mb)
			return err_set(e, -EINVAL,
				       "--memory %ld exceeds the policy's memory_mb (%ld); flags can only tighten",
				       memory_mb, p->limits.memory_mb);
	}
	if (t_given) {
		p->limits.timeout_s = timeout_s;
		/* A flag tightens every execution, so a call's own timeout_s
		 * argument may not ask for more than the flag either. */
		if (p->limits.max_timeout_s > timeout_s)
			p->limits.max_timeout_s = timeout_s;
	}
	if (m_given)
		p->limits.memory_mb = memory_mb;
	return 0;
}
