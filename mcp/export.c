/* A session's history as a notebook or a script (export.h). */
#include "export.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/util.h"
#include "exec.h"

static const char *str_of(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const char *str_or(const cJSON *o, const char *k, const char *dflt)
{
	const char *s = str_of(o, k);
	return s && *s ? s : dflt;
}

/* A Python string literal of s (a JSON string is one). */
static char *py_literal(const char *s)
{
	cJSON *j = cJSON_CreateString(s);
	char *t = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return t ? t : xstrdup("''");
}

/* What an export writes, as a notebook or a script: one cell at a time,
 * so that the memory it takes is one cell's whatever the history's length. */
struct out {
	FILE *f;
	bool py;
	size_t n_cells;
};

static void emit_cell(struct out *o, cJSON *cell)
{
	if (o->py) {
		const char *type = str_of(cell, "cell_type");
		const char *src = str_of(cell, "source");
		const cJSON *tags = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cell, "metadata"), "tags");
		if (strcmp(type, "markdown") == 0) {
			fputs("# %% [markdown]\n", o->f);
			for (const char *p = src; *p;) {
				size_t l = strcspn(p, "\n");
				fprintf(o->f, "# %.*s\n", (int)l, p);
				p += l + (p[l] == '\n');
			}
		} else {
			char *t = tags ? cJSON_PrintUnformatted(tags) : NULL;
			fprintf(o->f, "# %%%%%s%s\n", t ? " tags=" : "", t ? t : "");
			free(t);
			fputs(src, o->f);
			if (*src && src[strlen(src) - 1] != '\n')
				fputc('\n', o->f);
		}
		fputc('\n', o->f);
	} else {
		char *t = cJSON_Print(cell);
		fprintf(o->f, "%s\n  %s", o->n_cells ? "," : "", t);
		free(t);
	}
	o->n_cells++;
	cJSON_Delete(cell);
}

static cJSON *markdown(const char *id, const char *text)
{
	cJSON *c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "cell_type", "markdown");
	cJSON_AddStringToObject(c, "id", id);
	cJSON_AddObjectToObject(c, "metadata");
	cJSON_AddStringToObject(c, "source", text);
	return c;
}

static cJSON *code_cell(const char *id, const char *src, int count)
{
	cJSON *c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "cell_type", "code");
	cJSON_AddStringToObject(c, "id", id);
	if (count > 0)
		cJSON_AddNumberToObject(c, "execution_count", count);
	else
		cJSON_AddNullToObject(c, "execution_count");
	cJSON_AddObjectToObject(c, "metadata");
	cJSON_AddStringToObject(c, "source", src);
	cJSON_AddArrayToObject(c, "outputs");
	return c;
}

