/* Safe file access beneath the workspace (see fsafe.h).
 *
 * The threat: code in the sandbox owns the workspace and can plant anything
 * there while the server looks at it: a symlink named outputs/plot.png that
 * points at ~/.ssh/id_ed25519 or /etc/passwd, a symlinked directory in the
 * middle of a path, a FIFO where a log should be, a hard link to a file of
 * the user's outside the workspace.  The server runs outside the jail with
 * the user's full rights, so every open here resolves beneath the workspace
 * fd, never follows a symlink, never blocks, and only ever hands back a
 * regular file or a directory. */
#include "fsafe.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/escape.h"
#include "../common/util.h"

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

/* 1: try openat2; 0: the kernel has none (ENOSYS seen) or a test asked. */
const char *path_next(const char **cursor, size_t *len)
{
	const char *s = *cursor;
	for (;;) {
		while (*s == '/')
			s++;
		const char *c = s;
		while (*s && *s != '/')
			s++;
		size_t cl = (size_t)(s - c);
		if (cl == 0) {
			*cursor = s;
			return NULL;
		}
		if (cl == 1 && c[0] == '.')
			continue;
		*cursor = s;
		*len = cl;
		return c;
	}
}

static atomic_int g_openat2 = 1;

void ws_set_openat2(bool on)
{
	atomic_store(&g_openat2, on ? 1 : 0);
}

static void ws_init(struct workspace *ws)
{
	ws->dirfd = -1;
	ws->abs = ws->root = ws->display = NULL;
}

void ws_close(struct workspace *ws)
{
	if (!ws)
		return;
	if (ws->dirfd >= 0)
		close(ws->dirfd);
	free(ws->abs);
	free(ws->root);
	free(ws->display);
	ws_init(ws);
}


