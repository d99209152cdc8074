/* Object arrays of strings as codes for a saver (strcodes.h). */
#include "strcodes.h"

#include "npyapi.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* The distinct values of a run (strings, and the missing values among
 * them: None and floats such as NaN), by value: open addressing over their
 * codes (0: free, else code + 1) beside 32 bits of each one's hash; at
 * most half the slots used.  8 bytes a slot, and at most a quarter as
 * many distinct strings as elements (then pickle is as good): the table
 * stays within 8 bytes an element. */
struct table {
	uint32_t *code;
	uint32_t *hash;
	size_t mask;
};

/* Whether two elements are the same value: strings by their characters,
 * floats by their bits (every NaN and -0.0 stay as they were), None by
 * itself. */
static bool same_value(PyObject *a, PyObject *b)
{
	if (a == b)
		return true;
	if (Py_TYPE(a) != Py_TYPE(b))
		return false;
	if (PyFloat_CheckExact(a)) {
		double x = PyFloat_AS_DOUBLE(a), y = PyFloat_AS_DOUBLE(b);
		return memcmp(&x, &y, sizeof x) == 0;
	}
	if (!PyUnicode_CheckExact(a))
		return false;
	/* Ready strings are canonical (PEP 393): equal ones have one kind. */
	Py_ssize_t n = PyUnicode_GET_LENGTH(a);
	if (n != PyUnicode_GET_LENGTH(b) || PyUnicode_KIND(a) != PyUnicode_KIND(b))
		return false;
	return memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * PyUnicode_KIND(a)) == 0;
}

/* An element's hash in *h: a string's own (cached in it), a float's from
 * its bits (Python hashes each NaN object apart), None's a constant.  1
 * for an element of any other kind, -1 with an exception. */
static int value_hash(PyObject *o, Py_hash_t *h)
{
	if (PyUnicode_CheckExact(o)) {
#if PY_VERSION_HEX < 0x030C0000
		/* A string made by the old API may not be in its compact form. */
		if (PyUnicode_READY(o) < 0)
			return -1;
#endif
		*h = PyObject_Hash(o);
		return *h == -1 ? -1 : 0;
	}
	if (PyFloat_CheckExact(o)) {
		double x = PyFloat_AS_DOUBLE(o);
		uint64_t v;
		memcpy(&v, &x, sizeof v);
		v ^= v >> 31;
		v *= 0x9e3779b97f4a7c15u;
		*h = (Py_hash_t)(v ^ (v >> 29));
		return 0;
	}
	if (o == Py_None) {
		*h = 0x5bd1e995;
		return 0;
	}
	return 1;
}

static int table_grow(struct table *t)
{
	size_t slots = t->mask ? (t->mask + 1) * 2 : 64;
	uint32_t *code = PyMem_Calloc(slots, sizeof *code), *hash = PyMem_Calloc(slots, sizeof *hash);
	if (!code || !hash) {
		PyMem_Free(code);
		PyMem_Free(hash);
		PyErr_NoMemory();
		return -1;
	}
	for (size_t i = 0; t->mask && i <= t->mask; i++) {
		if (!t->code[i])
			continue;
		size_t j = t->hash[i] & (slots - 1);
		while (code[j])
			j = (j + 1) & (slots - 1);
		code[j] = t->code[i];
		hash[j] = t->hash[i];
	}
	PyMem_Free(t->code);
	PyMem_Free(t->hash);
	t->code = code;
	t->hash = hash;
	t->mask = slots - 1;
	return 0;
}

/* codes (n elements of *width bytes) widened to `to` bytes each, the
 * first `done` of them converted. */
static PyObject *widen(PyObject *codes, Py_ssize_t n, Py_ssize_t done, int from, int to)
{
	PyObject *w = PyBytes_FromStringAndSize(NULL, n * to);
	if (!w)
		return NULL;
	const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(codes);
	unsigned char *d = (unsigned char *)PyBytes_AS_STRING(w);
	for (Py_ssize_t i = 0; i < done; i++) {
		uint32_t v = from == 1 ? s[i] : ((const uint16_t *)(const void *)s)[i];
		if (to == 2)
			((uint16_t *)(void *)d)[i] = (uint16_t)v;
		else
			((uint32_t *)(void *)d)[i] = v;
	}
	return w;
}

static void put(PyObject *codes, int width, Py_ssize_t i, uint32_t v)
{
	unsigned char *d = (unsigned char *)PyBytes_AS_STRING(codes);
	if (width == 1)
		d[i] = (unsigned char)v;
	else if (width == 2)
		((uint16_t *)(void *)d)[i] = (uint16_t)v;
	else
		((uint32_t *)(void *)d)[i] = v;
}

