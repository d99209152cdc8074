# Soak and hostile-input tests (issue 6, items 3 and 4): raw JSON-RPC over
# stdio from Python's standard library (test/soak/mcpproc.py).
#
#   make soak          10,000 mixed requests with session processes killed
#                      at random (several minutes)
#   make soak-short    the same with 1,000 requests (about a minute)
#   make hostile       100 MB line, deep JSON, big code, 10,000 sessions,
#                      a billion-row print, binary output, huge and
#                      alias-bomb SKILL.md files
# SOAK_ARGS passes more options (e.g. SOAK_ARGS='--seed 7 --keep').

SOAK_PYTHON ?= python3
SOAK_ARGS ?=

.PHONY: soak soak-short hostile

soak: $(BIN)
	$(SOAK_PYTHON) test/soak/soak.py --bin $(BIN) --requests 10000 $(SOAK_ARGS)

soak-short: $(BIN)
	$(SOAK_PYTHON) test/soak/soak.py --bin $(BIN) --requests 1000 $(SOAK_ARGS)

hostile: $(BIN)
	$(SOAK_PYTHON) test/soak/hostile.py --bin $(BIN)

# A regression test for the reply shift after a kill (see kill_race.py).
.PHONY: kill-race
kill-race: $(BIN)
	$(SOAK_PYTHON) test/soak/kill_race.py --bin $(BIN)