static void header(struct out *o, const cJSON *start, const char *session, const struct hist_lineage *l)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(start, "versions");
	const cJSON *seed = cJSON_GetObjectItemCaseSensitive(start, "seed");
	size_t kept = 0, rolled = 0;
	for (size_t i = 0; i < l->n; i++) {
		kept += l->v[i].kind == HK_CELL;
		rolled += l->v[i].kind == HK_ROLLED_BACK;
	}
	char *t = xasprintf("# Session `%s` of %s\n\n"
			    "The server's record of this session (python-sandbox-mcp %s export): the %zu cells whose effect is in "
			    "the session's state, in order, with the outputs the agent was shown%s. Run it top to bottom with the "
			    "working directory at the project: the first code cell sets up what the session had when it started.\n\n"
			    "- project: `%s`\n- session: `%s`\n- policy: `%s` (sha256 `%s`)\n- seed: %d (`random` and `numpy.random`)\n"
			    "- Python %s, numpy %s, pandas %s, matplotlib %s%s%s",
			    session, str_or(start, "root", "?"), PSM_VERSION, kept,
			    rolled ? "; the calls that were rolled back are named where they ran" : "", str_or(start, "root", "?"), session,
			    str_or(start, "policy", "?"), str_or(start, "policy_sha256", "?"), cJSON_IsNumber(seed) ? seed->valueint : 0,
			    str_or(v, "python", "?"), str_or(v, "numpy", "not found"), str_or(v, "pandas", "not found"),
			    str_or(v, "matplotlib", "not found"),
			    l->full ? "\n\n**The history is incomplete**: it reached its size limit, and the calls after the last cell here were not recorded." : "",
			    l->bad ? "\n\n**Some records could not be read** and are left out." : "");
	emit_cell(o, markdown("header", t));
	free(t);
	const char *root = str_or(start, "root", ".");
	char *lit = py_literal(root);
	/* np, pd and plt: a session has them bound before its first cell, so
	 * the agent's cells use them without importing; a plain kernel must
	 * get them here or the first such cell raises NameError. */
	t = xasprintf("# What the session had when it started: the project as working directory\n"
		      "# (set PSM_ROOT to run this on a copy of it), matplotlib's Agg backend,\n"
		      "# random and numpy.random seeded, np, pd and plt bound.\n"
		      "import os\nimport random\n\nos.chdir(os.environ.get(\"PSM_ROOT\", %s))\n\nimport matplotlib\n\nmatplotlib.use(\"Agg\")\n"
		      "random.seed(%d)\ntry:\n    import numpy\n\n    numpy.random.seed(%d)\nexcept ImportError:\n    pass\n"
		      "import numpy as np\nimport pandas as pd\nimport matplotlib.pyplot as plt\n",
		      lit, cJSON_IsNumber(seed) ? seed->valueint : 0, cJSON_IsNumber(seed) ? seed->valueint : 0);
	free(lit);
	cJSON *c = code_cell("setup", t, 0);
	free(t);
	cJSON_AddBoolToObject(cJSON_AddObjectToObject(cJSON_GetObjectItemCaseSensitive(c, "metadata"), "psm"), "setup", 1);
	emit_cell(o, c);
}

static void stream(cJSON *outs, const char *name, const char *text)
{
	if (!text || !*text)
		return;
	cJSON *s = cJSON_CreateObject();
	cJSON_AddStringToObject(s, "output_type", "stream");
	cJSON_AddStringToObject(s, "name", name);
	cJSON_AddStringToObject(s, "text", text);
	cJSON_AddItemToArray(outs, s);
}

static void outputs(const struct history *h, const cJSON *r, cJSON *outs, int count)
{
	stream(outs, "stdout", str_of(r, "stdout"));
	stream(outs, "stderr", str_of(r, "stderr"));
	const cJSON *im;
	cJSON_ArrayForEach(im, cJSON_GetObjectItemCaseSensitive(r, "images"))
	{
		const char *sha = str_of(im, "sha256"), *mime = str_of(im, "mime");
		char *b64 = sha && mime ? history_image(h, sha) : NULL;
		if (!b64)
			continue;
		cJSON *d = cJSON_CreateObject();
		cJSON_AddStringToObject(d, "output_type", "display_data");
		cJSON_AddStringToObject(cJSON_AddObjectToObject(d, "data"), mime, b64);
		cJSON_AddObjectToObject(d, "metadata");
		cJSON_AddItemToArray(outs, d);
		free(b64);
	}
	const char *res = str_of(r, "result");
	if (res) {
		cJSON *d = cJSON_CreateObject();
		cJSON_AddStringToObject(d, "output_type", "execute_result");
		cJSON_AddNumberToObject(d, "execution_count", count);
		cJSON_AddStringToObject(cJSON_AddObjectToObject(d, "data"), "text/plain", res);
		cJSON_AddObjectToObject(d, "metadata");
		cJSON_AddItemToArray(outs, d);
	}
	const cJSON *err = cJSON_GetObjectItemCaseSensitive(r, "error");
	if (cJSON_IsObject(err)) {
		cJSON *d = cJSON_CreateObject();
		cJSON_AddStringToObject(d, "output_type", "error");
		cJSON_AddStringToObject(d, "ename", str_or(err, "type", "Error"));
		cJSON_AddStringToObject(d, "evalue", str_or(err, "message", ""));
		cJSON *tb = cJSON_AddArrayToObject(d, "traceback");
		const char *t = str_of(err, "traceback");
		for (const char *p = t ? t : ""; *p;) {
			size_t n = strcspn(p, "\n");
			char *line = xasprintf("%.*s", (int)n, p);
			cJSON_AddItemToArray(tb, cJSON_CreateString(line));
			free(line);
			p += n + (p[n] == '\n');
		}
		cJSON_AddItemToArray(outs, d);
	}
}