int ws_open(struct workspace *ws, const char *root, const char *workspace_path, struct err *e)
{
	char full[PATH_MAX];
	int rc;

	ws_init(ws);
	if (!root || !*root || !workspace_path || !*workspace_path)
		return err_set(e, -EINVAL, "root and workspace paths must not be empty");
	ws->root = realpath(root, NULL);
	if (!ws->root)
		return err_sys(e, -errno, "root directory %s cannot be resolved: create it or pass an existing directory", root);

	if (workspace_path[0] == '/')
		rc = snprintf(full, sizeof full, "%s", workspace_path);
	else
		rc = snprintf(full, sizeof full, "%s/%s", ws->root, workspace_path);
	if (rc < 0 || (size_t)rc >= sizeof full) {
		rc = err_set(e, -ENAMETOOLONG, "workspace path is too long");
		goto fail;
	}
	rc = mkdir_all(full, 0755, e);
	if (rc < 0)
		goto fail;
	ws->abs = realpath(full, NULL);
	if (!ws->abs) {
		rc = err_sys(e, -errno, "workspace %s cannot be resolved", full);
		goto fail;
	}
	/* A workspace of "/" would make "beneath the workspace" mean anything. */
	if (strcmp(ws->abs, "/") == 0) {
		rc = err_set(e, -EINVAL, "the workspace cannot be /: choose a dedicated directory such as ROOT/workspace");
		goto fail;
	}
	ws->dirfd = open(ws->abs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (ws->dirfd < 0) {
		rc = err_sys(e, -errno, "cannot open the workspace %s (is it a directory?)", ws->abs);
		goto fail;
	}

	size_t rl = strlen(ws->root);
	if (strcmp(ws->abs, ws->root) == 0)
		ws->display = xstrdup(".");
	else if (strcmp(ws->root, "/") == 0)
		ws->display = xstrdup(ws->abs + 1);
	else if (strncmp(ws->abs, ws->root, rl) == 0 && ws->abs[rl] == '/')
		ws->display = xstrdup(ws->abs + rl + 1);
	else
		ws->display = xstrdup(ws->abs);

	rc = ws_mkdirs(ws, "outputs", e);
	if (rc < 0)
		goto fail;
	return 0;
fail:
	ws_close(ws);
	return rc;
}

int ws_relpath(const struct workspace *ws, const char *user_path, char *out, size_t outsz, struct err *e)
{
	char full[PATH_MAX * 2], norm[PATH_MAX * 2];
	size_t n = 0;
	int rc;

	if (!user_path || !*user_path)
		return err_set(e, -EINVAL, "the path is empty: name a file under the workspace, such as '%s/outputs/plot.png'",
			       ws->display);
	if (strlen(user_path) >= PATH_MAX)
		return err_set(e, -ENAMETOOLONG, "the path is longer than %d bytes", PATH_MAX - 1);
	/* Relative paths are relative to ROOT, the cwd of the Python code. */
	if (user_path[0] == '/')
		rc = snprintf(full, sizeof full, "%s", user_path);
	else
		rc = snprintf(full, sizeof full, "%s/%s", ws->root, user_path);
	if (rc < 0 || (size_t)rc >= sizeof full)
		return err_set(e, -ENAMETOOLONG, "the path is too long");

	/* Lexical normalisation: "." and empty components vanish, ".." drops
	 * the previous component.  No symlink is consulted; that is safe because
	 * whatever we return is then opened with no symlink followed, so the
	 * lexical answer is the file the server touches. */
	norm[n++] = '/';
	const char *s = full, *c;
	size_t cl;
	while ((c = path_next(&s, &cl))) {
		if (cl == 2 && c[0] == '.' && c[1] == '.') {
			while (n > 1 && norm[n - 1] != '/')
				n--;
			if (n > 1)
				n--; /* the slash before the dropped component */
			continue;
		}
		if (n > 1)
			norm[n++] = '/';
		memcpy(norm + n, c, cl);
		n += cl;
	}
	norm[n] = '\0';

	size_t al = strlen(ws->abs);
	const char *rel;
	if (strcmp(norm, ws->abs) == 0)
		rel = "";
	else if (strncmp(norm, ws->abs, al) == 0 && norm[al] == '/')
		rel = norm + al + 1;
	else
		return err_set(e, -EXDEV,
			       "'%s' is outside the workspace (it resolves to %s): paths must lie under %s; "
			       "use a path such as '%s/outputs/plot.png'",
			       user_path, norm, ws->abs, ws->display);
	if (strlen(rel) >= outsz)
		return err_set(e, -ENAMETOOLONG, "the path '%s' is too long", user_path);
	memcpy(out, rel, strlen(rel) + 1);
	return 0;
}

int ws_display_path(const struct workspace *ws, const char *rel, char *out, size_t outsz)
{
	char raw[PATH_MAX * 2];
	int rc;

	if (strcmp(ws->display, ".") == 0)
		rc = snprintf(raw, sizeof raw, "%s", *rel ? rel : ".");
	else if (*rel)
		rc = snprintf(raw, sizeof raw, "%s/%s", ws->display, rel);
	else
		rc = snprintf(raw, sizeof raw, "%s", ws->display);
	if (rc < 0 || (size_t)rc >= sizeof raw)
		return -ENAMETOOLONG;
	/* Names are the sandbox's text: shown escaped (esc_name), so none
	 * fakes a line or hides characters, and each opens as shown. */
	rc = esc_name(out, outsz, raw);
	return rc < 0 ? rc : 0;
}

int ws_relpath_shown(const struct workspace *ws, const char *shown, char *out, size_t outsz, struct err *e)
{
	char raw[PATH_MAX];
	if (shown && strchr(shown, '\\')) {
		int rc = unesc_name(raw, sizeof raw, shown);
		if (rc < 0)
			return err_set(e, rc, "the path holds a \\ escape that names no file (\\x00, or a lone \\ud800 to \\udc7f): "
				       "write it as list_artifacts shows it");
		shown = raw;
	}
	return ws_relpath(ws, shown, out, outsz, e);
}

char *ws_file_uri(const struct workspace *ws, const char *rel)
{
	char path[PATH_MAX * 2 + 8];
	snprintf(path, sizeof path, "%s%s%s", ws->abs, *rel ? "/" : "", rel);
	size_t n = strlen(path);
	char *out = xmalloc(7 + n * 3 + 1);
	memcpy(out, "file://", 7);
	char *o = out + 7;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)path[i];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~/", c)) {
			*o++ = (char)c;
		} else {
			sprintf(o, "%%%02X", c);
			o += 3;
		}
	}
	*o = 0;
	return out;
}

