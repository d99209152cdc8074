/* A session, the zygote's child (session.c): what the zygote asks of it.
 * Only the zygote (zygote.c) includes this. */
#ifndef INTERP_SESSION_H
#define INTERP_SESSION_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/wire.h"
#include "../proto/zmsg.h"

/* Sends a codec's payload (proto/smsg.h, proto/zmsg.h) and frees it. */
static inline int send_msg(int sock, uint32_t type, char *txt, const int *fds, int nfds)
{
	int r = wire_send(sock, type, txt, strlen(txt), fds, nfds);
	free(txt);
	return r;
}

/* Sets how much each session's checkpoint pre-copies (precopy.h), from
 * limits.memory_mb; called by the zygote once, before any fork. */
void zygote_session_precopy(long memory_mb);

/* Runs in a child the zygote has just forked for a spawn request: fds are
 * the session's control socket and its output pipes.  Never returns. */
__attribute__((noreturn)) void zygote_session_main(const struct zmsg_spawn *sp, int fds[3]);

#endif
