/* Unit tests of common/balloon.c: free page reporting read from a virtio
 * balloon device's feature bits, in a tree laid out as /sys/bus/virtio/
 * drivers is; anything else (no balloon, another device, the bit clear, a
 * file cut short) reads as no.  Then the page size for memory written
 * after a rest: small pages only where the host takes freed memory back
 * and a small page's fault is cheaper than a huge page the host took. */
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

/* The real machine's fault: a positive time, well under a millisecond a
 * page (the least of three rounds). */
static void test_fault_measured(void **state)
{
	(void)state;
	double us = small_page_fault_us();
	assert_true(us > 0);
	assert_true(us < 1000);
}

static void test_small_after_rest(void **state)
{
	(void)state;
	/* A host that takes freed memory back, small faults cheap (2.2 us:
	 * the VM the rule was first measured on): small pages after a rest. */
	assert_true(small_pages_after_rest(true, 2.2));
	/* The same host, small faults dear (11 us: the VM after it): a huge
	 * page the host took back costs less than its 512 small ones. */
	assert_false(small_pages_after_rest(true, 11.0));
	assert_false(small_pages_after_rest(true, BALLOON_HUGE_AFTER_REST_US));
	/* Not measured: the rule as first built. */
	assert_true(small_pages_after_rest(true, -1));
	/* A host that keeps freed memory: huge pages at any age. */
	assert_false(small_pages_after_rest(false, 2.2));
	assert_false(small_pages_after_rest(false, -1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_reporting, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bit_clear, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_driver, setup, teardown),
		cmocka_unit_test_setup_teardown(test_second_device, setup, teardown),
		cmocka_unit_test_setup_teardown(test_short_file, setup, teardown),
		cmocka_unit_test(test_fault_measured),
		cmocka_unit_test(test_small_after_rest),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
