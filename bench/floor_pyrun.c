/* Floor 2: PyRun_String("1+1") in-process, in an embedded interpreter that
 * has imported the same stack as the zygote (numpy, pandas, matplotlib Agg).
 * Also times the same cell through a minimal notebook-like step (compile in
 * 'exec' mode plus eval of the last expression and repr), closer to what a
 * REPL must do.  Prints "median_us p99_us n" per line: raw, then repl. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>
#include <stdlib.h>

#include "timing.h"

static PyObject *globals, *step_fn, *step_src;

/* PyRun_String("1+1") as it is. */
static int raw(void *arg)
{
	(void)arg;
	PyObject *r = PyRun_String("1+1", Py_eval_input, globals, globals);
	Py_XDECREF(r);
	return r ? 0 : -1;
}

/* The same through the REPL step (_step below). */
static int repl(void *arg)
{
	(void)arg;
	PyObject *r = PyObject_CallFunctionObjArgs(step_fn, step_src, globals, NULL);
	Py_XDECREF(r);
	return r ? 0 : -1;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20000;
	if (n < 10)
		n = 10;
	PyConfig cfg;
	PyConfig_InitIsolatedConfig(&cfg);
	PyStatus st = Py_InitializeFromConfig(&cfg);
	PyConfig_Clear(&cfg);
	if (PyStatus_Exception(st))
		Py_ExitStatusException(st);
	setenv("MPLBACKEND", "Agg", 1);
	if (PyRun_SimpleString("import numpy, pandas, matplotlib.pyplot\n") != 0)
		return 1;
	PyObject *main = PyImport_AddModule("__main__");
	globals = PyModule_GetDict(main);
	if (time_steps(n, raw, NULL) < 0)
		return 1;
	/* A REPL step: parse as a module, split the last expression, run, repr. */
	if (PyRun_SimpleString(
		    "import ast\n"
		    "def _step(src, g):\n"
		    "    tree = ast.parse(src, '<cell>', 'exec')\n"
		    "    last = None\n"
		    "    if tree.body and isinstance(tree.body[-1], ast.Expr):\n"
		    "        last = ast.Expression(tree.body.pop().value)\n"
		    "    exec(compile(tree, '<cell>', 'exec'), g)\n"
		    "    if last is not None:\n"
		    "        v = eval(compile(last, '<cell>', 'eval'), g)\n"
		    "        return None if v is None else repr(v)\n") != 0)
		return 1;
	step_fn = PyDict_GetItemString(globals, "_step");
	step_src = PyUnicode_FromString("1+1");
	if (time_steps(n, repl, NULL) < 0)
		return 1;
	Py_DECREF(step_src);
	return Py_FinalizeEx() < 0 ? 1 : 0;
}
