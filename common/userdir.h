/* A directory of the user's own, outside every project, for state that a
 * project must never be able to write: the list of approved project
 * policies, keys.  It lives under $XDG_CONFIG_HOME/python-sandbox-mcp
 * (default ~/.config/python-sandbox-mcp).
 *
 * Whatever sits in such a directory is believed by the server, so it is only
 * read when nobody else could have written it: the directory and each file
 * must not be symlinks, must belong to the user the server runs as and must
 * not be writable by group or others.  Anything else is refused with a
 * message that says what to fix.  Files are replaced atomically (a
 * temporary file in the same directory, then rename), mode 0600, in a
 * directory of mode 0700. */
#ifndef COMMON_USERDIR_H
#define COMMON_USERDIR_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"

struct userdir {
	int fd;              /* the open directory, -1 when not open */
	char path[PATH_MAX]; /* its absolute path, for messages */
};

/* Writes the user's config directory for this program into out:
 * "$XDG_CONFIG_HOME/python-sandbox-mcp" when XDG_CONFIG_HOME is an absolute
 * path (a relative one is ignored, as the XDG spec says), else
 * "$HOME/.config/python-sandbox-mcp", else the passwd entry's home. */
int userdir_config_path(char *out, size_t size, struct err *e);

/* The same under $XDG_STATE_HOME (default ~/.local/state): machine-local
 * state such as the key that authenticates saved sessions. */
int userdir_state_path(char *out, size_t size, struct err *e);

/* Opens the directory at `path` (absolute).  With `create`, the directory
 * and its missing parents are made with mode 0700.  Returns 0 (ud->fd
 * open), 1 when it does not exist and !create (ud->fd = -1), or a negative
 * errno when it cannot be used: a symlink, not a directory, another
 * owner, writable by group or others. */
int userdir_open(struct userdir *ud, const char *path, bool create, struct err *e);

/* Reads the file `name` (a plain name) of the directory, at most `max`
 * bytes.  Returns 0 with *buf (NUL-terminated, caller frees) and *len, 1
 * when the file does not exist (*buf NULL), or a negative errno: a symlink,
 * not a regular file, another owner, writable by group or others, larger
 * than max. */
int userdir_read(const struct userdir *ud, const char *name, size_t max,
		 char **buf, size_t *len, struct err *e);

/* Replaces the file `name` with data, atomically: readers see the old file
 * or the new one, never a part.  The new file has mode 0600. */
int userdir_write(const struct userdir *ud, const char *name, const void *data,
		  size_t len, struct err *e);

/* Removes the file `name`; 0 also when it did not exist. */
int userdir_unlink(const struct userdir *ud, const char *name, struct err *e);

void userdir_close(struct userdir *ud);

#endif
