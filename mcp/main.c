/* python-sandbox-mcp: command line, policy, then the server.
 * Exit status: 0 at end of input or on SIGINT/SIGTERM, 2 for a usage error
 * (one line on stderr).  A policy that cannot be used does not end the
 * server: it serves, and every tool call answers the error (FILE:LINE, the
 * key, what to write); --check exits 1 with it. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <patchlevel.h> /* the embedded Python's version */

#include "../common/log.h"
#include "../common/util.h"
#include "../interp/zygote.h"
#include "../jail/jail.h"
#include "../supervisor/watch.h"
#include "budget.h"
#include "check.h"
#include "export.h"
#include "server.h"
#include "trust_cli.h"

#ifdef __SANITIZE_ADDRESS__
/* Sanitizer builds (tests only): a segfault in sandboxed code is the
 * session's crash to report (128+SIGSEGV), not AddressSanitizer's; a failed
 * huge allocation returns NULL (MemoryError) as in release builds.  Leaks of
 * the server itself are still reported at its exit. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "handle_segv=0:handle_sigbus=0:handle_abort=0:allocator_may_return_null=1:detect_leaks=1";
}
#endif

#ifdef __SANITIZE_ADDRESS__
/* LeakSanitizer checks the process at exit from a helper that ptraces it,
 * which a process that is not dumpable refuses to a caller without
 * CAP_SYS_PTRACE (a server run by nobody): sanitizer builds, tests only,
 * become dumpable again for that, once every session has ended. */
static void dumpable_for_lsan(void)
{
	prctl(PR_SET_DUMPABLE, 1);
}
#endif

/* The server is not dumpable: its /proc/PID files then belong to root, so
 * a process of the same uid cannot list its descriptors (/proc/PID/fd,
 * fdinfo) or read what the ptrace rule does not already guard.
 * Attack: without namespaces, a cell of a server run by nobody listed
 * /proc/<server>/fd (the building blocks of forged pidfds and sockets).
 * The zygote is a fresh exec, dumpable again: the server reads its /proc. */
static void server_not_dumpable(void)
{
	if (prctl(PR_SET_DUMPABLE, 0) < 0)
		log_warn("cannot make the server non-dumpable: %s", strerror(errno));
#ifdef __SANITIZE_ADDRESS__
	atexit(dumpable_for_lsan);
#endif
}

static const char usage[] =
	"usage: python-sandbox-mcp [--root DIR] [--workspace DIR] [--skill FILE] [--venv DIR]\n"
	"                          [--timeout S] [--memory MB] [--structured-content] [--images inline|link]\n"
	"                          [--resource-links block|text] [--max-reply-kb KB]\n"
	"                          [--log-level LEVEL] [--warmup on|off|clear]\n"
	"       python-sandbox-mcp --check [same options]\n"
	"       python-sandbox-mcp --trust [--root DIR] [--skill FILE] [--yes]\n"
	"       python-sandbox-mcp --untrust [--root DIR] [--skill FILE]\n"
	"       python-sandbox-mcp export [--root DIR] [--workspace DIR] [--session NAME]\n"
	"                                 [--format ipynb|py] [-o FILE]   (a session as a notebook)\n"
	"       python-sandbox-mcp --version | --help | -h\n"
	"\n"
	"A stdio MCP server: a stateful, sandboxed Python interpreter (numpy, pandas,\n"
	"matplotlib) with the tools execute_python, list_artifacts and verify_outputs.\n"
	"\n"
	"  --root DIR            project directory, Python's working directory\n"
	"                        (default: $CLAUDE_PROJECT_DIR, else the current directory)\n"
	"  --workspace DIR       the only writable directory (default: ROOT/workspace)\n"
	"  --skill FILE          SKILL.md whose frontmatter is the policy (default: ROOT/.agents/skills/\n"
	"                        code-interpreter-sandbox-executor/SKILL.md, then the .claude one,\n"
	"                        then the built-in policy)\n"
	"  --venv DIR            add a virtual environment's site-packages (read-only; default:\n"
	"                        ROOT/.interpreter-venv when it exists and is approved with --trust)\n"
	"  --timeout S           lower the policy's timeout_s\n"
	"  --memory MB           lower the policy's memory_mb\n"
	"  --structured-content  also return structuredContent from execute_python\n"
	"  --images inline|link  inline (default): images the code made come back as image\n"
	"                        blocks; link: as their path and a resource_link only (for\n"
	"                        clients that drop images or send them to the model as text)\n"
	"  --resource-links block|text\n"
	"                        block (default): the files a call made come back as\n"
	"                        resource_link blocks too; text: named in the text only (for\n"
	"                        clients that reject a result holding one: the Codex app)\n"
	"  --max-reply-kb KB     what one reply's text may take (default 9: Codex shows about\n"
	"                        10,000 bytes or 256 lines of a result); longer output keeps\n"
	"                        its head and tail, the whole of it is saved under\n"
	"                        workspace/.logs/ (Claude Code takes 25,000 tokens: 80 fits)\n"
	"  --log-level LEVEL     debug, info, notice, warning, error (stderr; default info)\n"
	"  --warmup on|off|clear on (default): sessions start with the modules this project's\n"
	"                        sessions imported before (learned, kept in the user's state\n"
	"                        directory); off: learn and load nothing; clear: forget what\n"
	"                        was learned for this project, then learn again\n"
	"  --check               print the policy and the jail's layers, run live probes\n"
	"                        (exit 1 when the project's policy is cut down, unapproved,\n"
	"                        or cannot be used, or when the project cannot be served)\n"
	"  --trust               approve this exact project policy file and the project's venv\n"
	"                        on this machine: until then the policy gets no more than the\n"
	"                        built-in one allows, and the venv is not used\n"
	"  --yes                 with --trust: approve without asking (for scripts)\n"
	"  --untrust             withdraw the approvals of the project's policy file and venv\n";

