/* Saved sessions: the key, the persist object and what the save and the
 * restore share (the tag, the session's directory). */
#include "persist.h"
#include "persist_format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/hmac.h"
#include "../common/userdir.h"
#include "../common/util.h"

/* Reads the key, or makes one (random, mode 0600).  Its own mode is checked
 * too: a key that others can read proves nothing. */
static int load_key(struct persist *p, const struct userdir *ud, struct err *e)
{
	char *buf = NULL;
	size_t len = 0;
	int r = userdir_read(ud, "key", 4096, &buf, &len, e);
	if (r == 1) {
		unsigned char k[KEY_LEN];
		if (getrandom(k, sizeof k, 0) != (ssize_t)sizeof k)
			return err_set(e, -EIO, "no random bytes for a new key");
		r = userdir_write(ud, "key", k, sizeof k, e);
		memset(k, 0, sizeof k);
		if (r < 0)
			return r;
		/* Read back what is there: of two servers starting at once,
		 * both use the key that won the rename. */
		r = userdir_read(ud, "key", 4096, &buf, &len, e);
	}
	if (r < 0)
		return r;
	if (r == 1 || len != KEY_LEN) {
		free(buf);
		return err_set(e, -EINVAL, "%s/key is not a key of %d bytes: remove it (a new one is made)", ud->path, KEY_LEN);
	}
	memcpy(p->key, buf, KEY_LEN);
	memset(buf, 0, len);
	free(buf);
	struct stat st;
	if (fstatat(ud->fd, "key", &st, AT_SYMLINK_NOFOLLOW) < 0 || (st.st_mode & 077))
		return err_set(e, -EPERM, "%s/key is accessible to group or others: remove it (a new one is made)", ud->path);
	return 0;
}

struct persist *persist_new(const struct workspace *ws, const struct policy *pol)
{
	struct persist *p = xcalloc(1, sizeof *p);
	p->ws = ws;
	p->cap = (uint64_t)pol->limits.persist_mb << 20;
	p->mem_cap = pol->limits.memory_mb > 0 ? (uint64_t)pol->limits.memory_mb << 20 : UINT64_MAX / 2;
	if (!pol->limits.persist) {
		snprintf(p->why, sizeof p->why, "limits.persist is false");
		return p;
	}
	struct err e = { 0 };
	char dir[PATH_MAX];
	struct userdir ud = { .fd = -1 };
	if (userdir_state_path(dir, sizeof dir, &e) < 0 || userdir_open(&ud, dir, true, &e) < 0) {
		snprintf(p->why, sizeof p->why, "no private directory for the key: %.300s", e.msg);
		userdir_close(&ud);
		return p;
	}
	/* The key is secret as well as trusted: the directory is private. */
	struct stat st;
	if (fstat(ud.fd, &st) == 0 && (st.st_mode & 077))
		fchmod(ud.fd, st.st_mode & 0700);
	char real[PATH_MAX];
	if (!realpath(dir, real))
		snprintf(real, sizeof real, "%s", dir);
	/* Attack: a key the sandboxed code can read lets it sign a snapshot
	 * of its own making.  The jail shows ROOT, the workspace and the
	 * fs_read paths: the key must lie in none of them. */
	const char *seen = NULL;
	if (path_under(real, ws->root))
		seen = ws->root;
	else if (path_under(real, ws->abs))
		seen = ws->abs;
	for (size_t i = 0; !seen && pol->fs_read == FS_READ_LIST && i < pol->n_fs_read_paths; i++)
		if (pol->fs_read_paths[i][0] == '/' && path_under(real, pol->fs_read_paths[i]))
			seen = pol->fs_read_paths[i];
	if (seen) {
		snprintf(p->why, sizeof p->why,
			 "the key directory %.100s lies inside %.100s, which sandboxed code can read: set XDG_STATE_HOME to a directory outside the project",
			 real, seen);
		userdir_close(&ud);
		return p;
	}
	snprintf(p->key_path, sizeof p->key_path, "%s/key", dir);
	if (load_key(p, &ud, &e) < 0) {
		snprintf(p->why, sizeof p->why, "the key is refused: %.300s", e.msg);
		memset(p->key, 0, sizeof p->key);
		userdir_close(&ud);
		return p;
	}
	userdir_close(&ud);
	struct hmac *h = hmac_new(p->key, sizeof p->key);
	unsigned char id[HMAC_LEN];
	static const char text[] = "python-sandbox-mcp key id";
	if (h)
		hmac_update(h, text, sizeof text);
	if (!h || hmac_final(h, id) < 0) {
		hmac_free(h);
		snprintf(p->why, sizeof p->why, "the key cannot be used (libcrypto failed)");
		return p;
	}
	hmac_free(h);
	memcpy(p->keyid, id, KEYID_LEN);
	p->on = true;
	return p;
}

