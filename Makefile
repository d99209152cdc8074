# python-sandbox-mcp: a plain Makefile.  `make` builds build/python-sandbox-mcp;
# `make test` installs what the tests need, then runs every test.
#   make SANITIZE=address,undefined   -> build/san/python-sandbox-mcp

PREFIX ?= /usr/local
PKGS := libcjson libseccomp libbsd-overlay yaml-0.1 expat python3-embed libcrypto

ifeq ($(SANITIZE),)
BUILD ?= build
SANFLAGS :=
OPT ?= -O2 -D_FORTIFY_SOURCE=2
else
BUILD ?= build/san
SANFLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
OPT ?= -O1 -g
endif

CC ?= cc
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
PY_PREFIX := $(shell pkg-config --variable=prefix python3-embed 2>/dev/null)
VERSION := $(shell cat $(dir $(lastword $(MAKEFILE_LIST)))VERSION)

WARN := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wformat-truncation=1 \
	-Wstrict-prototypes -Wmissing-prototypes -Wpointer-arith -Wvla \
	-Wno-unused-parameter -Wimplicit-fallthrough -Wundef -Wcast-qual \
	-Wnull-dereference -Wdouble-promotion
HARDEN := -fstack-protector-strong -fstack-clash-protection -fcf-protection \
	-fPIE -D_GNU_SOURCE
CFLAGS ?= -g $(OPT)
ALL_CFLAGS := -std=gnu11 $(CFLAGS) $(WARN) $(HARDEN) $(SANFLAGS) $(PKG_CFLAGS) \
	-DPSM_VERSION='"$(VERSION)"' -DPSM_PY_PREFIX='"$(PY_PREFIX)"' -MMD -MP
ALL_LDFLAGS := $(LDFLAGS) -pie -Wl,-z,relro,-z,now -Wl,--as-needed $(SANFLAGS)
LIBS := $(PKG_LIBS) -lmd -lpthread -lresolv

