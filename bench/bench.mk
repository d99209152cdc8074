# `make bench`: the server against a warm Jupyter kernel, `python3 -c` per
# call and the floors, in one run; prints the table and writes
# bench/RESULTS.md.  Not part of `make test`: nothing here asserts a time.
#   make bench BENCH_ARGS=--quick      a short smoke run
#   make bench BENCH_ARGS=--skip=jupyter,output,rewrite,strings,cold
BENCH_BUILD := $(BUILD)/bench
BENCH_FLOORS := $(BENCH_BUILD)/floor_pipe $(BENCH_BUILD)/floor_pyrun $(BENCH_BUILD)/floor_echo $(BENCH_BUILD)/floor_cow
BENCH_PY := /usr/bin/python3
BENCH_ARGS ?=
BENCH_CFLAGS := -std=gnu11 -O2 -g -Wall -Wextra -Werror

# What each part measured against the protection targets, for the table at
# the end (bench/targets.py); removed at the start of each run.
BENCH_TARGETS := $(BENCH_BUILD)/targets.json
# --quick in BENCH_ARGS makes every part a smoke run, unless its own
# *_ARGS say otherwise.
BENCH_QUICK := $(filter --quick,$(BENCH_ARGS))

.PHONY: bench bench-setup bench-agent
## bench: the server against Jupyter and python3 -c, the agent workload, the agent loop, then every protection target; writes bench/RESULTS.md
bench: setup bench-setup $(BIN) $(BENCH_FLOORS) $(BUILD)/helpers/dockerrun
	rm -f $(BENCH_TARGETS)
	$(BENCH_PY) bench/run.py --server $(BIN) --floors $(BENCH_BUILD) --results bench/RESULTS.md \
		--targets $(BENCH_TARGETS) $(BENCH_ARGS)
	$(BENCH_PY) bench/run.py --server $(BIN) --floors $(BENCH_BUILD) --results bench/RESULTS.md --append \
		--wrap $(BUILD)/helpers/dockerrun --skip=jupyter,output,rewrite,strings $(BENCH_ARGS)
	$(BENCH_PY) bench/agent.py --server $(BIN) --results bench/RESULTS.md --targets $(BENCH_TARGETS) \
		$(or $(AGENT_ARGS),$(BENCH_QUICK))
	$(BENCH_PY) bench/loop.py --server $(BIN) --floors $(BENCH_BUILD) --results bench/RESULTS.md --targets $(BENCH_TARGETS) \
		$(or $(LOOP_ARGS),$(BENCH_QUICK))
	$(BENCH_PY) bench/warmup.py --server $(BIN) --results bench/RESULTS.md --targets $(BENCH_TARGETS) \
		$(or $(WARMUP_ARGS),$(BENCH_QUICK))
	$(BENCH_PY) bench/targets.py --targets $(BENCH_TARGETS) --results bench/RESULTS.md

#   make bench-warm WARM_ARGS="--rounds 10 --think-calls 20"
#   make bench-warm WARM_ARGS=--phases     and the server main thread's phases (perf)
#   make bench-warm WARM_ARGS=--dockerrun  the servers under dockerrun (no CAP_SYS_PTRACE)
WARM_ARGS ?=
## bench-warm: only the warm `1+1` rows (back to back and after 100 ms think, checkpoints on and off, the client floor), interleaved, with each process's CPU per call (about 20 s)
.PHONY: bench-warm
bench-warm: $(BIN) $(BENCH_BUILD)/floor_echo $(BENCH_BUILD)/floor_pipe $(BUILD)/helpers/dockerrun
	$(BENCH_PY) bench/warm.py --server $(BIN) --floors $(BENCH_BUILD) $(WARM_ARGS)

