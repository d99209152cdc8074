/* The messages between the server and a session that have a codec: one
 * struct per type, encoded by the side that sends it and decoded by the
 * other, so a field is added in one place and the compiler checks both
 * ends.  Each decoder is the check of a message from below (private.h has
 * the rule: every field of its type and within its range, or the message
 * is refused with an error naming the field; sizes and descriptors are
 * judged before, by the reader and the state's row in supervisor/state.c).
 * What the server then believes of a pid is the kernel's word
 * (supervisor/kproc.h), never the message's.
 *
 * Encoders return the payload, malloc'd, never NULL (out of memory ends
 * the process: common/util.h).  Decoders return 0, or -EPROTO with e
 * naming the field.
 *
 * The zygote's messages are in zmsg.h (W_CONFIG in config.h), the cell's
 * result, W_RESULT, in result.h.  W_STARTED and W_HURRY are empty,
 * W_THUMB_DATA raw bytes. */
#ifndef PROTO_SMSG_H
#define PROTO_SMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../common/err.h"
#include "wire.h"

/* W_HELLO, session -> server: a new process, a resumed checkpoint or a
 * copy is up.  The server reads nothing of it (a pid is the kernel's word,
 * from the pidfd), so it has no decoder: its size and its place in the
 * exchange are the check. */
struct smsg_hello {
	pid_t pid;
	bool resumed;           /* a checkpoint or a copy, not a fresh fork */
};
char *smsg_hello_encode(const struct smsg_hello *m);

/* W_CHECKPOINT, session -> server; descriptors: the checkpoint's pidfd,
 * then (saved sessions) the read end of the pipe its saver writes to. */
struct smsg_checkpoint {
	pid_t pid;              /* the checkpoint, as the session claims; -1: the fork failed */
};
char *smsg_checkpoint_encode(const struct smsg_checkpoint *m);
int smsg_checkpoint_decode(const void *data, size_t len, struct smsg_checkpoint *m, struct err *e);

/* W_FORK, server -> session; descriptors: the control socket, stdout and
 * stderr of a new session `name` that starts as a copy of this one. */
struct smsg_fork {
	char name[PROTO_NAME_MAX + 1];
};
char *smsg_fork_encode(const struct smsg_fork *m);
int smsg_fork_decode(const void *data, size_t len, struct smsg_fork *m, struct err *e);

/* W_FORKED, session -> server; descriptor: the copy's pidfd (a child of
 * the zygote), or none with error. */
struct smsg_forked {
	pid_t pid;              /* as the session claims it, or 0 */
	char error[160];        /* why there is no copy (sanitized, cut), or "" */
};
char *smsg_forked_encode(const struct smsg_forked *m);
int smsg_forked_decode(const void *data, size_t len, struct smsg_forked *m, struct err *e);

/* W_EXEC, server -> session; descriptors with restore: the read end of the
 * pipe the saved state comes on, or (restore_direct) the snapshot file and
 * the socket its progress and verdict go on.  Run one cell.  The bootstrap's handle
 * (interp/bootstrap/session.py) reads the same body in Python (op, code, cell,
 * restore, restore_format, no_self_view); the session's C side decodes it here first
 * (the cell's number names its checkpoint). */
struct smsg_exec {
	const char *code;       /* the cell's source */
	int cell;               /* its number in the session, from 1 */
	unsigned long long restore; /* the saved state's size on the pipe, or 0: none */
	int restore_format;     /* that state's format (persist.h), with restore */
	bool restore_direct;    /* two descriptors: the file and a socket (supervisor/persist.h) */
	/* The server reads the session's io counter and descriptors itself
	 * (it may ptrace-read the process): the session need not read its
	 * own around the cell (about 0.1 ms of every call). */
	bool no_self_view;
	void *decoded;
};
char *smsg_exec_encode(const struct smsg_exec *m);
int smsg_exec_decode(const void *data, size_t len, struct smsg_exec *m, struct err *e);
void smsg_exec_free(struct smsg_exec *m);

/* W_TAKE_CHECKPOINT, server -> session: fork the checkpoint of the state
 * now (after the reply), with a saver (save) when the session is saved.
 * known: the labels of the pieces of the last save the server holds (hex,
 * 32 characters each; supervisor/persist.h), which the saver may name
 * instead of sending them again; NULL or "" for none. */
#define SMSG_KNOWN_MAX (SMSG_KNOWN_LABELS_MAX * 32)
#define SMSG_KNOWN_LABELS_MAX 65536
struct smsg_take_checkpoint {
	bool save;
	const char *known;
	void *decoded;
};
char *smsg_take_checkpoint_encode(const struct smsg_take_checkpoint *m);
int smsg_take_checkpoint_decode(const void *data, size_t len, struct smsg_take_checkpoint *m, struct err *e);
void smsg_take_checkpoint_free(struct smsg_take_checkpoint *m);

/* W_THUMB, server -> session: make a thumbnail of the image at path (a
 * file the call made in the workspace), at most max_bytes; the session
 * answers W_THUMB_DATA.  The bootstrap's handle (interp/bootstrap/session.py and
 * figures.py, _thumbnail) reads the same body in Python (op, path, max_bytes); the
 * session's C side decodes it here first. */
struct smsg_thumb {
	const char *path;
	long max_bytes;
	void *decoded;
};
char *smsg_thumb_encode(const struct smsg_thumb *m);
int smsg_thumb_decode(const void *data, size_t len, struct smsg_thumb *m, struct err *e);
void smsg_thumb_free(struct smsg_thumb *m);

#endif