/* A cell whose effect is in the state. */
static void cell_of(struct out *o, const struct history *h, const cJSON *r)
{
	const cJSON *cn = cJSON_GetObjectItemCaseSensitive(r, "cell");
	int n = cJSON_IsNumber(cn) ? cn->valueint : 0;
	char id[32];
	snprintf(id, sizeof id, "cell-%d", n);
	cJSON *c = code_cell(id, str_or(r, "code", ""), n);
	cJSON *md = cJSON_GetObjectItemCaseSensitive(c, "metadata");
	const char *status = str_or(r, "status", "ok");
	if (strcmp(status, "ok") != 0) {
		/* A plain "run all" goes on past it, as the session did. */
		cJSON *tags = cJSON_AddArrayToObject(md, "tags");
		cJSON_AddItemToArray(tags, cJSON_CreateString("raises-exception"));
	}
	cJSON *files = cJSON_AddArrayToObject(md, "files");
	const cJSON *f;
	cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(r, "files"))
	{
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "path", str_or(f, "path", "?"));
		const char *sha = str_of(f, "sha256");
		if (sha)
			cJSON_AddStringToObject(e, "sha256", sha);
		else
			cJSON_AddNullToObject(e, "sha256");
		cJSON_AddItemToArray(files, e);
	}
	cJSON *psm = cJSON_AddObjectToObject(md, "psm");
	cJSON_AddNumberToObject(psm, "cell", n);
	cJSON_AddStringToObject(psm, "status", status);
	cJSON_AddStringToObject(psm, "state", str_or(r, "state", "kept"));
	cJSON_AddStringToObject(psm, "code_sha256", str_or(r, "code_sha256", ""));
	outputs(h, r, cJSON_GetObjectItemCaseSensitive(c, "outputs"), n);
	emit_cell(o, c);
}

static void rolled_back(struct out *o, const cJSON *r)
{
	const cJSON *cn = cJSON_GetObjectItemCaseSensitive(r, "cell");
	int n = cJSON_IsNumber(cn) ? cn->valueint : 0;
	const cJSON *err = cJSON_GetObjectItemCaseSensitive(r, "error");
	int nf = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "files"));
	char id[40], files[120] = "";
	snprintf(id, sizeof id, "rolled-back-%d", n);
	if (nf)
		snprintf(files, sizeof files, "; the %d file(s) it wrote stay in the workspace", nf);
	char kind[160] = "";
	if (cJSON_IsObject(err))
		snprintf(kind, sizeof kind, " (%.120s)", str_or(err, "type", "error"));
	char *t = xasprintf("*Cell %d ended as `%s`%s and was rolled back: its effect is not in the session's state, so its code is not here%s.*",
			    n, str_or(r, "status", "?"), kind, files);
	emit_cell(o, markdown(id, t));
	free(t);
}