#   make bench-loop LOOP_ARGS=--quick                 development: 400k rows, 3 rounds, each kind of cell once
#   make bench-loop LOOP_ARGS="--sizes 400000 --sides ours,off"
#   make bench-loop LOOP_ARGS="--sides ours,off --rounds 7"   checkpoints on against off only
LOOP_ARGS ?=
## bench-loop: one agent's loop over one DataFrame (400k and 4M rows, 28 calls, 1 s think and back to back): checkpoints on against off pair by pair (5 rounds), against Jupyter, and the warm `1+1` against the client floor (about an hour on a loaded 2-core VM)
.PHONY: bench-loop
bench-loop: setup bench-setup $(BIN) $(BENCH_BUILD)/floor_echo
	$(BENCH_PY) bench/loop.py --server $(BIN) --floors $(BENCH_BUILD) $(LOOP_ARGS)

#   make bench-warmup WARMUP_ARGS=--quick
WARMUP_ARGS ?=
## bench-warmup: the learned warm-up: a fresh session's import of scipy.stats + sklearn before and after learning, cold start, the zygote's PSS
.PHONY: bench-warmup
bench-warmup: setup $(BIN)
	$(BENCH_PY) bench/warmup.py --server $(BIN) $(WARMUP_ARGS)

#   make bench-agent AGENT_ARGS="--rounds 1 --skip scale"   a short run (the scale rows take about 10 min)
AGENT_ARGS ?=
## bench-agent: the agent-workload suite (40+ tasks) through the server, Jupyter and python3 -c, and N agents at once
bench-agent: setup bench-setup $(BIN)
	$(BENCH_PY) bench/agent.py --server $(BIN) $(AGENT_ARGS)

#   make bench-scale SCALE_ARGS="--scale 1,5 --scale-seconds 10"   a short run
SCALE_ARGS ?=
## bench-scale: N agents at once (1, 5, 10, 25, 50), ours against N Jupyter kernels: PSS, tasks/s, p95, where it breaks (about 10 min)
.PHONY: bench-scale
bench-scale: setup bench-setup $(BIN)
	$(BENCH_PY) bench/agent.py --server $(BIN) --skip suite $(SCALE_ARGS)

## bench-policies: the agent tasks in one session under four policies (checkpoints, saved sessions on or off): what each costs
.PHONY: bench-policies
bench-policies: setup $(BIN)
	$(BENCH_PY) bench/agent_policies.py --server $(BIN)

## bench-persist: what saving, restoring and forking a session cost (10 MB to 1 GiB, beside the disk's read time); writes bench/PERSIST.md
.PHONY: bench-persist
bench-persist: setup $(BIN)
	$(BENCH_PY) bench/persist.py --server $(BIN) --results bench/PERSIST.md $(BENCH_ARGS)

#   make bench-freshmem FRESHMEM_ARGS="512 5"      MB written and rounds
FRESHMEM_ARGS ?=
## bench-freshmem: what fresh memory costs right after a free and after 0.5 to 5 s idle (a VM's free page reporting makes it several times dearer after 2 s); about a minute
.PHONY: bench-freshmem
bench-freshmem: $(BENCH_BUILD)/freshmem
	$(BENCH_BUILD)/freshmem $(FRESHMEM_ARGS)

## bench-setup: install what the benchmark compares against (Jupyter kernel)
bench-setup:
	bench/setup.sh

$(BENCH_BUILD)/floor_pipe: bench/floor_pipe.c bench/timing.h
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $<

$(BENCH_BUILD)/floor_cow: bench/floor_cow.c bench/timing.h
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $<

$(BENCH_BUILD)/freshmem: bench/freshmem.c
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $<

$(BENCH_BUILD)/floor_echo: bench/floor_echo.c
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $<

$(BENCH_BUILD)/floor_pyrun: bench/floor_pyrun.c bench/timing.h
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) $(shell pkg-config --cflags python3-embed) -o $@ $< $(shell pkg-config --libs python3-embed)

#   make bench-history HISTORY_ARGS="--calls 1000"
HISTORY_ARGS ?=
## bench-history: a 10,000-call session: the server's memory and call time as its history grows, the export's time
.PHONY: bench-history
bench-history: $(BIN)
	$(BENCH_PY) bench/history.py --server $(BIN) $(HISTORY_ARGS)
