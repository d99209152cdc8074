/* jailrun: runs a Python snippet inside the jail, the way the product does.
 *
 *   jailrun POLICY ROOT WORKSPACE SNIPPET [ARGS...]   run SNIPPET (sys.argv = [SNIPPET, ARGS...])
 *   jailrun --check POLICY ROOT WORKSPACE             jail_check(), its exit status
 *
 * Like the zygote: jail_enter() (keeping fds 1 and 2), embedded CPython
 * initialised and numpy/pandas/matplotlib importable, then a fork per
 * session that calls jail_session_enter() and runs the snippet.  Exit status:
 * the snippet's (0, SystemExit's code, 1 on an exception); 3 when the report
 * says the policy is not enforceable (the server refuses to run then: the
 * test hook PSM_JAIL_DISABLE shows it; JAILRUN_FORCE=1 runs anyway, to test
 * the remaining layers alone); 4 when the jail could not be set up;
 * 5 on a usage or Python start-up error.  JAILRUN_REPORT=1 prints the
 * report on stderr. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../jail/jail.h"
#include "../../jail/ns.h"
#include "../../policy/policy.h"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, n = 0;
	char *s = malloc(cap + 1);
	size_t k;
	while (s && (k = fread(s + n, 1, cap - n, f)) > 0) {
		n += k;
		if (n == cap) {
			char *t = realloc(s, (cap *= 2) + 1);
			if (!t) {
				free(s);
				s = NULL;
			}
			s = t;
		}
	}
	fclose(f);
	if (s)
		s[n] = '\0';
	return s;
}

static int py_fail(PyConfig *cfg, PyStatus st, const char *what)
{
	PyConfig_Clear(cfg);
	fprintf(stderr, "jailrun: %s: %s\n", what, st.err_msg ? st.err_msg : "failed");
	return 5;
}

static int start_python(int argc, char **argv)
{
	PyConfig cfg;
	PyConfig_InitIsolatedConfig(&cfg);
	PyStatus st = PyConfig_SetBytesString(&cfg, &cfg.home, PSM_PY_PREFIX);
	if (PyStatus_Exception(st))
		return py_fail(&cfg, st, "home");
	st = PyConfig_SetBytesString(&cfg, &cfg.program_name, PSM_PY_PREFIX "/bin/python3");
	if (PyStatus_Exception(st))
		return py_fail(&cfg, st, "program_name");
	st = PyConfig_SetBytesArgv(&cfg, argc, argv);
	if (PyStatus_Exception(st))
		return py_fail(&cfg, st, "argv");
	cfg.install_signal_handlers = 1; /* SIGPIPE, SIGXFSZ ignored like python3 */
	cfg.write_bytecode = 0;
	st = Py_InitializeFromConfig(&cfg);
	PyConfig_Clear(&cfg);
	if (PyStatus_Exception(st)) {
		fprintf(stderr, "jailrun: Py_InitializeFromConfig: %s\n", st.err_msg ? st.err_msg : "failed");
		return 5;
	}
	return 0;
}

/* As the server starts its zygote (supervisor/zstart.c), when it is not
 * root and namespaces can be made: in a user namespace of its own, then
 * exec'd again, so that the suite's sessions are in the situation the
 * server makes (their memory made in that namespace).  Returns only when
 * that does not apply. */
static void owner_ns_exec(char **argv)
{
	if (geteuid() == 0 || getenv("JAILRUN_OWNED"))
		return;
	jail_knobs_read();
	if (jail_disabled("userns") || !jail_userns_probe(getuid(), getgid(), true))
		return;
	if (jail_ns_owner_enter() < 0) {
		fprintf(stderr, "jailrun: cannot enter a user namespace of its own: %s\n", strerror(errno));
		exit(4);
	}
	setenv("JAILRUN_OWNED", "1", 1);
	execv("/proc/self/exe", argv);
	perror("jailrun: exec again");
	exit(4);
}

