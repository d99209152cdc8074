/* Unit tests of common/balloon.c: free page reporting read from a virtio
 * balloon device's feature bits, in a tree laid out as /sys/bus/virtio/
 * drivers is; anything else (no balloon, another device, the bit clear, a
 * file cut short) reads as no. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/balloon.h"
#include "tmptree.h"

static char root[64];

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof root, "/tmp/psm-balloon-XXXXXX");
	return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	tmp_tree_remove(root);
	return 0;
}

/* root/DRIVER/DEVICE/features holding bits (no file when bits is NULL). */
static void device(const char *driver, const char *dev, const char *bits)
{
	char p[256];
	snprintf(p, sizeof p, "%s/%s", root, driver);
	mkdir(p, 0755);
	snprintf(p, sizeof p, "%s/%s/%s", root, driver, dev);
	assert_int_equal(mkdir(p, 0755), 0);
	if (!bits)
		return;
	snprintf(p, sizeof p, "%s/%s/%s/features", root, driver, dev);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(bits, f);
	fclose(f);
}

/* This VM's balloon, as read off it: stats, deflate on OOM, reporting. */
#define REPORTING "01100101000000000000000000000000100000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000\n"

static void test_reporting(void **state)
{
	(void)state;
	device("virtio_balloon", "virtio0", REPORTING);
	assert_true(balloon_reports_free_pages(root));
}

static void test_bit_clear(void **state)
{
	(void)state;
	device("virtio_balloon", "virtio0", "0110000000000000000000000000000010000000\n");
	assert_false(balloon_reports_free_pages(root));
}

static void test_no_driver(void **state)
{
	(void)state;
	assert_false(balloon_reports_free_pages(root));
	assert_false(balloon_reports_free_pages("/nonexistent/psm-balloon"));
	/* Another driver's device with the same bit set says nothing. */
	device("virtio_net", "virtio0", REPORTING);
	assert_false(balloon_reports_free_pages(root));
}

/* The driver's directory lists other entries (bind, uevent, module):
 * only devices are read, and a device without the file is passed over. */
static void test_second_device(void **state)
{
	(void)state;
	device("virtio_balloon", "module", REPORTING);
	device("virtio_balloon", "virtio0", NULL);
	assert_false(balloon_reports_free_pages(root));
	device("virtio_balloon", "virtio3", REPORTING);
	assert_true(balloon_reports_free_pages(root));
}

static void test_short_file(void **state)
{
	(void)state;
	device("virtio_balloon", "virtio0", "01100");
	assert_false(balloon_reports_free_pages(root));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_reporting, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bit_clear, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_driver, setup, teardown),
		cmocka_unit_test_setup_teardown(test_second_device, setup, teardown),
		cmocka_unit_test_setup_teardown(test_short_file, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