/* rel must be relative and must not name "..": both openat2 (with
 * RESOLVE_BENEATH) and the walk would refuse an escape anyway, but refusing
 * up front keeps the two paths identical. */
static int check_rel(const char *rel)
{
	if (!rel)
		return -EINVAL;
	if (rel[0] == '/')
		return -EXDEV;
	if (strlen(rel) >= PATH_MAX)
		return -ENAMETOOLONG;
	const char *s = rel, *c;
	size_t cl;
	while ((c = path_next(&s, &cl)))
		if (cl == 2 && c[0] == '.' && c[1] == '.')
			return -EXDEV;
	return 0;
}

/* Opens a directory component with no symlink followed: O_PATH|O_NOFOLLOW
 * hands back the symlink itself when there is one, which we then refuse. */
static int open_dir_component(int cur, const char *name)
{
	struct stat st;
	int fd = openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode)) {
		close(fd);
		return S_ISLNK(st.st_mode) ? -ELOOP : -ENOTDIR;
	}
	return fd;
}

/* The fallback for kernels without openat2 (before 5.6, or a seccomp
 * profile that answers ENOSYS): component by component, each opened
 * O_NOFOLLOW relative to the fd of the one before, so a symlink anywhere on
 * the path (the ~/.ssh attack, or a symlinked directory in the middle)
 * stops the walk instead of being followed. */
static int walk_open(int dirfd, const char *rel, int flags, mode_t mode)
{
	char name[NAME_MAX + 1];
	int cur = dirfd, owned = -1, fd;
	const char *s = rel, *c, *next;
	size_t cl, nl;

	c = path_next(&s, &cl);
	if (!c) {
		c = ".";
		cl = 1;
	}
	for (;;) {
		const char *peek = s;
		next = path_next(&peek, &nl);
		if (cl > NAME_MAX) {
			fd = -ENAMETOOLONG;
			break;
		}
		memcpy(name, c, cl);
		name[cl] = '\0';
		if (!next) { /* the last component: opened with the caller's flags */
			fd = openat(cur, name, flags, mode);
			if (fd < 0)
				fd = -errno;
			break;
		}
		fd = open_dir_component(cur, name);
		if (fd < 0)
			break;
		if (owned >= 0)
			close(owned);
		cur = owned = fd;
		c = next;
		cl = nl;
		s = peek;
	}
	if (owned >= 0)
		close(owned);
	return fd;
}

static int open_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
	if (atomic_load(&g_openat2)) {
		struct open_how how = {
			.flags = (uint64_t)(unsigned)flags,
			/* openat2 refuses a mode without O_CREAT/O_TMPFILE. */
			.mode = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? mode : 0,
			.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
		};
		for (int tries = 0; tries < 8; tries++) {
			long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
			if (fd >= 0)
				return (int)fd;
			/* EAGAIN: a concurrent rename raced with RESOLVE_BENEATH's
			 * check; the kernel asks us to retry. */
			if (errno == EAGAIN)
				continue;
			if (errno != ENOSYS)
				return -errno;
			atomic_store(&g_openat2, 0);
			break;
		}
		if (atomic_load(&g_openat2))
			return -EAGAIN;
	}
	return walk_open(dirfd, path, flags, mode);
}

int ws_openat(const struct workspace *ws, const char *rel, int flags, mode_t mode)
{
	return ws_openat_st(ws, rel, flags, mode, NULL);
}

