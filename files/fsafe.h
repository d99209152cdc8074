/* Safe file access beneath the workspace for the trusted side.
 *
 * Sandboxed code can plant symlinks (and hard links, and FIFOs) in the
 * workspace.  Every file the server itself opens there (logs, summaries,
 * images it returns, listed or verified files, resources) is resolved beneath
 * the workspace directory fd with no symlink followed anywhere on the path
 * (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
 * falling back to an O_NOFOLLOW walk component by component on kernels
 * without openat2). */
#ifndef FILES_FSAFE_H
#define FILES_FSAFE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "../common/err.h"

/* The workspace as the server sees it. */
struct workspace {
	int dirfd;       /* O_PATH|O_DIRECTORY fd of the workspace, owned */
	char *abs;       /* absolute, canonical path of the workspace */
	char *root;      /* absolute, canonical path of ROOT */
	char *display;   /* how Python code names the workspace: path relative
	                  * to ROOT when inside it ("workspace"), else abs */
};

/* Creates the workspace (and outputs/ inside it) when missing, opens it.
 * root must exist; a relative workspace_path is taken relative to root.
 * On failure ws is left closed (ws_close on it is harmless). */
int ws_open(struct workspace *ws, const char *root, const char *workspace_path, struct err *e);
void ws_close(struct workspace *ws);

/* Maps a path as Python code names it (relative paths are relative to ROOT,
 * Python's working directory: "workspace/outputs/a.png"; absolute paths as
 * they are) to a normalised path relative to the workspace ("outputs/a.png",
 * or "" for the workspace itself).  Rejects paths that leave the workspace
 * lexically ("..", elsewhere) with a message that says paths must lie under
 * the workspace and gives the form to use. */
int ws_relpath(const struct workspace *ws, const char *user_path, char *out, size_t outsz, struct err *e);

/* The reverse: "outputs/a.png" -> "workspace/outputs/a.png", the form
 * every tool shows the model: escaped as common/escape.h's esc_name says
 * when the name holds controls, invisible characters or bytes that are not
 * UTF-8 ("workspace/raw\udcff.txt", the body of a Python string literal
 * that opens it). */
int ws_display_path(const struct workspace *ws, const char *rel, char *out, size_t outsz);

/* ws_relpath of a path as the model sends it back: a path with a backslash
 * is first unescaped (unesc_name), so that what ws_display_path showed
 * names its file again. */
/* Said next to a list of names when one of them is escaped. */
#define NAMES_ESCAPED "(a name written with \\ escapes holds control characters, invisible characters or bytes that are " \
		      "not UTF-8: it is the body of a Python string literal, so open(\"that name\") opens the file, and the " \
		      "tools take it as written)"

int ws_relpath_shown(const struct workspace *ws, const char *shown, char *out, size_t outsz, struct err *e);

/* The file:// URI of rel, every byte but the unreserved characters and '/'
 * percent-encoded (RFC 3986), so any name, UTF-8 or not, is exact.
 * malloc'd. */
char *ws_file_uri(const struct workspace *ws, const char *rel);

/* Iterates the components of a path, skipping empty and "." ones: returns
 * the next component (its length in *len) and advances *cursor, or NULL at
 * the end.  ".." is returned as it is: callers decide. */
const char *path_next(const char **cursor, size_t *len);

/* Opens rel (relative to the workspace) with no symlink followed.  flags
 * as open(2); O_NOFOLLOW|O_CLOEXEC are always added.  Returns fd or -errno
 * (-ELOOP/-EXDEV for a symlink on the way).  Unless O_PATH is asked, the
 * result is a regular file (or a directory when O_DIRECTORY is asked):
 * -EINVAL for a FIFO, socket or device, -EISDIR for an unexpected
 * directory, -EMLINK for a regular file with more than one hard link. */
int ws_openat(const struct workspace *ws, const char *rel, int flags, mode_t mode);
/* The same, and the opened file's stat in *out (the one the checks above
 * judged: no second fstat for a caller that needs it). */
int ws_openat_st(const struct workspace *ws, const char *rel, int flags, mode_t mode, struct stat *out);

/* Fills e with a sentence for an error returned by ws_openat on rel (what
 * was found and what to do) and returns code. */
int ws_openat_err(struct err *e, int code, const char *rel);

/* For tests: false forces the O_NOFOLLOW walk used on kernels without
 * openat2(2); true (the default) uses openat2 when the kernel has it. */
void ws_set_openat2(bool on);

/* mkdir -p of rel beneath the workspace, no symlinks followed. */
int ws_mkdirs(const struct workspace *ws, const char *rel, struct err *e);

/* Creates a new file for writing under rel (".logs/default-3.stdout.log")
 * or, when that name is taken, under the first free one of NAME.1.log ...
 * NAME.99.log; parent directories are made.  rel is updated to the name
 * used.  An existing file is never written through, whatever it is (a
 * symlink the code planted, a hard link): O_CREAT|O_EXCL.  Returns the fd
 * or -errno. */
int ws_create_new(const struct workspace *ws, char *rel, size_t relsz, struct err *e);

/* Writes a whole file beneath the workspace, atomically (temp file then
 * rename), creating parent directories. */
int ws_write_file(const struct workspace *ws, const char *rel, const void *buf, size_t len, struct err *e);

/* Reads a regular file beneath the workspace, up to max bytes (-EFBIG when
 * larger).  *out is malloc'd (NUL-terminated, not counted in *len). */
int ws_read_file(const struct workspace *ws, const char *rel, size_t max, unsigned char **out, size_t *len, struct err *e);

#endif
