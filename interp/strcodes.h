/* A NumPy object array of strings as codes into a table of its distinct
 * strings, for a saver (interp/bootstrap/saved.py): pickle writes such an
 * array one element at a time, in the saver's CPU, at every save; codes
 * are a plain buffer that pickle sends out of band and that the saved
 * pieces' labels find unchanged.  The saver runs in a throw-away fork of
 * a checkpoint, inside the jail: nothing here is trusted by the server. */
#ifndef INTERP_STRCODES_H
#define INTERP_STRCODES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* str_codes(array, segments) -> None, or a list of one
 * (distinct strings, codes, bytes per code) per segment.  The array's
 * elements, in memory order, cut into `segments` equal runs (a pandas
 * block's columns are the rows of a C-ordered array: each its own run, so
 * that a change to one column leaves the others' codes as they were).
 * None when the array is not an exact ndarray of dtype object, contiguous,
 * whose every element is an exact str, an exact float or None (pandas
 * marks a missing string with NaN or None: such a column is as common as
 * a full one), or when a run has more distinct values than a quarter of
 * its length (then pickle's own form is about as small, and the table of
 * distinct values would cost more memory).  Floats are told apart by
 * their bits: each NaN, and -0.0, comes back as it was (as one object per
 * distinct value of a run, as the strings do). */
PyObject *strcodes_encode(PyObject *self, PyObject *args);

#endif