int ws_openat_st(const struct workspace *ws, const char *rel, int flags, mode_t mode, struct stat *out)
{
	int rc = check_rel(rel);
	bool want_nonblock = flags & O_NONBLOCK;
	bool want_trunc = (flags & O_TRUNC) && !(flags & O_EXCL);
	struct stat st;

	if (rc < 0)
		return rc;
	flags |= O_NOFOLLOW | O_CLOEXEC;
	if (!(flags & O_PATH)) {
		/* A FIFO planted where the server expects a file would block
		 * open(2) (and read(2)) forever and hang the whole server:
		 * open non-blocking, then refuse anything that is not a
		 * regular file or an asked-for directory. */
		flags |= O_NONBLOCK;
		/* Truncation happens inside open(2), before we could look at
		 * what we opened: a hard link to ~/.bashrc would be emptied.
		 * Truncate only after the checks below. */
		flags &= ~O_TRUNC;
	}
	int fd = open_beneath(ws->dirfd, *rel ? rel : ".", flags, mode);
	if (fd == -ENOTDIR && (flags & O_DIRECTORY)) {
		/* O_DIRECTORY|O_NOFOLLOW on a final symlink says ENOTDIR; say
		 * ELOOP like every other symlink, so messages name the cause. */
		int probe = open_beneath(ws->dirfd, rel, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
		if (probe >= 0) {
			if (fstat(probe, &st) == 0 && S_ISLNK(st.st_mode))
				fd = -ELOOP;
			close(probe);
		}
	}
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto fail;
	}
	if (flags & O_PATH) {
		/* O_PATH|O_NOFOLLOW returns the symlink itself; never hand
		 * out a handle on one. */
		if (S_ISLNK(st.st_mode)) {
			rc = -ELOOP;
			goto fail;
		}
		return fd;
	}
	if (S_ISDIR(st.st_mode)) {
		if (!(flags & O_DIRECTORY)) {
			rc = -EISDIR;
			goto fail;
		}
	} else if (!S_ISREG(st.st_mode)) {
		/* FIFO, socket, device: nothing the server should read or write. */
		rc = -EINVAL;
		goto fail;
	} else if (st.st_nlink > 1) {
		/* A hard link is the one way a name in the workspace can reach
		 * an inode outside it without a symlink (sandboxed code
		 * linking ~/.ssh/id_ed25519 or ~/.bashrc in, where a kernel
		 * layer fails to stop it).  Reading it would hand a secret to
		 * the client; writing would change the outside file.  Files
		 * the server writes are always new inodes (ws_write_file), and
		 * legitimate hard links in a workspace are rare, so refuse. */
		rc = -EMLINK;
		goto fail;
	}
	/* A directory is only listed and opened beneath: O_NONBLOCK changes
	 * neither, so it stays (two system calls per directory of every
	 * workspace walk). */
	if (!want_nonblock && !S_ISDIR(st.st_mode) && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
		rc = -errno;
		goto fail;
	}
	if (want_trunc && S_ISREG(st.st_mode) && ftruncate(fd, 0) < 0) {
		rc = -errno;
		goto fail;
	}
	if (out)
		*out = st; /* (a truncation since changed only its size and times) */
	return fd;
fail:
	close(fd);
	return rc;
}

int ws_openat_err(struct err *e, int code, const char *rel)
{
	const char *r = rel && *rel ? rel : "the workspace";

	switch (code) {
	case -ELOOP:
		return err_set(e, code,
			       "'%s' is a symlink or lies under one: the server never follows symlinks in the workspace; "
			       "write the file itself at that path", r);
	case -EXDEV:
		return err_set(e, code, "'%s' leads outside the workspace: use a path under the workspace", r);
	case -ENOENT:
		return err_set(e, code, "'%s' does not exist in the workspace: check the name and that the code wrote it", r);
	case -ENOTDIR:
		return err_set(e, code, "a part of '%s' is not a directory", r);
	case -EISDIR:
		return err_set(e, code, "'%s' is a directory, not a file", r);
	case -EINVAL:
		return err_set(e, code, "'%s' is not a regular file (a FIFO, socket or device): the server only opens regular files", r);
	case -EMLINK:
		return err_set(e, code,
			       "'%s' has more than one hard link: the server refuses hard-linked files because they can "
			       "name files outside the workspace; write a copy instead (shutil.copy)", r);
	case -ENAMETOOLONG:
		return err_set(e, code, "the path '%s' is too long", r);
	default:
		return err_sys(e, code, "cannot open '%s' in the workspace", r);
	}
}