# One folder per layer, lowest first (docs/ARCHITECTURE.md; make layers).
LAYERS := common policy jail proto interp rpc files supervisor mcp
SRCS := $(wildcard $(LAYERS:%=%/*.c))
ASMS := $(wildcard interp/*.S policy/*.S)
OBJS := $(SRCS:%.c=$(BUILD)/obj/%.o) $(ASMS:%.S=$(BUILD)/obj/%.o)
LIB_OBJS := $(filter-out $(BUILD)/obj/mcp/main.o,$(OBJS))
BIN := $(BUILD)/python-sandbox-mcp

UNIT_SRCS := $(wildcard test/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:test/unit/%.c=$(BUILD)/test/%)
HELPER_SRCS := $(wildcard test/helpers/*.c)
HELPER_BINS := $(HELPER_SRCS:test/helpers/%.c=$(BUILD)/helpers/%)

.PHONY: all setup check test test-san valgrind unit layers layers-shrink jail integration demo install uninstall apparmor-check install-skill clean check-deps help test-clone apparmor-vm
## all: build build/python-sandbox-mcp (the default)
all: check-deps $(BIN)

## check-deps: fail with a hint when a build dependency is missing
check-deps:
	@pkg-config --exists $(PKGS) || { echo "missing build dependencies: run 'make setup' (or scripts/setup.sh) first" >&2; exit 2; }

$(BIN): $(OBJS)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

# The embedded files (.incbin) are dependencies the compiler cannot see.
$(BUILD)/obj/policy/builtin_skill.o: SKILL.md
$(BUILD)/obj/interp/bootstrap_py.o: $(wildcard interp/bootstrap/*.py)
$(BUILD)/obj/%.o: %.S
	@mkdir -p $(dir $@)
	$(CC) $(SANFLAGS) -c -I. -o $@ $<

$(BUILD)/test/%: test/unit/%.c $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(shell pkg-config --cflags cmocka) $(ALL_LDFLAGS) -o $@ $< $(LIB_OBJS) $(LIBS) $(shell pkg-config --libs cmocka)

$(BUILD)/helpers/%: test/helpers/%.c $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(LIB_OBJS) $(LIBS)

## setup: install the missing Debian and npm packages (scripts/setup.sh)
setup:
	scripts/setup.sh

## unit: C unit tests (cmocka), the test helpers and the layers' check
# Each unit binary is a target of its own, so that `make -j unit` runs them
# side by side: most of their time is spent waiting on children and timers,
# not on the CPU.  (With -O, each one's output stays together.)
UNIT_RUNS := $(UNIT_BINS:=.run)
.PHONY: $(UNIT_RUNS)
$(UNIT_RUNS): %.run: % $(HELPER_BINS)
	@echo "== $*"; $*
unit: $(UNIT_RUNS) layers
	@echo "== test/layers/test_ratchet.py"; test/layers/test_ratchet.py $(BUILD)/obj

## states-log: the supervisor tests' state-change log, STATES_RUNS runs of each into build/states/ (compare two sets with scripts/states_diff.py)
STATES_RUNS ?= 15
.PHONY: states-log
states-log: $(BUILD)/test/test_supervisor $(BUILD)/test/test_sup_forged
	@mkdir -p $(BUILD)/states
	@for i in $$(seq 1 $(STATES_RUNS)); do \
		PSM_TRACE_STATES=1 $(BUILD)/test/test_supervisor >$(BUILD)/states/supervisor-$$i.log 2>&1 || exit 1; \
		PSM_TRACE_STATES=1 $(BUILD)/test/test_sup_forged >$(BUILD)/states/forged-$$i.log 2>&1 || exit 1; \
	done
	@echo "states-log: $(STATES_RUNS) runs of each in $(BUILD)/states/; keep them aside, change the code, run again, then"
	@echo "  scripts/states_diff.py OLD/supervisor-*.log -- $(BUILD)/states/supervisor-*.log (and forged-*)"

## layers: fail when an include or a call goes up a layer or forms a cycle, or supervisor/ gains an arrow or a field writer
layers: $(OBJS)
	@scripts/layers.py --objs $(BUILD)/obj --files supervisor scripts/supervisor-arrows.txt $(LAYERS)
	@scripts/writers.py scripts/supervisor-writers.txt

## layers-shrink: drop from scripts/supervisor-{arrows,writers}.txt what the code no longer has
layers-shrink: $(OBJS)
	@scripts/layers.py --objs $(BUILD)/obj --files supervisor scripts/supervisor-arrows.txt --shrink $(LAYERS)
	@scripts/writers.py scripts/supervisor-writers.txt --shrink

## integration: the real binary through the MCP TypeScript SDK (test/integration/)
integration: $(BIN) $(HELPER_BINS)
	test/integration/run.sh $(BIN)

# The jail's escape suite: every effect checked from outside the sandbox.
## jail: the escape suite, as root and as nobody (test/jail/)
jail: $(HELPER_BINS)
	test/jail/run.sh $(BUILD)/helpers

# The unit tests and the integration suite once more under AddressSanitizer
# and UndefinedBehaviorSanitizer (build/san/; options built into the binary).
## test-san: unit, fuzz replay and integration again under ASan+UBSan
test-san:
	$(MAKE) -j$(JOBS) SANITIZE=address,undefined all
	$(MAKE) -j$(STAGE_JOBS) -O SANITIZE=address,undefined unit fuzz-replay
	test/integration/run.sh build/san/python-sandbox-mcp

# The integration suite with the server under valgrind memcheck (slow; not
# part of make test): exit 99 on any memory error or leak fails the suite.
# The wrapper execs valgrind on the server (same pid; the zygote is a fresh
# exec, so only the server is under valgrind); any error or leak makes the
# server exit 99, which the suite's shutdown checks see.  The server it runs
# is a copy beside it (python-sandbox-mcp.real), and helpers/ is build's, so
# that the tests that stage the server where another user can run it (as
# nobody, under Docker's rules) stage the wrapper with its program.
# VG_TESTS: the test files.  The server is 20 to 50 times slower there, so
# the tests that bound how soon a limit acts assert that it acts, not how
# soon (VALGRIND in test/integration/lib.mjs).  Left out: lifecycle.test.mjs,
# which runs the server from a mode-700 directory as nobody (a program can
# be run from there, a script such as the wrapper cannot be read); test-san
# runs it with the server under ASan and UBSan.
VG_DIR := $(BUILD)/valgrind
VG_WRAPPER := $(VG_DIR)/python-sandbox-mcp
VG_OUT := test/integration/lifecycle.test.mjs
VG_TESTS ?= $(filter-out $(VG_OUT),$(wildcard test/integration/*.test.mjs))
## valgrind: the integration suite with the server under valgrind memcheck (slow)
valgrind: $(BIN) $(HELPER_BINS)
	@command -v valgrind >/dev/null || { echo "valgrind: apt-get install valgrind" >&2; exit 2; }
	@mkdir -p $(VG_DIR)
	cp $(BIN) $(VG_DIR)/python-sandbox-mcp.real
	ln -sfn ../helpers $(VG_DIR)/helpers
	printf '#!/bin/sh\nexec valgrind --quiet --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible --trace-children=no "$$(dirname "$$0")/python-sandbox-mcp.real" "$$@"\n' > $(VG_WRAPPER)
	chmod +x $(VG_WRAPPER)
	test/integration/run.sh $(VG_WRAPPER) $(VG_TESTS)

# The fast half of make test, for a change in progress: the unit tests and
# the integration files that start few servers and wait on no slow limit
# (the protocol, the tools and their replies, the first call after a
# restart, two servers on one project).  Left to make test: the escape
# suite, the hostile and nobody suites, the limits, faults, replay, warm-up
# and most of the saved-session files, the sanitizers and the clients.
CHECK_TESTS := $(addprefix test/integration/,$(addsuffix .test.mjs,\
	protocol protocol_modern protocol_versions tools_list execute output reply artifacts verify \
	resources stdout_purity startup cli policy_error environ usage proctitle check_root trust_check \
	persist_first persist_lock))
## check: the fast half of make test (build, unit, the quick integration files): a few minutes
check: all $(HELPER_BINS)
	$(MAKE) -j$(STAGE_JOBS) -O unit
	test/integration/run.sh $(BIN) $(CHECK_TESTS)

# make test's pace on a small machine: the builds use every core; the
# stages that mostly wait (the unit binaries, the escape suite, the fuzz
# replays, the soaks and the kill races, each its own servers in its own
# temporary directories) run STAGE_JOBS at once; the integration suite and
# the clients, which keep the CPU busy by themselves, run alone.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
STAGE_JOBS ?= 4
## test: set up, then every test (about 15 to 18 minutes on 2 cores; the container tests are test-packages)
test: setup
	$(MAKE) -j$(JOBS) all $(HELPER_BINS)
	$(MAKE) -j$(STAGE_JOBS) -O unit apparmor-check deb-check jail fuzz-replay fuzz-rpc hostile soak-short kill-race kill-state-short
	$(MAKE) integration
	$(MAKE) test-san
	$(MAKE) test-clients

## demo: set up, build and run the latency scenario through a real MCP client
demo: setup
	$(MAKE) all
	demo/run.sh $(BIN)

# What make install and the Debian package install (PREFIX/...):
#   bin/python-sandbox-mcp, bin/python-sandbox-mcp-install-skill,
#   share/man/man1/python-sandbox-mcp.1 (and the installer's page, a link),
#   share/python-sandbox-mcp/ (SKILL.md, the AppArmor profile and its script),
#   share/doc/python-sandbox-mcp/ (README.md, docs/, SKILL.md as a link).
DATADIR = $(PREFIX)/share/python-sandbox-mcp
DOCDIR = $(PREFIX)/share/doc/python-sandbox-mcp
MAN1DIR = $(PREFIX)/share/man/man1
DOCS := $(wildcard docs/*.md)
# The man page's date: the newest release's, from the package changelog.
RELEASE_DATE = $(shell date -u -d "$$(sed -n 's/^ -- .*>  //p;T;q' packaging/debian/changelog)" +%Y-%m-%d)
$(BUILD)/man/python-sandbox-mcp.1: docs/python-sandbox-mcp.1 VERSION packaging/debian/changelog
	@mkdir -p $(dir $@)
	sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@DATE@|$(RELEASE_DATE)|g' $< > $@
$(BUILD)/python-sandbox-mcp-install-skill: scripts/install-skill.in FORCE
	@mkdir -p $(dir $@)
	sed 's|@SKILL@|$(DATADIR)/SKILL.md|' $< > $@.tmp && cmp -s $@.tmp $@ || mv -f $@.tmp $@; rm -f $@.tmp
.PHONY: FORCE

## install: install the binary, its man page, SKILL.md and the docs under PREFIX (default /usr/local)
# Where AppArmor restricts unprivileged user namespaces (Ubuntu 23.10 and
# later), a profile granting them to the installed binary is installed and
# loaded too; elsewhere nothing more happens (scripts/apparmor.sh).  With
# DESTDIR (a staged install, as the package makes) that is not decided here:
# the package decides where it is installed.
install: $(BIN) $(BUILD)/man/python-sandbox-mcp.1 $(BUILD)/python-sandbox-mcp-install-skill
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/python-sandbox-mcp
	install -D -m 0755 $(BUILD)/python-sandbox-mcp-install-skill $(DESTDIR)$(PREFIX)/bin/python-sandbox-mcp-install-skill
	install -D -m 0644 $(BUILD)/man/python-sandbox-mcp.1 $(DESTDIR)$(MAN1DIR)/python-sandbox-mcp.1
	ln -sf python-sandbox-mcp.1 $(DESTDIR)$(MAN1DIR)/python-sandbox-mcp-install-skill.1
	install -D -m 0644 SKILL.md $(DESTDIR)$(DATADIR)/SKILL.md
	install -D -m 0755 scripts/apparmor.sh $(DESTDIR)$(DATADIR)/apparmor.sh
	install -D -m 0644 scripts/apparmor/python-sandbox-mcp.in $(DESTDIR)$(DATADIR)/apparmor/python-sandbox-mcp.in
	install -D -m 0644 README.md $(DESTDIR)$(DOCDIR)/README.md
	install -d $(DESTDIR)$(DOCDIR)/docs
	install -m 0644 $(DOCS) $(DESTDIR)$(DOCDIR)/docs/
	ln -sf ../../python-sandbox-mcp/SKILL.md $(DESTDIR)$(DOCDIR)/SKILL.md
	@if [ -z "$(DESTDIR)" ]; then $(DATADIR)/apparmor.sh install $(PREFIX)/bin/python-sandbox-mcp; \
	else echo "apparmor: not decided for a staged install (DESTDIR): the package decides on the host it is installed on"; fi

## uninstall: remove what make install installed (and the AppArmor profile, if any)
uninstall:
	scripts/apparmor.sh uninstall
	rm -f $(DESTDIR)$(PREFIX)/bin/python-sandbox-mcp $(DESTDIR)$(PREFIX)/bin/python-sandbox-mcp-install-skill
	rm -f $(DESTDIR)$(MAN1DIR)/python-sandbox-mcp.1 $(DESTDIR)$(MAN1DIR)/python-sandbox-mcp-install-skill.1
	rm -rf $(DESTDIR)$(DATADIR) $(DESTDIR)$(DOCDIR)

# The AppArmor profile's syntax, parsed by apparmor_parser without loading it.
## apparmor-check: parse the AppArmor profile with apparmor_parser (loads nothing)
apparmor-check:
	scripts/apparmor.sh check

# The profile live: loaded into a real AppArmor kernel (Debian 13's, in a
# virtual machine built from Debian's packages under build/apparmor-vm/:
# KVM, else QEMU's emulator), the package run under it as root and as a
# user, and what it grants to the sandbox and to other programs checked from
# outside (test/apparmor-vm/).  Not part of make test: it needs root,
# downloads about 400 MB the first time (7 minutes here), then takes about 3.
## apparmor-vm: the AppArmor profile loaded and tried in a Debian 13 virtual machine (root; KVM or QEMU's emulator)
apparmor-vm:
	test/apparmor-vm/run.sh

# The project to install the skill into: PROJECT=DIR, or the current
# directory when that is not this checkout (make -C runs in the checkout, so
# a forgotten PROJECT= would install the skill into the checkout itself):
#   cd /path/to/project && make -C /path/to/python-sandbox-mcp install-skill PROJECT=$PWD
# The installed python-sandbox-mcp-install-skill does the copying, with this
# checkout's SKILL.md: a copy the project edited is kept unless FORCE=1.
SRCDIR := $(dir $(abspath $(firstword $(MAKEFILE_LIST))))
PROJECT ?= $(CURDIR)
## install-skill: copy SKILL.md into PROJECT's .agents/ and .claude/ skill folders (PROJECT=DIR, FORCE=1)
install-skill:
	@if [ "$(origin PROJECT)" = file ] && [ "$(realpath $(CURDIR))/" = "$(realpath $(SRCDIR))/" ]; then \
		echo "install-skill: which project? make runs in this checkout ($(CURDIR)): give the project as PROJECT=DIR," >&2; \
		echo "  for example: cd /path/to/project && make -C $(CURDIR) install-skill PROJECT=\$$PWD" >&2; exit 2; fi
	@sed 's|@SKILL@|$(SRCDIR)SKILL.md|' $(SRCDIR)scripts/install-skill.in | sh -s -- $(if $(FORCE),--force) "$(PROJECT)"

## clean: remove build/
clean:
	rm -rf build

# make test from a checkout that other users cannot enter: a clone of the
# committed HEAD in a fresh mode-700 directory (as mktemp -d makes it), where
# CLONE_TARGETS run (default: the escape suite, whose second half runs as
# nobody).  Not part of make test: it builds everything once more.
CLONE_TARGETS ?= jail
## test-clone: clone HEAD into a private (mode 700) directory and run CLONE_TARGETS (default jail) there
test-clone:
	@d=$$(mktemp -d) && chmod 700 "$$d" && git clone -q "$(SRCDIR)" "$$d/psm" && \
		{ $(MAKE) -C "$$d/psm" $(CLONE_TARGETS); rc=$$?; rm -rf "$$d"; exit $$rc; }

# Every target of this Makefile and the included .mk files, one line each:
# the line '## NAME: what it does' above a target describes it; a target
# without one is still listed, so a new target never goes missing here.
## help: list every target with one line each
help:
	@awk '/^## [A-Za-z0-9_.%-]+: / { n = $$2; sub(/:$$/, "", n); d = $$0; sub(/^## [^:]*: /, "", d); doc[n] = d; order[++k] = n; next } \
	     /^[a-z][A-Za-z0-9_-]*:([^=]|$$)/ { n = $$1; sub(/:.*/, "", n); if (!(n in seen)) { seen[n] = 1; tgt[++m] = n } } \
	     END { printf "python-sandbox-mcp %s: make TARGET\n\n", "$(VERSION)"; \
	           for (i = 1; i <= k; i++) printf "  %-18s %s\n", order[i], doc[order[i]]; \
	           for (i = 1; i <= m; i++) if (!(tgt[i] in doc)) printf "  %-18s (not described)\n", tgt[i] }' \
	     $(filter-out %.d,$(MAKEFILE_LIST))

-include $(OBJS:.o=.d) $(UNIT_BINS:=.d) $(HELPER_BINS:=.d)

# Each area may bring its own targets (bench/bench.mk, test/fuzz/fuzz.mk,
# test/clients/clients.mk, packaging/packaging.mk): they build on the
# variables above.
-include $(wildcard bench/*.mk test/*/*.mk packaging/*.mk)
