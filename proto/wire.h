/* Messages between the server and its workers (zygote, sessions).
 *
 * A message is a 12-byte header {u32 magic, u32 type, u32 len} and len bytes
 * of payload (JSON text or raw bytes, by type), over a SOCK_STREAM unix
 * socket.  File descriptors ride with the header (SCM_RIGHTS).  Workers read
 * and write blocking; the server reads session sockets non-blocking through
 * a wire_reader, since a session runs hostile code that may write anything
 * to its control socket: every length is bounded and every payload is
 * parsed as untrusted.  Every message with a body has a codec (one struct
 * per type, both sides through it): config.h, zmsg.h (the zygote's),
 * smsg.h (the session's) and result.h (W_RESULT, the cell's result). */
#ifndef PROTO_WIRE_H
#define PROTO_WIRE_H

/* The header every message starts with: magic, type, length (u32 each). */
#define WIRE_HDR_BYTES 12

#include <stddef.h>
#include <stdint.h>

#define WIRE_MAGIC 0x50534d31u /* "PSM1" */
#define WIRE_MAX_PAYLOAD (64u << 20)
#define WIRE_MAX_FDS 4
/* The largest pid the kernel gives (PID_MAX_LIMIT on 64-bit), and the
 * longest session name (the server checks its characters): the bounds the
 * codecs hold every pid and name of a message to. */
#define PROTO_PID_MAX 4194304
#define PROTO_NAME_MAX 64

enum wire_type {
	/* server -> zygote */
	W_SPAWN = 1,     /* JSON {id, name, seed, checkpoint, persist_cap}; fds: ctrl, stdout w, stderr w */
	W_CONFIG = 20,   /* JSON: the policy text and paths, first message after exec */
	/* zygote -> server */
	W_READY,         /* JSON {start_ms}: the interpreter is up (after W_JAIL) */
	W_SPAWNED,       /* JSON {id, pid, error?}; fd: pidfd (may be absent) */
	W_EXITED,        /* JSON {pid, status, epoch} (wait status; epoch counts exits) */
	W_FATAL,         /* JSON {message} */
	/* server -> session */
	W_EXEC,          /* JSON {op, code, cell, restore?, restore_format?, restore_direct?}; fds with restore: the
	                  * saved state's pipe, or (restore_direct) its file and a socket to the server */
	W_THUMB,         /* JSON {op, path, max_bytes} */
	/* session -> server */
	W_RESULT,        /* JSON {status, result?, error?, imports?, restore?}: a cell's result (result.h) */
	W_THUMB_DATA,    /* raw image bytes (empty when it could not be made) */
	W_HELLO,         /* JSON {pid, resumed}: a session (or resumed checkpoint) is up */
	W_CHECKPOINT,    /* JSON {pid}; fds: the checkpoint's pidfd, then (saved sessions) the read end
			    of the pipe its saver writes the state to */
	W_STARTED,       /* empty: the session has read a cell and runs it */
	/* server -> zygote */
	W_SWEEP,         /* JSON {epoch, keep: [pid]}: end the zygote's other children */
	W_SETTLE,        /* JSON {pid, keep, epoch, all: [pid]}: end what the call left below a
			    (frozen) session, except its checkpoint */
	/* zygote -> server */
	W_SETTLED,       /* JSON {pid, ended} */
	/* server -> session */
	W_TAKE_CHECKPOINT, /* JSON {save?}: fork the checkpoint of the state now (after the reply) */
	/* server -> zygote */
	W_WARM,          /* JSON {names: [module]} to load while idle (learned warm-up), or
			    {pause: bool}: a call runs, start nothing new */
	/* zygote -> server */
	W_WARMED,        /* JSON {name, ok, why?, ms?, steps?, longest_ms?}: the outcome for one name */
	/* server -> session */
	W_HURRY,         /* empty: a call waits for the checkpoint under way: cut its pre-copy short */
	W_FORK,          /* JSON {name}; fds: ctrl, stdout w, stderr w of a new session that starts as a
			    copy of this one (fork_from) */
	/* session -> server */
	W_FORKED,        /* JSON {pid} or {error}; fd: the copy's pidfd (a child of the zygote) */
	/* zygote -> server */
	W_JAIL,          /* JSON {enforceable, nsfree, why, jail}: the jail's report, sent before the
			    interpreter starts (so before any code but this program's has run) */
	/* session -> server */
	W_RESTORED,      /* empty: the saved state the cell came with is loaded; the cell runs now */
};

/* What an untrusted peer may send next: the types accepted in the current
 * state, each with its own maximum length and number of descriptors.  Any
 * other type, a longer body or more descriptors is a protocol error (the
 * header is judged before any of the body is read or allocated). */
struct wire_expect {
	uint32_t type;
	uint32_t max_len;
	int max_fds;
};

struct wire_msg {
	uint32_t type;
	uint32_t len;
	unsigned char *data; /* malloc'd, NUL-terminated (not counted in len) */
	int fds[WIRE_MAX_FDS];
	int nfds;
};

/* Blocking send of one message with optional fds.  0 or -errno. */
int wire_send(int sock, uint32_t type, const void *data, size_t len, const int *fds, int nfds);

/* Blocking receive of one message.  0, -EPIPE at end of stream, or -errno
 * (-EPROTO for a bad header, -EMSGSIZE over max_len). */
int wire_recv(int sock, struct wire_msg *m, uint32_t max_len);

void wire_msg_free(struct wire_msg *m);

/* Non-blocking, incremental reader for untrusted peers.  File descriptors
 * that arrive are attached to the message being read (at most
 * WIRE_MAX_FDS; any others are closed). */
struct wire_reader {
	const struct wire_expect *expect; /* NULL: any type up to max_len */
	size_t n_expect;
	unsigned char hdr[WIRE_HDR_BYTES];
	int fds[WIRE_MAX_FDS];
	int nfds;
	size_t hdr_got;
	struct wire_msg cur;
	size_t body_got;
	uint32_t max_len;
};

void wire_reader_init(struct wire_reader *r, uint32_t max_len);
/* Reads what is available.  Returns 1 with *out filled when a whole message
 * arrived (caller frees), 0 when more is needed (EAGAIN), -EPIPE at end of
 * stream, other -errno on a protocol error: -EPROTO for a bad magic, a type
 * not in r->expect or too many descriptors, -EMSGSIZE for a body over its
 * type's maximum.  r->expect may be changed between messages. */
int wire_reader_step(struct wire_reader *r, int fd, struct wire_msg *out);
void wire_reader_free(struct wire_reader *r);

#endif
