/* NumPy's C API for this folder's files (bigmem.c, strcodes.c), each with
 * its own table of NumPy's functions (fetched by _import_array).  NumPy's
 * headers are not written for this project's warnings. */
#ifndef INTERP_NPYAPI_H
#define INTERP_NPYAPI_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcast-qual"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#pragma GCC diagnostic ignored "-Wundef"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#pragma GCC diagnostic ignored "-Wpedantic"
#define NPY_NO_DEPRECATED_API NPY_1_22_API_VERSION
#include <numpy/arrayobject.h>
#pragma GCC diagnostic pop

#endif
