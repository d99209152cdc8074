/* Unit tests of the server's reader of session messages (proto/wire.c):
 * a session is hostile, so a header is judged against what the server
 * expects now (type, size, descriptors) before any body is read or
 * allocated.  Real socketpairs, real SCM_RIGHTS. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../proto/wire.h"

static int sv[2];

static int setup(void **state)
{
	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	close(sv[0]);
	close(sv[1]);
	return 0;
}

static void raw_header(uint32_t magic, uint32_t type, uint32_t len)
{
	uint32_t h[3] = { magic, type, len };
	assert_int_equal(write(sv[1], h, sizeof h), (ssize_t)sizeof h);
}

static const struct wire_expect running[] = {
	{ W_STARTED, 0, 0 },
	{ W_RESULT, 1024, 0 },
};
static const struct wire_expect settling[] = {
	{ W_CHECKPOINT, 256, 1 },
};

static int step(struct wire_reader *r, struct wire_msg *m)
{
	return wire_reader_step(r, sv[0], m);
}

static void test_expected_message_passes(void **state)
{
	(void)state;
	struct wire_reader r;
	wire_reader_init(&r, WIRE_MAX_PAYLOAD);
	r.expect = running;
	r.n_expect = 2;
	assert_int_equal(wire_send(sv[1], W_RESULT, "{\"status\":\"ok\"}", 15, NULL, 0), 0);
	struct wire_msg m;
	assert_int_equal(step(&r, &m), 1);
	assert_int_equal(m.type, W_RESULT);
	assert_int_equal(m.len, 15);
	wire_msg_free(&m);
	wire_reader_free(&r);
}

/* Attack: a forged checkpoint (or anything else) while a cell runs. */
static void test_unexpected_type_is_refused(void **state)
{
	(void)state;
	struct wire_reader r;
	wire_reader_init(&r, WIRE_MAX_PAYLOAD);
	r.expect = running;
	r.n_expect = 2;
	assert_int_equal(wire_send(sv[1], W_CHECKPOINT, "{\"pid\":1}", 9, NULL, 0), 0);
	struct wire_msg m;
	assert_int_equal(step(&r, &m), -EPROTO);
	wire_reader_free(&r);
}

/* Attack: a 16 MB result: refused from its header, never allocated. */
static void test_oversized_body_is_refused_from_the_header(void **state)
{
	(void)state;
	struct wire_reader r;
	wire_reader_init(&r, WIRE_MAX_PAYLOAD);
	r.expect = running;
	r.n_expect = 2;
	raw_header(WIRE_MAGIC, W_RESULT, 16u << 20);
	struct wire_msg m;
	assert_int_equal(step(&r, &m), -EMSGSIZE);
	assert_null(r.cur.data);
	wire_reader_free(&r);
}

static void test_bad_magic_is_refused(void **state)
{
	(void)state;
	struct wire_reader r;
	wire_reader_init(&r, WIRE_MAX_PAYLOAD);
	r.expect = running;
	r.n_expect = 2;
	raw_header(0x12345678u, W_RESULT, 0);
	struct wire_msg m;
	assert_int_equal(step(&r, &m), -EPROTO);
	wire_reader_free(&r);
}

/* Attack: descriptors smuggled with a message that carries none. */
static void test_descriptors_where_none_belong_are_refused(void **state)
{
	(void)state;
	struct wire_reader r;
	wire_reader_init(&r, WIRE_MAX_PAYLOAD);
	r.expect = running;
	r.n_expect = 2;
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(wire_send(sv[1], W_RESULT, "{}", 2, p, 2), 0);
	close(p[0]);
	close(p[1]);
	struct wire_msg m;
	assert_int_equal(step(&r, &m), -EPROTO);
	wire_reader_free(&r);
}

static void test_one_descriptor_with_a_checkpoint(void **state)
{
	(void)state;
	struct wire_reader r;
	wire_reader_init(&r, WIRE_MAX_PAYLOAD);
	r.expect = settling;
	r.n_expect = 1;
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(wire_send(sv[1], W_CHECKPOINT, "{}", 2, p, 1), 0);
	close(p[0]);
	close(p[1]);
	struct wire_msg m;
	assert_int_equal(step(&r, &m), 1);
	assert_int_equal(m.nfds, 1);
	wire_msg_free(&m);
	wire_reader_free(&r);
}

/* A message is one send: its reader finds the header, the body and the
 * descriptors in one read, never the header alone (one wake-up, not two). */
static void test_one_send_per_message(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	char body[100];
	memset(body, 'b', sizeof body);
	assert_int_equal(wire_send(sv[1], W_CHECKPOINT, body, sizeof body, p, 1), 0);
	close(p[0]);
	close(p[1]);
	unsigned char buf[1024];
	union {
		char b[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof buf };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b };
	ssize_t n = recvmsg(sv[0], &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	assert_int_equal(n, 12 + (ssize_t)sizeof body);
	assert_memory_equal(buf + 12, body, sizeof body);
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	if (!c)
		fail_msg("no descriptor came with the header");
	else {
		assert_int_equal(c->cmsg_type, SCM_RIGHTS);
		int fd;
		memcpy(&fd, CMSG_DATA(c), sizeof fd);
		close(fd);
	}
}

/* Nothing expected (a frozen session): any byte is refused. */
static void test_nothing_expected(void **state)
{
	(void)state;
	struct wire_reader r;
	wire_reader_init(&r, WIRE_MAX_PAYLOAD);
	r.expect = running;
	r.n_expect = 0;
	assert_int_equal(wire_send(sv[1], W_STARTED, "", 0, NULL, 0), 0);
	struct wire_msg m;
	assert_int_equal(step(&r, &m), -EPROTO);
	wire_reader_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_expected_message_passes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_one_send_per_message, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unexpected_type_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oversized_body_is_refused_from_the_header, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_magic_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_descriptors_where_none_belong_are_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_one_descriptor_with_a_checkpoint, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nothing_expected, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