int main(int argc, char **argv)
{
	owner_ns_exec(argv);
	bool check = argc > 1 && strcmp(argv[1], "--check") == 0;
	if (check) {
		argv++;
		argc--;
	}
	if (argc < (check ? 4 : 5)) {
		fprintf(stderr, "usage: jailrun [--check] POLICY ROOT WORKSPACE [SNIPPET [ARGS...]]\n");
		return 5;
	}
	char root[PATH_MAX], ws[PATH_MAX];
	if (!realpath(argv[2], root) || !realpath(argv[3], ws)) {
		fprintf(stderr, "jailrun: %s or %s: %s\n", argv[2], argv[3], strerror(errno));
		return 5;
	}
	struct err e = { 0 };
	struct policy *p = NULL;
	if (policy_load_file(argv[1], &p, &e) < 0 || policy_resolve(p, root, &e) < 0) {
		fprintf(stderr, "jailrun: %s\n", e.msg);
		return 5;
	}
	char *code = NULL;
	if (!check && !(code = slurp(argv[4]))) {
		fprintf(stderr, "jailrun: %s: %s\n", argv[4], strerror(errno));
		return 5;
	}
	bool show = getenv("JAILRUN_REPORT") != NULL;
	/* Tests of one layer alone run even when the report says the policy
	 * as a whole is not enforced.  Never in the product. */
	bool force = getenv("JAILRUN_FORCE") != NULL;

	static const char *const env[] = {
		"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "TMPDIR=/tmp", "LANG=C.UTF-8",
		"OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1", "MPLBACKEND=Agg",
		"MPLCONFIGDIR=/tmp/matplotlib", "PYTHONNOUSERSITE=1", NULL,
	};
	struct jail_config jc = {
		.policy = p,
		.root = root,
		.workspace = ws,
		.runtime_ro = jail_default_runtime_paths(),
		.keep_fds = NULL,
		.n_keep_fds = 0,
		.env = env,
	};
	if (check)
		return jail_check(&jc, stdout);

	struct jail_report rep;
	if (jail_enter(&jc, &rep, &e) < 0) {
		fprintf(stderr, "jailrun: %s\n", e.msg);
		return 4;
	}
	if (show) {
		char *d = jail_report_describe(&rep);
		fprintf(stderr, "%s", d ? d : "");
		free(d);
	}
	if (!rep.enforceable && !force) {
		fprintf(stderr, "jailrun: refusing to run: %s\n", rep.why);
		return 3;
	}
	int r = start_python(argc - 4, argv + 4);
	if (r)
		return r;

	/* One session, as the zygote forks it. */
	PyOS_BeforeFork();
	pid_t pid = fork();
	if (pid < 0) {
		perror("jailrun: fork");
		return 5;
	}
	if (pid == 0) {
		PyOS_AfterFork_Child();
		if (jail_session_enter(&e) < 0) {
			fprintf(stderr, "jailrun: %s\n", e.msg);
			_exit(4);
		}
		int rc = PyRun_SimpleString(code) == 0 ? 0 : 1;
		fflush(stdout);
		if (Py_FinalizeEx() < 0 && rc == 0)
			rc = 120;
		_exit(rc);
	}
	PyOS_AfterFork_Parent();
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 5;
	/* The namespace-free mode's scratch directory goes with the run, as
	 * the server removes it when it exits. */
	if (rep.scratch[0]) {
		jail_scratch_remove(rep.scratch);
		/* The directory itself: only from outside (Landlock grants what
		 * is below it); run.sh removes what this line names. */
		fprintf(stderr, "jailrun: scratch %s\n", rep.scratch);
	}
	if (WIFSIGNALED(st)) {
		fprintf(stderr, "jailrun: session killed by signal %d\n", WTERMSIG(st));
		return 128 + WTERMSIG(st);
	}
	return WEXITSTATUS(st);
}
