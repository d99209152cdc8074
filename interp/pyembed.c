#include "pyembed.h"
#include "native.h"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

extern const char bootstrap_py[];

static PyObject *psm_module;

static int status_err(PyStatus st, struct err *e, const char *what)
{
	return err_set(e, -EINVAL, "python: %s: %s%s%s", what, st.func ? st.func : "",
		       st.func ? ": " : "", st.err_msg ? st.err_msg : "failed");
}

int py_start(struct err *e)
{
	PyPreConfig pre;
	PyPreConfig_InitIsolatedConfig(&pre);
	pre.utf8_mode = 1;
	PyStatus st = Py_PreInitialize(&pre);
	if (PyStatus_Exception(st))
		return status_err(st, e, "pre-initialisation");

	/* Isolated: no environment variables, no user site, no cwd in sys.path:
	 * nothing in the project directory can hijack an import. */
	if (native_register() < 0)
		return err_set(e, -ENOMEM, "python: cannot register the _psm_native module");
	PyConfig cfg;
	PyConfig_InitIsolatedConfig(&cfg);
	cfg.write_bytecode = 0;      /* the stdlib is read-only anyway */
	cfg.install_signal_handlers = 1; /* SIGXFSZ ignored -> EFBIG; SIGINT -> KeyboardInterrupt */
	cfg.site_import = 1;         /* Debian's site adds dist-packages */
	cfg.parse_argv = 0;
	st = PyConfig_SetString(&cfg, &cfg.home, L"" PSM_PY_PREFIX);
	if (!PyStatus_Exception(st))
		st = PyConfig_SetString(&cfg, &cfg.program_name, L"python3");
	if (!PyStatus_Exception(st)) {
		wchar_t *argv[] = { L"python-sandbox-mcp", NULL };
		st = PyConfig_SetArgv(&cfg, 1, argv);
	}
	if (!PyStatus_Exception(st))
		st = Py_InitializeFromConfig(&cfg);
	PyConfig_Clear(&cfg);
	if (PyStatus_Exception(st))
		return status_err(st, e, "initialisation");

	PyObject *code = Py_CompileString(bootstrap_py, "<psm-bootstrap>", Py_file_input);
	if (!code)
		goto pyerr;
	psm_module = PyImport_ExecCodeModule("_psm", code);
	Py_DECREF(code);
	if (!psm_module)
		goto pyerr;
	return 0;
pyerr:
	PyErr_Print();
	return err_set(e, -EINVAL, "python: the embedded bootstrap failed to load (see stderr)");
}

int py_call(const char *fn, const char *arg, char **out, size_t *len, int *is_bytes, struct err *e)
{
	*out = NULL;
	*len = 0;
	*is_bytes = 0;
	PyObject *res = PyObject_CallMethod(psm_module, fn, "s", arg);
	if (!res) {
		PyObject *type, *value, *tb;
		PyErr_Fetch(&type, &value, &tb);
		PyObject *s = value ? PyObject_Str(value) : NULL;
		const char *msg = s ? PyUnicode_AsUTF8(s) : NULL;
		err_set(e, -EINVAL, "python: _psm.%s failed: %s", fn, msg ? msg : "unknown error");
		Py_XDECREF(s);
		Py_XDECREF(type);
		Py_XDECREF(value);
		Py_XDECREF(tb);
		PyErr_Clear();
		return -EINVAL;
	}
	const char *p = NULL;
	Py_ssize_t n = 0;
	if (PyBytes_Check(res)) {
		p = PyBytes_AS_STRING(res);
		n = PyBytes_GET_SIZE(res);
		*is_bytes = 1;
	} else if (PyUnicode_Check(res)) {
		p = PyUnicode_AsUTF8AndSize(res, &n);
	}
	if (!p) {
		PyErr_Clear();
		Py_DECREF(res);
		return err_set(e, -EINVAL, "python: _psm.%s returned neither str nor bytes", fn);
	}
	/* Not xmalloc: in a session this copies what the cell made (a
	 * result, a thumbnail) under its memory limit, and a failure is that
	 * call's error (session.c: run_cell answers it), not the session's
	 * death. */
	*out = malloc((size_t)n + 1);
	if (!*out) {
		Py_DECREF(res);
		return err_set(e, -ENOMEM, "out of memory");
	}
	memcpy(*out, p, (size_t)n);
	(*out)[n] = 0;
	*len = (size_t)n;
	Py_DECREF(res);
	return 0;
}
