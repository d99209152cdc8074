/* _psm_native: what the bootstrap needs from C (interp/native.h). */
#include "native.h"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "strcodes.h"
#include "../common/pdir.h"
#include "../common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The value of field (e.g. "\nmnt_id:") in an fdinfo text, as the bytes up
 * to its line's end; "" when absent. */
static void field_of(const char *text, const char *field, char *out, size_t n)
{
	const char *p = strstr(text, field);
	size_t k = 0;
	if (p)
		for (p += strlen(field); *p && *p != '\n' && k + 1 < n; p++)
			out[k++] = *p;
	out[k] = '\0';
}

/* This process's descriptors as /proc/self/fdinfo shows them: {fd: the
 * first four lines of its fdinfo} (offset, flags, mount, inode), those on
 * /proc's own mount left out (this listing's among them).  None when the
 * listing cannot be read whole; NULL with a Python exception. */
static PyObject *view_fds(void)
{
	struct pdir *d = PyMem_Malloc(sizeof *d);
	if (!d)
		return PyErr_NoMemory();
	if (pdir_open(d, AT_FDCWD, "/proc/self/fdinfo") < 0) {
		PyMem_Free(d);
		return Py_NewRef(Py_None);
	}
	/* /proc's mount, from the listing's own descriptor: read once, as
	 * the session cannot mount (three system calls of each view). */
	static char proc_mnt[32];
	char buf[513];
	if (!proc_mnt[0]) {
		char name_d[16];
		snprintf(name_d, sizeof name_d, "%d", d->fd);
		if (read_small_at(d->fd, name_d, buf, sizeof buf) > 0)
			field_of(buf, "\nmnt_id:", proc_mnt, sizeof proc_mnt);
	}
	PyObject *fds = proc_mnt[0] ? PyDict_New() : NULL;
	for (const char *name; fds && (name = pdir_next(d));) {
		char *end;
		long fd = strtol(name, &end, 10);
		if (fd == d->fd)
			continue; /* this listing's own: on /proc */
		ssize_t k = end != name && !*end ? read_small_at(d->fd, name, buf, sizeof buf) : -1;
		if (k <= 0)
			continue; /* closed since the listing */
		char mnt[32];
		field_of(buf, "\nmnt_id:", mnt, sizeof mnt);
		if (strcmp(mnt, proc_mnt) == 0)
			continue;
		size_t len = 0;
		for (int lines = 0; len < (size_t)k && lines < 4;)
			if (buf[len++] == '\n')
				lines++;
		PyObject *key = PyLong_FromLong(fd), *val = PyBytes_FromStringAndSize(buf, (Py_ssize_t)len);
		int rc = key && val ? PyDict_SetItem(fds, key, val) : -1;
		Py_XDECREF(key);
		Py_XDECREF(val);
		if (rc < 0) {
			Py_CLEAR(fds);
			pdir_close(d);
			PyMem_Free(d);
			return NULL;
		}
	}
	bool whole = fds && d->err == 0;
	pdir_close(d);
	PyMem_Free(d);
	if (!whole) {
		Py_XDECREF(fds);
		return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
	}
	return fds;
}

/* self_view() -> (wchar or None, {fd: bytes} or None): what this process's
 * /proc shows of its writes (/proc/self/io's wchar) and of its descriptors
 * (view_fds), for a server that cannot read them from outside (no
 * CAP_SYS_PTRACE over an undumpable session): the session's own word
 * stands in, read before and after each cell (bootstrap, _self_view).
 *
 * In C for its cost: the same reading through os.open and os.listdir took
 * about 110 us a view in a warm session (each open passes the bootstrap's
 * audit hooks), two views a cell: most of what a warm `1+1` cost over
 * checkpoints off in a server without CAP_SYS_PTRACE.  No audit event is
 * raised here, so the reading is no event of the cell's either. */
static PyObject *native_self_view(PyObject *self, PyObject *unused)
{
	(void)self;
	(void)unused;
	/* An undumpable process of an unprivileged user may not read its own
	 * io; refused once, it stays refused (its copies too: the same
	 * credentials), and is not asked again. */
	static bool io_refused;
	char buf[4096];
	PyObject *wchar = NULL;
	ssize_t n = io_refused ? -EACCES : read_small_at(AT_FDCWD, "/proc/self/io", buf, sizeof buf);
	if (n == -EACCES || n == -EPERM)
		io_refused = true;
	const char *w = n > 0 ? strstr(buf, "wchar:") : NULL;
	if (w) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(w + 6, &end, 10);
		if (end != w + 6 && errno == 0 && !(wchar = PyLong_FromUnsignedLongLong(v)))
			return NULL;
	}
	if (!wchar)
		wchar = Py_NewRef(Py_None);
	PyObject *fds = view_fds();
	if (!fds) {
		Py_DECREF(wchar);
		return NULL;
	}
	PyObject *out = PyTuple_Pack(2, wchar, fds);
	Py_DECREF(wchar);
	Py_DECREF(fds);
	return out;
}

static PyMethodDef native_methods[] = {
	{ "label", native_label, METH_O, "XXH3-128 digest of a contiguous buffer (16 bytes)" },
	{ "self_view", native_self_view, METH_NOARGS, "(wchar or None, {fd: fdinfo's first four lines} or None) of this process" },
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
