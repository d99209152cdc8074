# Fuzzing: libFuzzer targets over the parsers and decoders, a plain
# replay driver, and a process-level fuzz of the JSON-RPC dispatcher.
#
#   make fuzz              libFuzzer (clang 14, ASan+UBSan), FUZZ_TIME seconds
#                          per target, FUZZ_PAR targets at once, then fuzz-rpc
#   make fuzz-run-TARGET   one target (policy, validate, wire, jsonrpc, dispatch, zygote, result, save)
#   make fuzz-replay       gcc replay of every corpus and regression file
#                          (add SANITIZE=address,undefined for the sanitizers)
#   make fuzz-rpc          mutated JSON-RPC lines to the real binary
#   make fuzz-merge        minimise the work corpora into fixtures/fuzz/
#
# The libFuzzer builds live in build/libfuzzer/ whatever SANITIZE says; new
# corpus entries go to build/libfuzzer/corpus/TARGET (fixtures/fuzz/ is only
# read) and crashes to build/libfuzzer/crashes/TARGET/.  A crash worth
# keeping goes to fixtures/fuzz/TARGET/regressions/, which fuzz-replay runs.

FUZZ_TARGETS := policy validate wire jsonrpc dispatch zygote result save
FUZZ_CC ?= clang-14
FUZZ_TIME ?= 60
FUZZ_RUNS ?= -1
FUZZ_PAR ?= 2
# More libFuzzer flags, e.g. FUZZ_FLAGS='-fork=1 -ignore_crashes=1' to go on past
# a known finding (fork mode reports its executions in the log, not in stat::).
FUZZ_FLAGS ?=
FUZZ_DIR := build/libfuzzer
FUZZ_RPC_LINES ?= 3000
SOAK_PYTHON ?= python3
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# The project's flags minus what is gcc-only or set here (optimisation,
# fortify, -Werror: clang warns about gcc-only options).
FUZZ_CFLAGS := $(filter-out -Werror -Wformat-truncation=% -O% -D_FORTIFY_SOURCE=% -fsanitize=% \
	-fno-sanitize-recover=% -fno-omit-frame-pointer,$(ALL_CFLAGS)) -O1 -g $(FUZZ_SAN)
FUZZ_LIB_OBJS := $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(filter-out mcp/main.c,$(SRCS))) \
	$(patsubst %.S,$(FUZZ_DIR)/obj/%.o,$(ASMS))
FUZZ_BINS := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)
# Inputs per target (-max_len): files for the validators, lines for JSON-RPC.
FUZZ_MAXLEN_policy := 8192
FUZZ_MAXLEN_validate := 65536
FUZZ_MAXLEN_wire := 65536
FUZZ_MAXLEN_jsonrpc := 16384
FUZZ_MAXLEN_dispatch := 16384
FUZZ_MAXLEN_zygote := 4096
FUZZ_MAXLEN_result := 65536
FUZZ_MAXLEN_save := 300000
# Memory limits per target (MB): a validator whose memory grew with what
# the bytes expand to is a finding (libFuzzer reports it as a crash).
FUZZ_RSS_validate := 512
FUZZ_MALLOC_validate := 96

REPLAY_CFLAGS := $(filter-out -MMD -MP,$(ALL_CFLAGS))
REPLAY_BINS := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/replay_%)

.PHONY: fuzz fuzz-build fuzz-replay fuzz-rpc fuzz-merge $(FUZZ_TARGETS:%=fuzz-run-%)

# -w: the sources are held to gcc's warnings by the main build.
$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -w -fsanitize=fuzzer-no-link -c -o $@ $<

$(FUZZ_DIR)/obj/%.o: %.S
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -c -I. -o $@ $<

