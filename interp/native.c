/* _psm_native: what the bootstrap needs from C (interp/native.h). */
#include "native.h"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "strcodes.h"

/* The system's xxhash.h, compiled in: no library to load inside the jail. */
#define XXH_INLINE_ALL
#include <xxhash.h>

/* label(buffer) -> 16 bytes: the XXH3-128 digest of a contiguous buffer,
 * with the interpreter's lock released while it runs (a saver hashes
 * gigabytes; measured in a session on the test machine at 6.0 to 6.6 GB/s,
 * against 1.2 for hashlib's sha256).  Not a security check: a saver names with it the
 * pieces of its state it believes the server holds already, and the
 * server takes those by name only from the pieces it wrote and tagged for
 * that session (supervisor/persist_save.c). */
static PyObject *native_label(PyObject *self, PyObject *arg)
{
	(void)self;
	Py_buffer b;
	if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
		return NULL;
	XXH128_hash_t h;
	Py_BEGIN_ALLOW_THREADS
	h = XXH3_128bits(b.buf, (size_t)b.len);
	Py_END_ALLOW_THREADS
	PyBuffer_Release(&b);
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, h);
	return PyBytes_FromStringAndSize((const char *)c.digest, sizeof c.digest);
}

static PyMethodDef native_methods[] = {
	{ "label", native_label, METH_O, "XXH3-128 digest of a contiguous buffer (16 bytes)" },
	{ "str_codes", strcodes_encode, METH_VARARGS, "an object array of str as codes into its distinct strings, or None" },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef native_module = {
	PyModuleDef_HEAD_INIT, "_psm_native", "python-sandbox-mcp's C helpers for its bootstrap", -1, native_methods,
	NULL, NULL, NULL, NULL,
};

static PyObject *native_init(void)
{
	return PyModule_Create(&native_module);
}

int native_register(void)
{
	return PyImport_AppendInittab("_psm_native", native_init);
}
