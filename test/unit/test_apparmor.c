/* The AppArmor profile's child (jail/apparmor.h): which labels ask for it,
 * and that a host without AppArmor (or unconfined) is left as it is.  The
 * transition itself needs a kernel with AppArmor: this host's is checked
 * to have none, or the zygote's label to be unconfined. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "../../jail/apparmor.h"

static void test_need(void **state)
{
	(void)state;
	assert_int_equal(jail_aa_need(NULL), JAIL_AA_NOTHING);
	assert_int_equal(jail_aa_need(""), JAIL_AA_NOTHING);
	assert_int_equal(jail_aa_need("unconfined"), JAIL_AA_NOTHING);
	assert_int_equal(jail_aa_need("python-sandbox-mcp (enforce)"), JAIL_AA_ENTER);
	assert_int_equal(jail_aa_need("python-sandbox-mcp (complain)"), JAIL_AA_ENTER);
	assert_int_equal(jail_aa_need("python-sandbox-mcp"), JAIL_AA_ENTER);
	assert_int_equal(jail_aa_need("python-sandbox-mcp//unpriv (enforce)"), JAIL_AA_INSIDE);
	assert_int_equal(jail_aa_need("python-sandbox-mcp//&python-sandbox-mcp//unpriv (enforce)"), JAIL_AA_INSIDE);
	assert_int_equal(jail_aa_need("snap.x//&python-sandbox-mcp (enforce)"), JAIL_AA_ENTER);
	/* Other profiles, and names that only begin like ours. */
	assert_int_equal(jail_aa_need("bwrap (enforce)"), JAIL_AA_NOTHING);
	assert_int_equal(jail_aa_need("python-sandbox-mcp-other (enforce)"), JAIL_AA_NOTHING);
	assert_int_equal(jail_aa_need("python-sandbox-mcp//unprivx (enforce)"), JAIL_AA_NOTHING);
	assert_int_equal(jail_aa_need("unpriv_bwrap (enforce)"), JAIL_AA_NOTHING);
}

/* Unconfined (or no AppArmor at all): nothing is done, nothing fails. */
static void test_unconfined_host(void **state)
{
	(void)state;
	struct err e = { 0 };
	char detail[96] = "x";
	jail_aa_note();
	assert_int_equal(jail_aa_enter(detail, sizeof detail, &e), 0);
	assert_string_equal(detail, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_need),
		cmocka_unit_test(test_unconfined_host),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