static void lost(struct out *o, const struct hist_entry *e, size_t seq)
{
	char id[40];
	snprintf(id, sizeof id, "lost-%zu", seq);
	const char *how = strcmp(e->why, "new") == 0 ? "the session started anew (reset, or its process and saved state were lost)"
			  : strcmp(e->why, "restored") == 0 ? "the session was restored from its state saved before them"
							    : "this session started as a copy of its parent's state before them";
	if (strcmp(e->why, "unrecorded") == 0) {
		char *u = xasprintf("*Cells %d to %d ran before this history was kept: the session's state holds what they made, "
				    "but their code is not here, so this notebook does not rebuild it.*", e->cell, e->last);
		emit_cell(o, markdown(id, u));
		free(u);
		return;
	}
	char *t = strcmp(e->why, "new") == 0
		? xasprintf("*The cells recorded before are not in the session's state: at cell %d %s; they are left out.*", e->lost_at, how)
		: e->cell == e->last ? xasprintf("*Cell %d (an earlier one of that number) is not in the session's state: at this cell %s; it is left out.*",
						 e->cell, how)
				     : xasprintf("*Cells %d to %d (earlier ones of those numbers) are not in the session's state: at cell %d %s; they are left out.*",
						 e->cell, e->last, e->lost_at, how);
	emit_cell(o, markdown(id, t));
	free(t);
}

static char *list_sessions(const struct history *h)
{
	char **v = history_sessions(h);
	size_t len = 1;
	for (size_t i = 0; v[i]; i++)
		len += strlen(v[i]) + 2;
	char *s = xcalloc(1, len);
	for (size_t i = 0; v[i]; i++) {
		if (i)
			strcat(s, ", ");
		strcat(s, v[i]);
		free(v[i]);
	}
	free(v);
	return s;
}

int export_write(const struct history *h, const char *session, bool py, FILE *out, char *why, size_t whyn)
{
	FILE *f = history_read(h, session);
	if (!f) {
		int r = errno == ENOENT ? -ENOENT : -errno;
		char *names = list_sessions(h);
		if (r == -ENOENT)
			snprintf(why, whyn, "session \"%s\" has no history in %s; sessions that have one: %s", session,
				 history_dir(h), *names ? names : "none");
		else
			snprintf(why, whyn, "cannot read the history of session \"%s\": %s", session, strerror(-r));
		free(names);
		return r;
	}
	struct hist_lineage l;
	history_lineage(f, &l);
	struct out o = { .f = out, .py = py };
	if (!py)
		fputs("{\n \"cells\": [", out);
	static cJSON empty_start;
	header(&o, l.start ? l.start : &empty_start, session, &l);
	for (size_t i = 0; i < l.n; i++) {
		if (l.v[i].kind == HK_LOST) {
			lost(&o, &l.v[i], i);
			continue;
		}
		cJSON *r = history_at(f, l.v[i].offset);
		if (!r)
			continue;
		if (l.v[i].kind == HK_CELL)
			cell_of(&o, h, r);
		else
			rolled_back(&o, r);
		cJSON_Delete(r);
	}
	if (!py) {
		cJSON *meta = cJSON_CreateObject();
		cJSON *ks = cJSON_AddObjectToObject(meta, "kernelspec");
		cJSON_AddStringToObject(ks, "name", "python3");
		cJSON_AddStringToObject(ks, "display_name", "Python 3");
		cJSON_AddStringToObject(ks, "language", "python");
		cJSON *li = cJSON_AddObjectToObject(meta, "language_info");
		cJSON_AddStringToObject(li, "name", "python");
		const char *pv = str_of(cJSON_GetObjectItemCaseSensitive(l.start, "versions"), "python");
		if (pv)
			cJSON_AddStringToObject(li, "version", pv);
		cJSON *psm = cJSON_AddObjectToObject(meta, "psm");
		cJSON_AddStringToObject(psm, "session", session);
		if (l.start)
			cJSON_AddItemToObject(psm, "start", cJSON_Duplicate(l.start, 1));
		char *m = cJSON_Print(meta);
		fprintf(out, "\n ],\n \"metadata\": %s,\n \"nbformat\": 4,\n \"nbformat_minor\": 5\n}\n", m);
		free(m);
		cJSON_Delete(meta);
	}
	history_lineage_free(&l);
	fclose(f);
	if (fflush(out) != 0 || ferror(out)) {
		snprintf(why, whyn, "cannot write the export: %s", strerror(errno));
		return -EIO;
	}
	return 0;
}

