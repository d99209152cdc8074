/* The fingerprint of a virtual environment, for workspace trust (trust.h):
 * what an approval of a project's venv names besides its real path. */
#ifndef POLICY_TRUST_VENV_H
#define POLICY_TRUST_VENV_H

#include "../common/err.h"

/* One SHA-256 over the venv's pyvenv.cfg and every file that runs when its
 * site-packages are added (each *.pth, sitecustomize and usercustomize, and
 * the modules of the venv that a .pth line imports), by their paths and
 * contents.  *files (may be NULL; caller frees) lists them, one "  - PATH"
 * a line.  A file that is not a regular one (a FIFO would hang the reader),
 * or one over 1 MiB, is an error: such a venv cannot be approved. */
int trust_venv_fingerprint(const char *venv, char hex[65], char **files, struct err *e);

#endif