int ws_mkdirs(const struct workspace *ws, const char *rel, struct err *e)
{
	char done[PATH_MAX], comp[NAME_MAX + 1];
	size_t dn = 0;
	int cur = ws->dirfd, owned = -1, rc = check_rel(rel);

	if (rc < 0)
		return ws_openat_err(e, rc, rel);
	done[0] = '\0';
	const char *s = rel, *c;
	size_t cl;
	while ((c = path_next(&s, &cl))) {
		if (cl > NAME_MAX) {
			rc = err_set(e, -ENAMETOOLONG, "a directory name in '%s' is longer than %d bytes", rel, NAME_MAX);
			goto out;
		}
		memcpy(comp, c, cl);
		comp[cl] = '\0';
		/* done is a prefix of rel, so it fits. */
		dn += (size_t)snprintf(done + dn, sizeof done - dn, "%s%s", dn ? "/" : "", comp);
		/* mkdirat never follows a symlink at the name (EEXIST); the open
		 * below then refuses it, so a planted symlink cannot redirect
		 * the directories (and files) we create. */
		if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST) {
			rc = err_sys(e, -errno, "cannot create the directory '%s' in the workspace", done);
			goto out;
		}
		int fd = open_dir_component(cur, comp);
		if (fd < 0) {
			if (fd == -ELOOP)
				rc = err_set(e, fd, "'%s' in the workspace is a symlink: the server does not write through "
						    "symlinks; remove it or make it a directory", done);
			else if (fd == -ENOTDIR)
				rc = err_set(e, fd, "'%s' in the workspace is a file, not a directory: remove or rename it", done);
			else
				rc = err_sys(e, fd, "cannot open the directory '%s' in the workspace", done);
			goto out;
		}
		if (owned >= 0)
			close(owned);
		cur = owned = fd;
	}
	rc = 0;
out:
	if (owned >= 0)
		close(owned);
	return rc;
}

static atomic_uint g_tmp_counter;

static void tmp_name(char *buf, size_t sz)
{
	uint32_t r[2] = { 0, 0 };

	if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
		r[0] = (uint32_t)getpid();
		r[1] = atomic_fetch_add(&g_tmp_counter, 1) * 2654435761u;
	}
	snprintf(buf, sz, ".psm-%08x%08x.tmp", r[0], r[1]);
}

static int write_all(int fd, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int ws_create_new(const struct workspace *ws, char *rel, size_t relsz, struct err *e)
{
	char dir[PATH_MAX], base[PATH_MAX], ext[32] = "";
	snprintf(dir, sizeof dir, "%s", rel);
	char *slash = strrchr(dir, '/');
	if (slash) {
		*slash = 0;
		int rc = ws_mkdirs(ws, dir, e);
		if (rc < 0)
			return rc;
	}
	/* base is the name without its extension: name.log, name.1.log ... */
	snprintf(base, sizeof base, "%s", rel);
	char *dot = strrchr(base, '.');
	if (dot && (!slash || dot > base + (slash - dir)) && strlen(dot) < sizeof ext) {
		snprintf(ext, sizeof ext, "%s", dot);
		*dot = 0;
	}
	int fd = -EEXIST;
	for (int i = 0; i < 100 && fd == -EEXIST; i++) {
		if (i == 0)
			snprintf(rel, relsz, "%s%s", base, ext);
		else
			snprintf(rel, relsz, "%s.%d%s", base, i, ext);
		fd = ws_openat(ws, rel, O_WRONLY | O_CREAT | O_EXCL, 0644);
	}
	return fd < 0 ? ws_openat_err(e, fd, rel) : fd;
}

int ws_write_file(const struct workspace *ws, const char *rel, const void *buf, size_t len, struct err *e)
{
	char dir[PATH_MAX], tmp[64];
	const char *base;
	int rc = check_rel(rel), dfd = -1, fd = -1;

	if (rc < 0)
		return ws_openat_err(e, rc, rel);
	const char *slash = strrchr(rel, '/');
	if (slash) {
		memcpy(dir, rel, (size_t)(slash - rel));
		dir[slash - rel] = '\0';
		base = slash + 1;
	} else {
		dir[0] = '\0';
		base = rel;
	}
	if (!*base || strcmp(base, ".") == 0)
		return err_set(e, -EINVAL, "'%s' does not name a file: give a file name such as 'outputs/summary.json'", rel);
	if (strlen(base) > NAME_MAX)
		return err_set(e, -ENAMETOOLONG, "the file name in '%s' is longer than %d bytes", rel, NAME_MAX);
	rc = ws_mkdirs(ws, dir, e);
	if (rc < 0)
		return rc;
	dfd = ws_openat(ws, dir, O_PATH | O_DIRECTORY, 0);
	if (dfd < 0)
		return ws_openat_err(e, dfd, dir);

	/* Never open the existing file for writing: it may be a symlink (to
	 * ~/.bashrc) or a hard link to a file outside the workspace.  A new
	 * inode created O_EXCL (which never follows a symlink either) and
	 * renamed over the name replaces whatever was planted there, and the
	 * outside file is left untouched.  Readers see the old or the new
	 * file, never half of one. */
	for (int tries = 0;; tries++) {
		tmp_name(tmp, sizeof tmp);
		fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd >= 0)
			break;
		if (errno != EEXIST || tries >= 16) {
			rc = err_sys(e, -errno, "cannot create a temporary file next to '%s' in the workspace", rel);
			goto out;
		}
	}
	rc = write_all(fd, buf, len);
	if (rc < 0) {
		err_sys(e, rc, "cannot write '%s' in the workspace", rel);
		goto unlink;
	}
	if (close(fd) < 0) {
		fd = -1;
		rc = err_sys(e, -errno, "cannot write '%s' in the workspace", rel);
		goto unlink;
	}
	fd = -1;
	if (renameat(dfd, tmp, dfd, base) < 0) {
		rc = -errno;
		if (rc == -EISDIR || rc == -ENOTEMPTY || rc == -EEXIST)
			err_set(e, rc, "'%s' in the workspace is a directory: remove or rename it", rel);
		else
			err_sys(e, rc, "cannot put '%s' in place in the workspace", rel);
		goto unlink;
	}
	rc = 0;
	goto out;
unlink:
	unlinkat(dfd, tmp, 0);
out:
	if (fd >= 0)
		close(fd);
	close(dfd);
	return rc;
}

