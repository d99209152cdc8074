/* The replay log's decision, on its own so that it can be tested as a
 * table: after a call that keeps its state, is a checkpoint taken (a fork
 * of the session), or is the cell only logged, to be run again on a
 * rollback?  Everything it reads is the server's own: the code it sent, the
 * time it measured, the workspace diff it made, the threads the kernel
 * lists.  Nothing the session says about itself is believed. */
#ifndef SUPERVISOR_REPLAY_H
#define SUPERVISOR_REPLAY_H

#include <stdbool.h>
#include <stddef.h>

/* The log's bounds: at most this many cells and this much code since the
 * last checkpoint.  The budget below is what bounds a replay's time; the
 * count bounds the log's memory only (a cheap cell is about a millisecond
 * of the budget: 64 cells forked every 64 such calls, and each fork cost
 * the calls after it their copy-on-write faults). */
#define REPLAY_MAX_CELLS 256
#define REPLAY_MAX_CODE ((size_t)1 << 20)
/* What the logged cells may take to run again before a checkpoint is
 * taken anyway (the sum of their prices): REPLAY_FORK_SHARE times what a
 * checkpoint of this session costs, at least REPLAY_BUDGET_MS and at most
 * REPLAY_BUDGET_MAX_MS (replay_budget_ms).  A checkpoint costs its fork
 * and the copies the calls after it make of the pages it shares: at 4M
 * rows, back to back, about 250 ms of the next calls' time, so that with
 * a fixed second 47 of 140 calls of the agent loop forked (37 for the
 * budget) and the loop took 1.23 times its time without checkpoints.
 * Priced, checkpoints taken for the budget cost at most a thirtieth of
 * the calls' time, and a rollback still runs at most 10 s of cells
 * again; a small state's checkpoints cost a few milliseconds, and its
 * budget stays at a second. */
#define REPLAY_BUDGET_MS 1000.0
#define REPLAY_BUDGET_MAX_MS 10000.0
#define REPLAY_FORK_SHARE 30.0
/* The most a copy-on-write fault is taken to cost when the first call
 * after a checkpoint is priced (the dearest measured: 17 to 33 us on VMs
 * whose hypervisor shadows page tables, under 1 us on bare metal), and the
 * faults from which such a call teaches what one costs the session. */
#define COPY_FAULT_US_MAX 40.0
#define COPY_LEARN_FAULTS 4096
/* The CPU time (ms) from which a call's copying is judged as a share of
 * its CPU time rather than of its duration. */
#define COPY_CPU_MIN_MS 50.0

/* Why a checkpoint is taken, or REPLAY_LOG when the cell is only logged. */
enum replay_verdict {
	REPLAY_LOG,
	REPLAY_FORK_NO_BASE,  /* no checkpoint yet to replay from */
	REPLAY_FORK_KIND,     /* not a plain kept state (restored, forked, at exit) */
	REPLAY_FORK_WROTE,    /* the workspace diff found a file created, changed or deleted */
	REPLAY_FORK_THREADS,  /* more than one thread at the freeze */
	REPLAY_FORK_CODE,     /* the code names the clock, entropy, threads, temp files, an effect */
	REPLAY_FORK_EFFECT,   /* the kernel saw an effect past the session's memory */
	REPLAY_FORK_FULL,     /* the log is full (cells or code) */
	REPLAY_FORK_BUDGET,   /* the logged cells would take the budget to run again */
};

struct replay_facts {
	bool has_base;        /* a checkpoint exists */
	bool plain;           /* the call kept its state (not restored, forked, the exit's) */
	bool wrote;
	int threads;          /* the session's threads, or 0 when unknown (unsure: a fork) */
	const char *code;
	/* What the kernel saw of the call that reaches past the session's
	 * memory (replay.c: kview_effect), or NULL: bytes written beyond its
	 * output, a process started, a descriptor opened, closed or moved. */
	const char *effect;
	bool import_read;     /* the session's word: an import read beyond the installed Python */
	double ms;            /* what running it again costs (replay_log_instead's price) */
	int log_n;            /* cells logged already */
	size_t log_code;      /* their code's bytes */
	double log_ms;        /* their durations' sum */
	double budget_ms;
};

/* The verdict on a call; for REPLAY_FORK_CODE the word found goes to
 * why[0..n) (replay_code_unsafe; why may be NULL when n is 0), for
 * REPLAY_FORK_EFFECT the kernel's reason. */
enum replay_verdict replay_decide(const struct replay_facts *f, char *why, size_t n);
const char *replay_verdict_name(enum replay_verdict v);

/* Whether the code text names something that makes a second run differ
 * from the first (the clock, entropy, the process id, threads, temporary
 * files outside the workspace, a file read) or that reaches past the
 * session's memory (a file written, the network, a program, a database);
 * the name it found in why.
 * Words in strings and comments count too: when unsure, a checkpoint.
 * The word import counts only with import_read (the cell's result said
 * one of its imports read beyond the installed Python). */
bool replay_code_unsafe(const char *code, bool import_read, char *why, size_t n);

/* The budget for a session whose checkpoint costs fork_ms all told (its
 * fork, and the copying it made the calls after it do): REPLAY_FORK_SHARE
 * times that, within [REPLAY_BUDGET_MS, REPLAY_BUDGET_MAX_MS]; or, under
 * PSM_TEST_REPLAY_MS=N, N whatever the cost (a knob that can only tighten
 * it, below REPLAY_BUDGET_MS; 0 takes a checkpoint after every call, as
 * before the log existed, for the benchmarks' comparison). */
double replay_budget_ms(double fork_ms);

#endif