void persist_free(struct persist *p)
{
	if (!p)
		return;
	memset(p->key, 0, sizeof p->key);
	free(p);
}

bool persist_on(const struct persist *p)
{
	return p && p->on;
}

const char *persist_why_off(const struct persist *p)
{
	return p ? p->why : "out of memory";
}

const char *persist_key_path(const struct persist *p)
{
	return p ? p->key_path : "";
}


/* The tag covers, before the bytes, what they are for: a snapshot copied
 * from another session or another workspace (or sent by an older format)
 * does not verify.  v1: HMAC-SHA256 under the key.  v2: Poly1305 under a
 * key of its own, HMAC-SHA256(key, nonce), the nonce random for each
 * snapshot and kept in its trailer: a one-time authenticator, so a
 * gigabyte's tag costs about 0.1 s of CPU instead of 0.5 s (the restore
 * waits for it).  A planted snapshot that reuses another's nonce reuses a
 * key that tagged one message: a forgery still has a chance of about
 * 2^-100 (Poly1305's bound), and the header it covers differs anyway. */
struct hmac *persist_tag_begin(const struct persist *p, int version, const char *name, uint64_t len,
			       uint64_t created, uint64_t cells, const unsigned char nonce[NONCE_LEN])
{
	struct hmac *h;
	if (version == 1) {
		h = hmac_new(p->key, sizeof p->key);
	} else {
		/* A journal's keys are drawn apart from a snapshot's: no tag of
		 * one can ever stand for the other. */
		const char *kd = version == TAG_JOURNAL ? "python-sandbox-mcp journal v1 one-time key"
							 : "python-sandbox-mcp snapshot v2 one-time key";
		unsigned char otk[HMAC_LEN];
		struct hmac *k = hmac_new(p->key, sizeof p->key);
		if (k) {
			hmac_update(k, kd, strlen(kd) + 1);
			hmac_update(k, nonce, NONCE_LEN);
		}
		int r = k ? hmac_final(k, otk) : -ENOMEM;
		hmac_free(k);
		h = r == 0 ? poly1305_new(otk) : NULL;
		memset(otk, 0, sizeof otk);
	}
	if (!h)
		return NULL;
	const char *domain = version == 1 ? "python-sandbox-mcp snapshot v1"
			     : version == TAG_JOURNAL ? "python-sandbox-mcp journal v1"
						      : "python-sandbox-mcp snapshot v2";
	unsigned char nums[24];
	put64(nums, len);
	put64(nums + 8, created);
	put64(nums + 16, cells);
	hmac_update(h, domain, strlen(domain) + 1);
	hmac_update(h, p->ws->abs, strlen(p->ws->abs) + 1);
	hmac_update(h, name, strlen(name) + 1);
	hmac_update(h, nums, sizeof nums);
	return h;
}

/* The session's directory, created private; no symlink is followed on the
 * way (a cell can plant one at .sessions or .sessions/NAME). */
int persist_session_dir(const struct persist *p, const char *name, bool create, struct err *e)
{
	char rel[128];
	snprintf(rel, sizeof rel, ".sessions/%s", name);
	if (create) {
		int r = ws_mkdirs(p->ws, rel, e);
		if (r < 0)
			return r;
		int top = ws_openat(p->ws, ".sessions", O_RDONLY | O_DIRECTORY, 0);
		if (top >= 0) {
			fchmod(top, 0700);
			close(top);
		}
	}
	int fd = ws_openat(p->ws, rel, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return ws_openat_err(e, fd, rel);
	if (create)
		fchmod(fd, 0700);
	return fd;
}


uint64_t persist_written_all(const struct persist *p)
{
	return p ? p->written_all : 0;
}

int persist_discard(struct persist *p, const char *name)
{
	struct err e = { 0 };
	int d = persist_session_dir(p, name, false, &e);
	if (d < 0)
		return d == -ENOENT ? 0 : d;
	int r = unlinkat(d, SNAP_NAME, 0) < 0 && errno != ENOENT ? -errno : 0;
	unlinkat(d, TMP_NAME, 0);
	unlinkat(d, JOURNAL_NAME, 0);
	unlinkat(d, JOURNAL_TMP, 0);
	pieces_drop(d, 0);
	close(d);
	return r;
}

bool persist_has(struct persist *p, const char *name)
{
	struct err e = { 0 };
	int d = persist_on(p) ? persist_session_dir(p, name, false, &e) : -1;
	if (d < 0)
		return false;
	struct stat st;
	bool there = fstatat(d, SNAP_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0;
	close(d);
	return there;
}

void persist_stream_only(struct persist *p)
{
	p->stream_only = true;
}