$(FUZZ_DIR)/obj/policy/builtin_skill.o: SKILL.md
$(FUZZ_DIR)/obj/interp/bootstrap_py.o: $(wildcard interp/bootstrap/*.py)

# An archive, so that each target links only the modules it calls.
$(FUZZ_DIR)/libpsm.a: $(FUZZ_LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_DIR)/fuzz_%: test/fuzz/fuzz_%.c test/fuzz/fuzz.h $(FUZZ_DIR)/libpsm.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_DIR)/libpsm.a $(LIBS) -lm

## fuzz-build: build the libFuzzer targets (clang)
fuzz-build: $(FUZZ_BINS)

## fuzz-run-TARGET: one libFuzzer target (policy, validate, wire, jsonrpc, dispatch, zygote, result)
$(FUZZ_TARGETS:%=fuzz-run-%): fuzz-run-%: $(FUZZ_DIR)/fuzz_%
	@mkdir -p $(FUZZ_DIR)/corpus/$* $(FUZZ_DIR)/crashes/$* fixtures/fuzz/$*/regressions
	@echo "== fuzz $*: $(FUZZ_TIME) s (log: $(FUZZ_DIR)/$*.log)"
	@$(FUZZ_DIR)/fuzz_$* -max_total_time=$(FUZZ_TIME) -runs=$(FUZZ_RUNS) -timeout=10 $(FUZZ_FLAGS) \
		-max_len=$(FUZZ_MAXLEN_$*) -rss_limit_mb=$(or $(FUZZ_RSS_$*),2048) \
		-malloc_limit_mb=$(or $(FUZZ_MALLOC_$*),$(or $(FUZZ_RSS_$*),2048)) -dict=fixtures/fuzz/$*.dict -print_final_stats=1 \
		-artifact_prefix=$(FUZZ_DIR)/crashes/$*/ \
		$(FUZZ_DIR)/corpus/$* fixtures/fuzz/$*/corpus fixtures/fuzz/$*/regressions \
		>$(FUZZ_DIR)/$*.log 2>&1; rc=$$?; \
	grep -E '^(stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb|SUMMARY)' $(FUZZ_DIR)/$*.log | sed 's/^/   $* /'; \
	if [ $$rc -eq 72 ]; then echo "fuzz $*: interrupted"; exit 0; fi; \
	if [ $$rc -ne 0 ]; then echo "fuzz $*: FAILED (exit $$rc); crash in $(FUZZ_DIR)/crashes/$*/, see $(FUZZ_DIR)/$*.log" >&2; exit 1; fi

## fuzz: libFuzzer over every parser for FUZZ_TIME s each, then fuzz-rpc
fuzz: $(FUZZ_BINS) $(BIN)
	@$(MAKE) --no-print-directory -j$(FUZZ_PAR) -k $(FUZZ_TARGETS:%=fuzz-run-%)
	@$(MAKE) --no-print-directory fuzz-rpc

# Keeps the smallest set of inputs that covers what the work corpus found.
## fuzz-merge: minimise the work corpora into fixtures/fuzz/
fuzz-merge: $(FUZZ_BINS)
	@set -e; for t in $(FUZZ_TARGETS); do \
		mkdir -p fixtures/fuzz/$$t/corpus; \
		$(FUZZ_DIR)/fuzz_$$t -merge=1 -max_len=$(FUZZ_MAXLEN_$$t) fixtures/fuzz/$$t/corpus $(FUZZ_DIR)/corpus/$$t \
			>$(FUZZ_DIR)/$$t.merge.log 2>&1; \
		echo "$$t: $$(ls fixtures/fuzz/$$t/corpus | wc -l) corpus files"; \
	done

$(BUILD)/fuzz/replay_%: test/fuzz/fuzz_%.c test/fuzz/replay.c test/fuzz/fuzz.h $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(REPLAY_CFLAGS) $(ALL_LDFLAGS) -o $@ test/fuzz/fuzz_$*.c test/fuzz/replay.c $(LIB_OBJS) $(LIBS) -lm

# Every target runs even when one fails; the status says whether all passed.
## fuzz-replay: replay every corpus and regression file through the parsers
fuzz-replay: $(REPLAY_BINS)
	@bad=; for t in $(FUZZ_TARGETS); do \
		$(BUILD)/fuzz/replay_$$t fixtures/fuzz/$$t || bad="$$bad $$t"; \
	done; \
	if [ -n "$$bad" ]; then echo "fuzz-replay: failed:$$bad" >&2; exit 1; fi

## fuzz-rpc: mutated JSON-RPC lines to the real binary
fuzz-rpc: $(BIN)
	$(SOAK_PYTHON) test/fuzz/rpc_fuzz.py --bin $(BIN) --lines $(FUZZ_RPC_LINES) --corpus fixtures/fuzz/rpc