static __attribute__((noreturn, format(printf, 1, 2))) void die_usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "python-sandbox-mcp: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(see python-sandbox-mcp --help)\n");
	exit(2);
}

static double parse_number(const char *flag, const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v > 0) || v > 1e9)
		die_usage("%s needs a number greater than 0 (and at most 1e9)", flag);
	return v;
}

static bool is_file(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static bool is_dir(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A virtual environment the embedded interpreter can use: its pyvenv.cfg
 * names the Python that made it, which must be this one's major.minor (the
 * compiled modules in its site-packages are built for that version), and
 * it has lib/pythonX.Y/site-packages.  Whether it was made with
 * --system-site-packages does not matter: its site-packages are added to
 * the interpreter's own path either way. */
static int venv_check(const char *venv, char *why, size_t n)
{
	char path[PATH_MAX + 64], line[512];
	snprintf(path, sizeof path, "%s/pyvenv.cfg", venv);
	FILE *f = fopen(path, "re");
	if (!f) {
		snprintf(why, n, "has no pyvenv.cfg, so it is not a virtual environment: make one with python%d.%d -m venv DIR",
			 PY_MAJOR_VERSION, PY_MINOR_VERSION);
		return -1;
	}
	int major = -1, minor = -1;
	while (fgets(line, sizeof line, f)) {
		int a, b;
		/* "version = 3.11.2" (and "version_info = 3.11.2.final.0" in
		 * newer venvs) */
		if ((sscanf(line, "version = %d.%d", &a, &b) == 2 || sscanf(line, "version_info = %d.%d", &a, &b) == 2) && major < 0) {
			major = a;
			minor = b;
		}
	}
	fclose(f);
	if (major < 0) {
		snprintf(why, n, "its pyvenv.cfg does not say which Python made it (no \"version = \" line): recreate it with python%d.%d -m venv DIR",
			 PY_MAJOR_VERSION, PY_MINOR_VERSION);
		return -1;
	}
	if (major != PY_MAJOR_VERSION || minor != PY_MINOR_VERSION) {
		snprintf(why, n, "was made by Python %d.%d (pyvenv.cfg), but this server embeds Python %d.%d, which cannot load its packages: "
			 "recreate it with python%d.%d -m venv DIR and install the packages again",
			 major, minor, PY_MAJOR_VERSION, PY_MINOR_VERSION, PY_MAJOR_VERSION, PY_MINOR_VERSION);
		return -1;
	}
	snprintf(path, sizeof path, "%s/lib/python%d.%d/site-packages", venv, PY_MAJOR_VERSION, PY_MINOR_VERSION);
	if (!is_dir(path)) {
		snprintf(why, n, "has no lib/python%d.%d/site-packages: recreate it with python%d.%d -m venv DIR",
			 PY_MAJOR_VERSION, PY_MINOR_VERSION, PY_MAJOR_VERSION, PY_MINOR_VERSION);
		return -1;
	}
	return 0;
}

/* Whether the files a and b hold the same bytes (false when either cannot
 * be read). */
static bool same_bytes(const char *a, const char *b)
{
	FILE *fa = fopen(a, "re"), *fb = fopen(b, "re");
	bool same = fa && fb;
	while (same) {
		int ca = getc(fa), cb = getc(fb);
		if (ca != cb)
			same = false;
		else if (ca == EOF)
			break;
	}
	if (fa)
		fclose(fa);
	if (fb)
		fclose(fb);
	return same;
}

/* The empty stand-in for a ROOT the server must not touch (ROOT = "/", or
 * a project whose policy cannot be used; see main); removed at exit.  Into
 * root_abs; -1 (said on stderr with why) when none could be made. */
static char standin[64];

static void remove_standin(void)
{
	if (standin[0])
		jail_scratch_remove(standin);
}

static int use_standin(char *root_abs, size_t n, const char *why)
{
	snprintf(standin, sizeof standin, "/tmp/psm-scratch-not-a-project-XXXXXX");
	if (!mkdtemp(standin) || atexit(remove_standin) != 0) {
		fprintf(stderr, "python-sandbox-mcp: %s (and no stand-in directory could be made: %s)\n", why, strerror(errno));
		return -1;
	}
	snprintf(root_abs, n, "%s", standin);
	return 0;
}

/* The server cannot serve this project (why, which it takes): it serves on
 * the stand-in instead, with no workspace or venv of the project's, and
 * every tool call answers why.  The first reason found is the one given.
 * -1 when no stand-in could be made (said on stderr). */
static int refuse_all(struct server *srv, char *root_abs, size_t n, char *why)
{
	if (srv->opts.refuse_all) {
		free(why);
		return 0;
	}
	log_warn("%s", why);
	srv->opts.refuse_all = why;
	srv->opts.workspace = NULL;
	srv->opts.venv = NULL;
	return use_standin(root_abs, n, why);
}

/* Where the sandboxed code can write under policy p: the workspace and the
 * fs_write directories.  A venv below one of them runs no .pth file
 * (trust.h).  Caller frees the array (not the strings). */
static const char **writable_dirs(const struct policy *p, const char *ws)
{
	size_t n = p->fs_write == FS_WRITE_LIST ? p->n_fs_write_paths : 0;
	const char **v = xreallocarray(NULL, n + 2, sizeof *v);
	v[0] = ws;
	for (size_t i = 0; i < n; i++)
		v[i + 1] = p->fs_write_paths[i];
	v[n + 1] = NULL;
	return v;
}

/* Workspace trust: an unapproved project policy gets no more than the
 * built-in one, an unapproved project venv is not used; then the flags may
 * tighten further.  -1 (said on stderr, the trust state freed) when the
 * policy cannot be used. */
static int policy_settle(struct server *srv, bool from_file, const char *root, const char *ws,
			 const char *venv, bool venv_given)
{
	struct err e = { 0 };
	bool skill_given = srv->opts.skill != NULL;
	int r = trust_decide(&srv->trust, srv->policy, from_file, root, ws, skill_given, &e);
	if (r == 0) {
		const char **w = writable_dirs(srv->policy, ws);
		r = trust_decide_venv(&srv->trust, venv, venv_given, root, ws, w, skill_given, &e);
		free(w);
	}
	if (r == 0)
		r = policy_tighten(srv->policy, srv->opts.timeout_s, srv->opts.memory_mb, &e);
	if (r < 0) {
		fprintf(stderr, "python-sandbox-mcp: policy error: %s\n", e.msg);
		trust_state_free(&srv->trust);
		return -1;
	}
	/* The interpreter sees the venv only when it is used. */
	const struct trust_venv *v = &srv->trust.venv;
	srv->opts.venv = trust_venv_used(&srv->trust) ? v->path : NULL;
	srv->opts.venv_pth_off = v->pth_off;
	srv->opts.venv_withheld = v->path && !trust_venv_used(&srv->trust);
	return 0;
}

/* The venv line of the log and of --check. */
static void venv_describe(const struct server *srv, char *out, size_t n)
{
	const struct trust_venv *v = &srv->trust.venv;
	out[0] = '\0';
	if (!v->path)
		return;
	if (!trust_venv_used(&srv->trust))
		snprintf(out, n, "venv: %s (ROOT/.interpreter-venv: NOT approved on this machine, not used)\n", v->path);
	else
		snprintf(out, n, "venv: %s (%s, read-only, Python %d.%d%s)\n", v->path,
			 v->given ? "--venv" : "ROOT/.interpreter-venv, approved", PY_MAJOR_VERSION, PY_MINOR_VERSION,
			 v->pth_off ? "; its .pth files are not run: the sandboxed code can write there" : "");
}

/* What main gathers before it serves: the command line, then ROOT, the
 * policy, the workspace and the venv, one step per function below, each
 * returning GO_ON or the process's exit status.  Static: main runs once,
 * and the buffers are large. */
struct start {
	struct server srv;
	bool check, trust, untrust, yes;
	char root_abs[PATH_MAX];
	const char *skill_file; /* NULL: the built-in policy */
	char skill_path[PATH_MAX + 128];
	char skill_differs[6 * PATH_MAX + 768]; /* five paths and the words */
	const char *wsp;
	char ws_buf[PATH_MAX + 16];
	const char *venv;
	bool venv_given;
	char venv_abs[PATH_MAX], venv_default[PATH_MAX + 32], venv_line[PATH_MAX + 300];
};
#define GO_ON (-1)

/* The command line's options (usage above says what each does). */
static const struct option opts[] = {
	{ "root", required_argument, NULL, 'r' },
	{ "workspace", required_argument, NULL, 'w' },
	{ "skill", required_argument, NULL, 's' },
	{ "venv", required_argument, NULL, 'v' },
	{ "timeout", required_argument, NULL, 't' },
	{ "memory", required_argument, NULL, 'm' },
	{ "structured-content", no_argument, NULL, 'S' },
	{ "images", required_argument, NULL, 'I' },
	{ "resource-links", required_argument, NULL, 'L' },
	{ "max-reply-kb", required_argument, NULL, 'K' },
	{ "warmup", required_argument, NULL, 'W' },
	{ "log-level", required_argument, NULL, 'l' },
	{ "check", no_argument, NULL, 'c' },
	{ "trust", no_argument, NULL, 'T' },
	{ "untrust", no_argument, NULL, 'U' },
	{ "yes", no_argument, NULL, 'y' },
	{ "check-session", no_argument, NULL, 'C' }, /* internal: --check's server */
	{ "version", no_argument, NULL, 'V' },
	{ "help", no_argument, NULL, 'h' },
	{ "zygote-fd", required_argument, NULL, 'Z' }, /* internal */
	{ "resume-mcp", required_argument, NULL, 'R' }, /* internal: started again on the client's root */
	{ "resume-input", required_argument, NULL, 'F' }, /* internal: the requests held meanwhile */
	{ 0 },
};

/* The command line.  --zygote-fd sets *zygote_fd (this process is the
 * zygote, not a server). */
static int parse_args(struct start *ctx, int argc, char **argv, int *zygote_fd)
{
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'r': ctx->srv.opts.root = optarg; break;
		case 'w': ctx->srv.opts.workspace = optarg; break;
		case 's': ctx->srv.opts.skill = optarg; break;
		case 'v': ctx->srv.opts.venv = optarg; break;
		case 't': ctx->srv.opts.timeout_s = parse_number("--timeout", optarg); break;
		case 'm': ctx->srv.opts.memory_mb = (long)parse_number("--memory", optarg); break;
		case 'S': ctx->srv.opts.structured_content = true; break;
		case 'I':
			if (strcmp(optarg, "inline") == 0)
				ctx->srv.opts.images_link = false;
			else if (strcmp(optarg, "link") == 0)
				ctx->srv.opts.images_link = true;
			else
				die_usage("--images must be inline or link, not '%s'", optarg);
			break;
		case 'L':
			if (strcmp(optarg, "block") == 0)
				ctx->srv.opts.links_text = false;
			else if (strcmp(optarg, "text") == 0)
				ctx->srv.opts.links_text = true;
			else
				die_usage("--resource-links must be block or text, not '%s'", optarg);
			break;
		case 'K': {
			double kb = parse_number("--max-reply-kb", optarg);
			if (kb < 2 || kb > 4096 || kb != (double)(long)kb)
				die_usage("--max-reply-kb needs a whole number of KiB from 2 to 4096 (default %d), not '%s'", REPLY_DEFAULT_KB, optarg);
			ctx->srv.opts.max_reply_kb = (long)kb;
			break;
		}
		case 'W':
			if (strcmp(optarg, "on") == 0)
				ctx->srv.opts.warmup = WARMUP_ON;
			else if (strcmp(optarg, "off") == 0)
				ctx->srv.opts.warmup = WARMUP_OFF;
			else if (strcmp(optarg, "clear") == 0)
				ctx->srv.opts.warmup = WARMUP_CLEAR;
			else
				die_usage("--warmup must be on, off or clear, not '%s'", optarg);
			break;
		case 'l': {
			int l = log_level_parse(optarg);
			if (l < 0)
				die_usage("--log-level must be debug, info, notice, warning or error, not '%s'", optarg);
			log_threshold = (enum log_level)l;
			break;
		}
		case 'c': ctx->check = true; break;
		case 'T': ctx->trust = true; break;
		case 'U': ctx->untrust = true; break;
		case 'y': ctx->yes = true; break;
		case 'C': ctx->srv.opts.check_session = true; break;
		case 'Z': {
			const char *bad = NULL;
			int fd = (int)strtonum(optarg, 3, INT_MAX, &bad);
			if (bad)
				die_usage("--zygote-fd is internal: the server passes a descriptor number (%s)", bad);
			*zygote_fd = fd;
			return 0;
		}
		case 'R':
			/* Only the versions the server knows are echoed; the rest
			 * is refused as the internal option it is. */
			if (strlen(optarg) != 10 || strspn(optarg, "0123456789-") != 10)
				die_usage("--resume-mcp is internal: a protocol version (YYYY-MM-DD)");
			ctx->srv.opts.resume_version = optarg;
			break;
		case 'F': {
			const char *bad = NULL;
			ctx->srv.opts.resume_fd = (int)strtonum(optarg, 3, INT_MAX, &bad);
			if (bad)
				die_usage("--resume-input is internal: the server passes a descriptor number (%s)", bad);
			break;
		}
		case 'V': printf("python-sandbox-mcp %s\n", PSM_VERSION); return 0;
		case 'h': fputs(usage, stdout); return 0;
		default:
			die_usage("unknown or incomplete option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	if (ctx->check + ctx->trust + ctx->untrust > 1)
		die_usage("--check, --trust and --untrust are separate commands: give one of them");
	if (ctx->yes && !ctx->trust)
		die_usage("--yes only goes with --trust");
	ssize_t sl = readlink("/proc/self/exe", ctx->srv.opts.self_exe, sizeof ctx->srv.opts.self_exe - 1);
	if (sl <= 0) {
		fprintf(stderr, "python-sandbox-mcp: cannot find its own binary (/proc/self/exe): %s\n", strerror(errno));
		return 2;
	}
	ctx->srv.opts.self_exe[sl] = '\0';
	return GO_ON;
}

/* ROOT: --root, CLAUDE_PROJECT_DIR or the current directory; one that is no
 * project (/ or the home directory) is served on an empty stand-in that
 * refuses every call. */
static int find_root(struct start *ctx)
{
	const char *root = ctx->srv.opts.root;
	const char *root_from = "--root";
	if (!root) {
		root = getenv("CLAUDE_PROJECT_DIR");
		root_from = "CLAUDE_PROJECT_DIR";
	}
	/* Some editors pass their MCP settings on without expanding
	 * variables: a literal ${workspaceFolder} is no directory to guess. */
	if (root && strstr(root, "${"))
		die_usage("%s '%s' still holds an unexpanded ${...} (the client did not expand it): write the project's absolute path "
			  "instead (for example --root /home/me/project), or leave --root out to use the current directory",
			  root_from, root);
	char cwd[PATH_MAX];
	if (!root || !*root) {
		root = getcwd(cwd, sizeof cwd);
		root_from = "the current directory";
		ctx->srv.opts.root_from_cwd = true; /* the client's roots may name it */
	}
	if (!root || !realpath(root, ctx->root_abs) || !is_dir(ctx->root_abs))
		die_usage("%s '%s' is not an existing directory: write the absolute path of the project's directory (for example --root /home/me/project)",
			  root_from, root ? root : "(cwd)");
	if (ctx->srv.opts.resume_version) {
		/* Started again on the client's first root: the current
		 * directory is still the one the client started us in. */
		char here[PATH_MAX];
		ctx->srv.root_note = xasprintf("the project is %s, the client's first root (roots/list); the server was started in %s, "
					  "which is not used", ctx->root_abs, getcwd(here, sizeof here) ? here : "another directory");
	}
	/* ROOT = "/" or the home directory is no project: with fs_read true
	 * the code would read the whole file system (or every dotfile), and
	 * the workspace would be /workspace (~/workspace).  Agents started
	 * outside a project land here, so the server still starts (the agent
	 * can tell its user what to do), on an empty private stand-in for ROOT
	 * (named like the jail's scratch directories, so that the same careful
	 * removal takes it at exit), creates nothing, and refuses every call. */
	char which[64];
	if (!ctx->trust && !ctx->untrust && jail_root_not_project(ctx->root_abs, getenv("HOME"), which, sizeof which)) {
		char *not_project = strcmp(ctx->root_abs, "/") == 0
			? xasprintf("the project root is / (%s), not a project: start the server with --root set to the "
				    "project directory (for example --root /home/me/project), or start it from inside the project", which)
			: xasprintf("the project root %s is %s, not a project: start the server with --root set to the "
				    "project directory (for example --root %s/project), or start it from inside the project",
				    ctx->root_abs, which, ctx->root_abs);
		if (ctx->check) {
			printf("python-sandbox-mcp %s\nroot: %s\ncheck: %s\n", PSM_VERSION, ctx->root_abs, not_project);
			free(not_project);
			return 1;
		}
		if (refuse_all(&ctx->srv, ctx->root_abs, sizeof ctx->root_abs, not_project) < 0)
			return 2;
	}
	ctx->srv.opts.root = ctx->root_abs;
	return GO_ON;
}

/* The policy: the project's SKILL.md (or --skill, or the built-in one).
 * One that cannot be used is served as an error on every call. */
static int load_policy(struct start *ctx)
{
	/* The policy: never run under one that could not be read. */
	struct err e = { 0 };
	ctx->skill_file = ctx->srv.opts.skill; /* NULL: the built-in policy */
	int r;
	if (!ctx->skill_file) {
		static const char *const cands[] = {
			".agents/skills/code-interpreter-sandbox-executor/SKILL.md",
			".claude/skills/code-interpreter-sandbox-executor/SKILL.md",
		};
		for (size_t i = 0; i < 2 && !ctx->skill_file; i++) {
			snprintf(ctx->skill_path, sizeof ctx->skill_path, "%s/%s", ctx->root_abs, cands[i]);
			if (is_file(ctx->skill_path))
				ctx->skill_file = ctx->skill_path;
		}
		/* Agents that read the other copy (Claude Code reads .claude's)
		 * follow a policy this server does not enforce. */
		char other[PATH_MAX + 128];
		snprintf(other, sizeof other, "%s/%s", ctx->root_abs, cands[1]);
		if (ctx->skill_file && strcmp(ctx->skill_file, other) != 0 && is_file(other) && !same_bytes(ctx->skill_file, other)) {
			/* What an installed server has: the .deb and make install
			 * put python-sandbox-mcp-install-skill on PATH, not a
			 * Makefile. */
			snprintf(ctx->skill_differs, sizeof ctx->skill_differs,
				 "%s differs from %s, which is the one used: copy one over the other "
				 "(cp '%s' '%s'), or put the built-in SKILL.md in both with "
				 "python-sandbox-mcp-install-skill --force '%s'",
				 other, ctx->skill_file, ctx->skill_file, other, ctx->root_abs);
			log_warn("%s", ctx->skill_differs);
		}
	}
	if (ctx->untrust)
		return trust_cli_revoke(ctx->skill_file, ctx->root_abs, NULL);
	if (ctx->skill_file)
		r = policy_load_file(ctx->skill_file, &ctx->srv.policy, &e);
	else
		r = policy_builtin(&ctx->srv.policy, &e);
	if (r == 0)
		r = policy_resolve(ctx->srv.policy, ctx->root_abs, &e);
	if (r < 0) {
		fprintf(stderr, "python-sandbox-mcp: policy error: %s\n", e.msg);
		policy_free(ctx->srv.policy);
		ctx->srv.policy = NULL;
		if (ctx->trust)
			return 2;
		if (ctx->check) {
			printf("python-sandbox-mcp %s\nroot: %s\npolicy: %s\n%s\ncheck: the policy cannot be used: %s\n",
			       PSM_VERSION, ctx->root_abs, ctx->skill_file ? ctx->skill_file : "<built-in SKILL.md>", e.msg,
			       "fix the file as the line above says (or remove it to use the built-in policy); no code runs until then");
			return 1;
		}
		/* Serving still: a client that sees the server end shows only
		 * "Failed to connect", and the model has no tools and no
		 * reason.  Every tool call answers this instead; nothing runs
		 * (no interpreter is started) and nothing of the project is
		 * touched: the server stands on an empty stand-in, under the
		 * built-in policy only so that its tools can be listed. */
		char *why = xasprintf(
			"the sandbox's policy cannot be used, so no code runs until it is fixed: %s. "
			"Fix that line of the file (or remove the file to use the built-in policy), then restart this MCP server "
			"(reconnect it in the client); python-sandbox-mcp --check%s%s shows whether the policy is good.",
			e.msg, ctx->srv.opts.skill ? " --skill " : "", ctx->srv.opts.skill ? ctx->skill_file : "");
		if (refuse_all(&ctx->srv, ctx->root_abs, sizeof ctx->root_abs, why) < 0)
			return 2;
		ctx->skill_file = NULL;
		struct err be = { 0 };
		if (policy_builtin(&ctx->srv.policy, &be) < 0 || policy_resolve(ctx->srv.policy, ctx->root_abs, &be) < 0) {
			fprintf(stderr, "python-sandbox-mcp: the built-in policy: %s\n", be.msg);
			return 2;
		}
	}
	return GO_ON;
}

/* The workspace's path and the venv: --venv DIR, or ROOT/.interpreter-venv. */
static int find_venv(struct start *ctx)
{
	ctx->wsp = ctx->srv.opts.workspace;
	if (!ctx->wsp) {
		snprintf(ctx->ws_buf, sizeof ctx->ws_buf, "%s/workspace", ctx->root_abs);
		ctx->wsp = ctx->ws_buf;
	}
	/* The venv: --venv DIR (the user's own word), else the project's
	 * ROOT/.interpreter-venv (the skill's own guide tells users to make
	 * it), which is the project's code: used only once approved
	 * (policy_settle). */
	ctx->venv = ctx->srv.opts.venv;
	ctx->venv_given = ctx->venv != NULL;
	if (!ctx->venv_given) {
		snprintf(ctx->venv_default, sizeof ctx->venv_default, "%s/.interpreter-venv", ctx->root_abs);
		if (is_dir(ctx->venv_default))
			ctx->venv = ctx->venv_default;
	}
	ctx->srv.opts.venv = NULL;
	if (ctx->venv) {
		const char *flag = ctx->venv_given ? "--venv" : "the project's venv";
		if (!realpath(ctx->venv, ctx->venv_abs) || !is_dir(ctx->venv_abs))
			die_usage("--venv '%s' is not an existing directory", ctx->venv);
		char why[PATH_MAX + 600];
		if (venv_check(ctx->venv_abs, why, sizeof why) < 0) {
			fprintf(stderr, "python-sandbox-mcp: %s %s: %s\n", flag, ctx->venv_abs, why);
			policy_free(ctx->srv.policy);
			return 2;
		}
		ctx->venv = ctx->venv_abs;
	}
	return GO_ON;
}

/* --check: what the server would enforce, and a session started to try it;
 * nothing on the host is changed. */
static int run_check(struct start *ctx)
{
	/* Before ws_open, which would create a missing workspace: a
	 * check changes nothing on the host.  Its server (--check-session)
	 * makes the same trust decision; this one prints it. */
	char wsabs[PATH_MAX], real[PATH_MAX];
	if (ctx->wsp[0] == '/')
		snprintf(wsabs, sizeof wsabs, "%.4000s", ctx->wsp);
	else
		snprintf(wsabs, sizeof wsabs, "%.2000s/%.2000s", ctx->root_abs, ctx->wsp);
	const char *ws_final = realpath(wsabs, real) ? real : wsabs;
	char *requested = policy_describe(ctx->srv.policy);
	if (policy_settle(&ctx->srv, ctx->skill_file != NULL, ctx->root_abs, ws_final, ctx->venv, ctx->venv_given) < 0) {
		free(requested);
		policy_free(ctx->srv.policy);
		return 2;
	}
	venv_describe(&ctx->srv, ctx->venv_line, sizeof ctx->venv_line);
	char *desc = policy_describe(ctx->srv.policy);
	printf("python-sandbox-mcp %s\nroot: %s\nworkspace: %s\n%s%s", PSM_VERSION, ctx->root_abs, ws_final,
	       ctx->venv_line, desc ? desc : "");
	trust_print(&ctx->srv.trust, requested ? requested : "", stdout);
	if (ctx->skill_differs[0])
		printf("warning: %s\n", ctx->skill_differs);
	fflush(stdout);
	free(desc);
	free(requested);
	struct check_opts co = {
		.policy = ctx->srv.policy, .root = ctx->root_abs, .workspace = ws_final,
		.skill_path = ctx->srv.opts.skill, .venv = ctx->srv.opts.venv,
		.timeout_s = ctx->srv.opts.timeout_s, .memory_mb = ctx->srv.opts.memory_mb,
		.self_exe = ctx->srv.opts.self_exe,
	};
	int rc = check_run(&co, stdout);
	if (rc == 0 && (ctx->srv.trust.withheld || ctx->srv.opts.venv_withheld))
		rc = 1; /* the project does not get what it asks for */
	trust_state_free(&ctx->srv.trust);
	policy_free(ctx->srv.policy);
	return rc;
}

/* workspace/.gitignore when there is none: git status in the project
 * listed the server's own files (.sessions/NAME/state.snap, hundreds of MB
 * each, .cache, .logs).  Created, never replaced: O_EXCL leaves a file of
 * the user's as it is, and ws_openat follows no symlink planted there.
 * Not when the workspace is the project itself, whose .gitignore is the
 * user's alone. */
static void workspace_gitignore(const struct workspace *ws)
{
	static const char text[] = "# python-sandbox-mcp's own files: saved sessions, caches, full output logs.\n"
				   "# Written when there is no .gitignore here; never overwritten.\n"
				   ".sessions/\n.cache/\n.logs/\n";
	if (strcmp(ws->display, ".") == 0)
		return;
	int fd = ws_openat(ws, ".gitignore", O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0)
		return; /* one is there already, or the workspace is read-only */
	ssize_t n = write(fd, text, sizeof text - 1);
	if (n != (ssize_t)(sizeof text - 1))
		log_warn("workspace/.gitignore: %s", n < 0 ? strerror(errno) : "short write");
	close(fd);
}

/* The workspace opened (or the server refuses every call, saying why);
 * --trust ends here; the policy settled against what is approved. */
static int open_workspace(struct start *ctx)
{
	struct err e = { 0 };
	if (ws_open(&ctx->srv.ws, ctx->root_abs, ctx->wsp, &e) < 0) {
		/* A read-only checkout, a directory of another user's: the
		 * agent hears why and what to pass, as for a bad policy. */
		if (ctx->trust || refuse_all(&ctx->srv, ctx->root_abs, sizeof ctx->root_abs,
					xasprintf("the workspace cannot be created, so no code runs: %s. %s", e.msg, WS_REMEDY)) < 0 ||
		    ws_open(&ctx->srv.ws, ctx->root_abs, "workspace", &e) < 0) {
			fprintf(stderr, "python-sandbox-mcp: workspace: %s\n", e.msg);
			policy_free(ctx->srv.policy);
			return 2;
		}
	}
	if (ctx->trust) {
		const char **w = writable_dirs(ctx->srv.policy, ctx->srv.ws.abs);
		struct trust_cli_args ta = {
			.project = ctx->skill_file != NULL, .root = ctx->srv.ws.root, .workspace = ctx->srv.ws.abs,
			.skill_given = ctx->srv.opts.skill != NULL, .venv = ctx->venv, .venv_given = ctx->venv_given,
			.writable = w, .yes = ctx->yes,
		};
		int rc = trust_cli_approve(ctx->srv.policy, &ta);
		free(w);
		ws_close(&ctx->srv.ws);
		policy_free(ctx->srv.policy);
		return rc;
	}
	if (policy_settle(&ctx->srv, ctx->skill_file != NULL, ctx->srv.ws.root, ctx->srv.ws.abs, ctx->venv, ctx->venv_given) < 0) {
		ws_close(&ctx->srv.ws);
		policy_free(ctx->srv.policy);
		return 2;
	}
	venv_describe(&ctx->srv, ctx->venv_line, sizeof ctx->venv_line);
	workspace_gitignore(&ctx->srv.ws);
	return GO_ON;
}

int main(int argc, char **argv)
{
	/* The server's probe of what it may read of its sessions (an
	 * internal command line; see supervisor/watch.c). */
	if (argc == 3 && strcmp(argv[1], WATCH_PROBE_ARG) == 0)
		return watch_probe_main(argv[2]);
	/* One out-of-memory rule for every JSON value built in this process
	 * (server, zygote, session): see common/util.h. */
	util_cjson_hooks();
	/* libbsd's setproctitle may then reuse the argv and environment area:
	 * the zygote, sessions and checkpoints name themselves in ps. */
	/* A copy first: a restart on the client's root (roots/list) needs the
	 * command line as it was given. */
	static char **argv_copy; /* static: reachable for the whole run */
	argv_copy = xreallocarray(NULL, (size_t)argc + 1, sizeof *argv_copy);
	for (int i = 0; i < argc; i++)
		argv_copy[i] = xstrdup(argv[i]);
	argv_copy[argc] = NULL;
	setproctitle_init(argc, argv, environ);
	static struct start start;
	struct start *ctx = &start;
	ctx->srv.opts.argv = argv_copy;
	ctx->srv.opts.resume_fd = -1;
	ctx->srv.opts.timeout_s = -1;
	ctx->srv.opts.memory_mb = -1;
	/* A subcommand of its own: reads the history, starts nothing. */
	if (argc > 1 && strcmp(argv[1], "export") == 0)
		return export_main(argc - 1, argv + 1);
	int zygote_fd = -1;
	int r = parse_args(ctx, argc, argv, &zygote_fd);
	if (zygote_fd >= 0)
		return zygote_exec_main(zygote_fd);
	if (r != GO_ON)
		return r;
	server_not_dumpable();
	if ((r = find_root(ctx)) != GO_ON || (r = load_policy(ctx)) != GO_ON || (r = find_venv(ctx)) != GO_ON)
		return r;
	if (ctx->check)
		return run_check(ctx);
	if ((r = open_workspace(ctx)) != GO_ON)
		return r;

	char *desc = policy_describe(ctx->srv.policy);
	log_info("root %s, workspace %s, %spolicy:\n%s", ctx->srv.ws.root, ctx->srv.ws.abs, ctx->venv_line, desc ? desc : "");
	free(desc);
	if (ctx->srv.trust.note)
		log_warn("%s", ctx->srv.trust.note);
	else if (ctx->srv.trust.approved)
		log_info("the project's policy %s is approved on this machine (sha256 %s): all of it applies",
			 ctx->srv.trust.path, ctx->srv.trust.hex);

	int status = server_run(&ctx->srv);
	trust_state_free(&ctx->srv.trust);
	free(ctx->srv.root_note);
	free(ctx->srv.opts.refuse_all);
	ws_close(&ctx->srv.ws);
	policy_free(ctx->srv.policy);
	return status;
}