static const char usage[] =
	"usage: python-sandbox-mcp export [--root DIR] [--workspace DIR] [--session NAME] [--format ipynb|py] [-o FILE]\n"
	"Writes a session's history, as the server recorded it, as a Jupyter notebook (default) or a\n"
	"`# %%` script: the cells whose effect is in the session's state, in order, with their outputs.\n"
	"  --root DIR        the project (default: the current directory)\n"
	"  --workspace DIR   the workspace the server used (default: ROOT/workspace)\n"
	"  --session NAME    the session (default: default)\n"
	"  --format FMT      ipynb (default) or py\n"
	"  -o FILE           where to write (default: standard output)\n";

int export_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "root", required_argument, NULL, 'r' },     { "workspace", required_argument, NULL, 'w' },
		{ "session", required_argument, NULL, 's' },  { "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },   { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *root = ".", *wsp = "workspace", *session = "default", *fmt = NULL, *outp = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'r': root = optarg; break;
		case 'w': wsp = optarg; break;
		case 's': session = optarg; break;
		case 'f': fmt = optarg; break;
		case 'o': outp = optarg; break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "python-sandbox-mcp export: unexpected argument '%s'\n%s", argv[optind], usage);
		return 2;
	}
	/* The name is a file's in the history's directory: "../x" would read
	 * beside it. */
	if (!session_name_valid(session)) {
		fprintf(stderr, "python-sandbox-mcp export: --session must match ^[A-Za-z0-9_-]{1,64}$ (a session's name, such as default), not '%s'\n",
			session);
		return 2;
	}
	if (fmt && strcmp(fmt, "ipynb") != 0 && strcmp(fmt, "py") != 0) {
		fprintf(stderr, "python-sandbox-mcp export: --format must be ipynb or py, not '%s'\n", fmt);
		return 2;
	}
	bool py = fmt ? strcmp(fmt, "py") == 0 : (outp && strlen(outp) > 3 && strcmp(outp + strlen(outp) - 3, ".py") == 0);
	char root_abs[PATH_MAX], ws_abs[PATH_MAX], wsj[PATH_MAX * 2];
	if (!realpath(root, root_abs)) {
		fprintf(stderr, "python-sandbox-mcp export: --root '%s' is not an existing directory: %s\n", root, strerror(errno));
		return 1;
	}
	snprintf(wsj, sizeof wsj, "%s%s%s", wsp[0] == '/' ? "" : root_abs, wsp[0] == '/' ? "" : "/", wsp);
	if (!realpath(wsj, ws_abs)) {
		fprintf(stderr, "python-sandbox-mcp export: the workspace %s does not exist (%s): give the one the server used with --workspace\n",
			wsj, strerror(errno));
		return 1;
	}
	char why[1200] = "";
	struct history *h = history_open_read(ws_abs, why, sizeof why);
	if (!history_on(h)) {
		fprintf(stderr, "python-sandbox-mcp export: %s\n", why);
		history_free(h);
		return 1;
	}
	FILE *out = stdout;
	char tmp[PATH_MAX + 16] = "";
	if (outp) {
		snprintf(tmp, sizeof tmp, "%s.tmp", outp);
		out = fopen(tmp, "w");
		if (!out) {
			fprintf(stderr, "python-sandbox-mcp export: cannot write %s: %s\n", tmp, strerror(errno));
			history_free(h);
			return 1;
		}
	}
	int r = export_write(h, session, py, out, why, sizeof why);
	history_free(h);
	if (outp) {
		if (fclose(out) != 0 && r == 0) {
			r = -EIO;
			snprintf(why, sizeof why, "cannot write %s: %s", outp, strerror(errno));
		}
		if (r == 0 && rename(tmp, outp) < 0) {
			r = -errno;
			snprintf(why, sizeof why, "cannot write %s: %s", outp, strerror(errno));
		}
		if (r < 0)
			unlink(tmp);
	}
	if (r < 0) {
		fprintf(stderr, "python-sandbox-mcp export: %s\n", why);
		return 1;
	}
	return 0;
}
