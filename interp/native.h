/* _psm_native, a module built into the embedded interpreter for the
 * bootstrap (interp/bootstrap): C helpers that Python would do slowly. */
#ifndef INTERP_NATIVE_H
#define INTERP_NATIVE_H

/* Registers the module; before the interpreter starts.  0, or -1. */
int native_register(void);

#endif
