/* Small helpers every part of the code uses, in the manner of bubblewrap's
 * utils.h: one rule for running out of memory, and cleanup attributes so a
 * function frees what it owns on every return without a list of labels.
 *
 * Out of memory: the x* allocators never return NULL.  They print one line
 * on stderr and end the process with status 1: the server (its client sees
 * the end of the stream instead of a call that never answers), the zygote
 * (the server starts a new one) or a session (the call is reported crashed
 * and the session rolls back).  A failure to allocate is never carried on
 * as a half-built reply or a watch that was silently not registered. */
#ifndef COMMON_UTIL_H
#define COMMON_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#define N_ELEMENTS(a) (sizeof(a) / sizeof((a)[0]))

__attribute__((noreturn)) void die_oom(void);

__attribute__((malloc, returns_nonnull)) void *xmalloc(size_t n);
__attribute__((malloc, returns_nonnull)) void *xcalloc(size_t count, size_t size);
__attribute__((returns_nonnull)) void *xrealloc(void *p, size_t n);
/* realloc of count * size, the product checked for overflow. */
__attribute__((returns_nonnull)) void *xreallocarray(void *p, size_t count, size_t size);
__attribute__((malloc, returns_nonnull)) char *xstrdup(const char *s);
__attribute__((malloc, returns_nonnull, format(printf, 1, 2))) char *xasprintf(const char *fmt, ...);

/* Makes cJSON allocate through xmalloc, so no cJSON_Create* or cJSON_Add*
 * call can fail for lack of memory (they can still return NULL for a NULL
 * argument, which is a bug to fix, not a condition to handle). */
void util_cjson_hooks(void);

/* Cleanup attributes: the variable is freed (closed) when it goes out of
 * scope; steal_pointer / steal_fd hand the value on and leave NULL / -1. */
static inline void cleanup_freep(void *p)
{
	free(*(void **)p);
}

static inline void cleanup_closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}

#define cleanup_free __attribute__((cleanup(cleanup_freep)))
#define cleanup_fd __attribute__((cleanup(cleanup_closep)))

static inline void *steal_pointer_impl(void *pp)
{
	void **p = pp;
	void *v = *p;
	*p = NULL;
	return v;
}
#define steal_pointer(pp) ((__typeof__(*(pp)))steal_pointer_impl(pp))

static inline int steal_fd(int *fd)
{
	int v = *fd;
	*fd = -1;
	return v;
}

/* CLOCK_MONOTONIC in milliseconds. */
double mono_ms(void);

/* Reads a small file (a /proc entry) whole with one read, NUL-terminated:
 * its length, or -errno.  cap counts the NUL. */
ssize_t read_small(const char *path, char *buf, size_t cap);
/* The same, path relative to dirfd (or AT_FDCWD). */
ssize_t read_small_at(int dirfd, const char *path, char *buf, size_t cap);

/* This process's resident bytes, from /proc/self/statm (opened each time:
 * a descriptor a zygote opened would name the zygote); SIZE_MAX when it
 * cannot be read. */
size_t self_resident_bytes(void);
/* write(2) until all len bytes are out (EINTR retried): 0 or -errno. */
int write_full(int fd, const void *data, size_t len);

/* mkdir -p: creates the missing directories of path with mode (existing
 * ones are left as they are).  0 or a negative errno, the message in e. */
struct err;
int mkdir_all(const char *path, unsigned mode, struct err *e);

/* Whether path is dir or lies beneath it, both canonical absolute paths
 * (trailing slashes of dir ignored; "/" holds everything). */
bool path_under(const char *path, const char *dir);

/* execve of this binary (path: what /proc/self/exe named at start), falling
 * back to /proc/self/exe itself.  Returns only on failure: -1, errno that of
 * the exec of path. */
int exec_self(const char *path, char *const argv[], char *const envp[]);

#endif
