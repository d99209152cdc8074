# Soak and hostile-input tests: raw JSON-RPC over
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

## soak: 10,000 mixed requests with session processes killed at random (minutes)
soak: $(BIN)
	$(SOAK_PYTHON) test/soak/soak.py --bin $(BIN) --requests 10000 $(SOAK_ARGS)

## soak-short: the soak with 1,000 requests (about a minute; in make test)
soak-short: $(BIN)
	$(SOAK_PYTHON) test/soak/soak.py --bin $(BIN) --requests 1000 $(SOAK_ARGS)

## hostile: hostile inputs: 100 MB lines, nesting and alias bombs, 10,000 sessions
hostile: $(BIN)
	$(SOAK_PYTHON) test/soak/hostile.py --bin $(BIN)

# A regression test for the reply shift after a kill (see kill_race.py).
.PHONY: kill-race
## kill-race: regression test for the reply shift after a session is killed
kill-race: $(BIN)
	$(SOAK_PYTHON) test/soak/kill_race.py --bin $(BIN)

# The rollback promise with copies, sessions and the zygote killed from
# outside among the usual faults, every reply checked against a model of
# what each session holds (see kill_state.py), in both jail modes.
.PHONY: kill-state kill-state-short
## kill-state: outside kills of copies, sessions and the zygote, 600 operations per jail mode (minutes)
kill-state: $(BIN) $(BUILD)/helpers/dockerrun
	$(SOAK_PYTHON) test/soak/kill_state.py --bin $(BIN) --ops 600 $(SOAK_ARGS)
	$(SOAK_PYTHON) test/soak/kill_state.py --bin $(BIN) --ops 600 --nsfree $(SOAK_ARGS)

## kill-state-short: the same with 40 operations per jail mode (about half a minute each; in make test)
kill-state-short: $(BIN) $(BUILD)/helpers/dockerrun
	$(SOAK_PYTHON) test/soak/kill_state.py --bin $(BIN) --ops 40 $(SOAK_ARGS)
	$(SOAK_PYTHON) test/soak/kill_state.py --bin $(BIN) --ops 40 --nsfree $(SOAK_ARGS)