int ws_read_file(const struct workspace *ws, const char *rel, size_t max, unsigned char **out, size_t *len,
		 struct err *e)
{
	struct stat st;
	unsigned char *buf = NULL;
	size_t n = 0, cap;
	int rc, fd;

	*out = NULL;
	*len = 0;
	if (max > SIZE_MAX / 4)
		max = SIZE_MAX / 4; /* so that max + 1 and doubling cannot wrap */
	fd = ws_openat(ws, rel, O_RDONLY, 0);
	if (fd < 0)
		return ws_openat_err(e, fd, rel);
	if (fstat(fd, &st) < 0) {
		rc = err_sys(e, -errno, "cannot stat '%s'", rel);
		goto fail;
	}
	if ((uintmax_t)st.st_size > max) {
		rc = err_set(e, -EFBIG, "'%s' has %jd bytes, more than the limit of %zu bytes", rel, (intmax_t)st.st_size, max);
		goto fail;
	}
	/* The sandbox may still be writing: the size is a hint, the cap is
	 * enforced on what is actually read. */
	cap = (size_t)st.st_size + 1;
	if (cap < 4096)
		cap = max < 4096 ? max + 1 : 4096;
	/* Not xmalloc: `max` is the caller's (verify_outputs reads files of
	 * many MB), and a file too large for the memory left is an error for
	 * that call, not a reason to end the server. */
	buf = malloc(cap + 1);
	if (!buf) {
		rc = err_set(e, -ENOMEM, "out of memory reading '%s'", rel);
		goto fail;
	}
	for (;;) {
		if (n == cap) {
			if (n > max)
				break;
			size_t ncap = cap > max / 2 ? max + 1 : cap * 2;
			unsigned char *nb = realloc(buf, ncap + 1);
			if (!nb) {
				rc = err_set(e, -ENOMEM, "out of memory reading '%s'", rel);
				goto fail;
			}
			buf = nb;
			cap = ncap;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			rc = err_sys(e, -errno, "cannot read '%s'", rel);
			goto fail;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > max) {
		rc = err_set(e, -EFBIG, "'%s' grew beyond the limit of %zu bytes while being read", rel, max);
		goto fail;
	}
	close(fd);
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
fail:
	free(buf);
	close(fd);
	return rc;
}