/* One run: (distinct, codes, width), None when it does not qualify, NULL
 * with an exception. */
static PyObject *encode_run(PyObject *const *el, Py_ssize_t n)
{
	PyObject *distinct = PyList_New(0), *codes = PyBytes_FromStringAndSize(NULL, n), *out = NULL;
	struct table t = { 0 };
	int width = 1;
	if (!distinct || !codes || table_grow(&t) < 0)
		goto done;
	/* The codes of the objects seen last, by address: the array holds a
	 * reference to each of its elements for the whole pass (the
	 * interpreter's lock is held), so an address seen is the same object,
	 * and its code, without reading the object.  A column of a few
	 * distinct strings is mostly the same few objects: the pass then reads
	 * the array alone (3 times faster at 4M rows). */
	struct {
		PyObject *obj;
		uint32_t code;
	} seen[256] = { { 0 } };
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *o = el[i];
		uintptr_t a = (uintptr_t)o;
		size_t m = ((a >> 4) ^ (a >> 12)) & 255;
		if (o && seen[m].obj == o) {
			put(codes, width, i, seen[m].code);
			continue;
		}
		Py_hash_t h = 0;
		int kind = o ? value_hash(o, &h) : 1;
		if (kind > 0) {
			out = Py_NewRef(Py_None);
			goto done;
		}
		if (kind < 0)
			goto done;
		size_t j = (size_t)h & t.mask;
		uint32_t c = 0;
		while (t.code[j]) {
			PyObject *d = PyList_GET_ITEM(distinct, t.code[j] - 1);
			if (t.hash[j] == (uint32_t)h && same_value(d, o)) {
				c = t.code[j];
				break;
			}
			j = (j + 1) & t.mask;
		}
		if (!c) {
			Py_ssize_t k = PyList_GET_SIZE(distinct);
			if (k >= n / 4 + 1) {
				out = Py_NewRef(Py_None);
				goto done;
			}
			if (PyList_Append(distinct, o) < 0)
				goto done;
			c = (uint32_t)k + 1;
			t.code[j] = c;
			t.hash[j] = (uint32_t)h;
			int need = k < 256 ? 1 : k < 65536 ? 2 : 4;
			if (need > width) {
				PyObject *w = widen(codes, n, i, width, need);
				if (!w)
					goto done;
				Py_SETREF(codes, w);
				width = need;
			}
			if ((size_t)(k + 1) * 2 > t.mask + 1 && table_grow(&t) < 0)
				goto done;
		}
		seen[m].obj = o;
		seen[m].code = c - 1;
		put(codes, width, i, c - 1);
	}
	out = Py_BuildValue("(OOi)", distinct, codes, width);
done:
	PyMem_Free(t.code);
	PyMem_Free(t.hash);
	Py_XDECREF(distinct);
	Py_XDECREF(codes);
	return out;
}

PyObject *strcodes_encode(PyObject *self, PyObject *args)
{
	(void)self;
	PyObject *arr;
	Py_ssize_t segments;
	if (!PyArg_ParseTuple(args, "On", &arr, &segments))
		return NULL;
	/* NumPy's table of functions, fetched once (a failed import is a
	 * NumPy this interpreter cannot use: pickle's own form then). */
	static bool ready;
	if (!ready) {
		if (_import_array() < 0) {
			PyErr_Clear();
			Py_RETURN_NONE;
		}
		ready = true;
	}
	if (!PyArray_CheckExact(arr))
		Py_RETURN_NONE;
	PyArrayObject *a = (PyArrayObject *)arr;
	Py_ssize_t n = PyArray_SIZE(a);
	if (PyArray_TYPE(a) != NPY_OBJECT || !(PyArray_FLAGS(a) & (NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_F_CONTIGUOUS)) ||
	    segments < 1 || n < segments || n % segments)
		Py_RETURN_NONE;
	PyObject *const *el = (PyObject *const *)PyArray_DATA(a);
	Py_ssize_t run = n / segments;
	PyObject *list = PyList_New(segments);
	if (!list)
		return NULL;
	for (Py_ssize_t s = 0; s < segments; s++) {
		PyObject *r = encode_run(el + s * run, run);
		if (!r || r == Py_None) {
			Py_DECREF(list);
			return r;
		}
		PyList_SET_ITEM(list, s, r);
	}
	return list;
}
