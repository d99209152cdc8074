/* Floor 2: PyRun_String("1+1") in-process, in an embedded interpreter that
 * has imported the same stack as the zygote (numpy, pandas, matplotlib Agg).
 * Also times the same cell through a minimal notebook-like step (compile in
 * 'exec' mode plus eval of the last expression and repr), closer to what a
 * REPL must do.  Prints "median_us p99_us n" per line: raw, then repl. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void report(double *t, int n)
{
	qsort(t, (size_t)n, sizeof *t, cmp);
	printf("%.3f %.3f %d\n", t[n / 2], t[(int)(n * 0.99)], n);
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
	PyObject *g = PyModule_GetDict(main);
	double *t = malloc(sizeof *t * (size_t)n);
	for (int i = 0; i < n + 100; i++) {
		double a = now_us();
		PyObject *r = PyRun_String("1+1", Py_eval_input, g, g);
		if (!r)
			return 1;
		Py_DECREF(r);
		if (i >= 100)
			t[i - 100] = now_us() - a;
	}
	report(t, n);
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
	PyObject *step = PyDict_GetItemString(g, "_step");
	PyObject *src = PyUnicode_FromString("1+1");
	for (int i = 0; i < n + 100; i++) {
		double a = now_us();
		PyObject *r = PyObject_CallFunctionObjArgs(step, src, g, NULL);
		if (!r)
			return 1;
		Py_DECREF(r);
		if (i >= 100)
			t[i - 100] = now_us() - a;
	}
	report(t, n);
	Py_DECREF(src);
	free(t);
	return Py_FinalizeEx() < 0 ? 1 : 0;
}
