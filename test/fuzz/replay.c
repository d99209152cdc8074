/* A plain replay driver for the fuzz targets: links with one target's
 * LLVMFuzzerTestOneInput and runs it over every file named on the command
 * line (directories are walked, in name order, recursively), so `make
 * fuzz-replay` checks the corpora and the regressions with gcc, with or
 * without the sanitizers, and without libFuzzer.
 *
 * Each input is given in a heap buffer of exactly its size, as libFuzzer
 * does.  Exit status: 0 when every input ran (a failed check aborts),
 * 1 when a file could not be read, 2 for usage. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

static unsigned long n_files;
static int status;
static const char *current; /* the input being run, for crash reports */

/* Set by the sanitizer runtimes when linked in; absent (NULL) otherwise. */
void __sanitizer_set_death_callback(void (*cb)(void)) __attribute__((weak));

static void say_current(void)
{
	if (current) {
		static const char pre[] = "replay: the failing input is ";
		(void)!write(2, pre, sizeof pre - 1);
		(void)!write(2, current, strlen(current));
		(void)!write(2, "\n", 1);
	}
}

static void on_abort(int sig)
{
	say_current();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	size_t cap = 4096, len = 0;
	unsigned char *buf = malloc(cap);
	size_t n;
	while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap) {
			unsigned char *p = realloc(buf, cap *= 2);
			if (!p)
				free(buf);
			buf = p;
		}
	}
	int bad = ferror(f) || !buf;
	fclose(f);
	if (bad) {
		fprintf(stderr, "replay: %s: cannot read\n", path);
		free(buf);
		return -1;
	}
	/* Exact size: reads past the end are caught by ASan. */
	unsigned char *exact = malloc(len ? len : 1);
	if (!exact)
		abort();
	memcpy(exact, buf, len);
	free(buf);
	if (getenv("REPLAY_VERBOSE"))
		fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
	current = path;
	LLVMFuzzerTestOneInput(exact, len);
	current = NULL;
	free(exact);
	n_files++;
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static void run_path(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		status = 1;
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (run_file(path) < 0)
			status = 1;
		return;
	}
	struct dirent **ents;
	int n = scandir(path, &ents, NULL, by_name);
	if (n < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		status = 1;
		return;
	}
	for (int i = 0; i < n; i++) {
		const char *name = ents[i]->d_name;
		if (name[0] != '.') {
			size_t len = strlen(path) + strlen(name) + 2;
			char *p = malloc(len);
			if (!p)
				abort();
			snprintf(p, len, "%s/%s", path, name);
			run_path(p);
			free(p);
		}
		free(ents[i]);
	}
	free(ents);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
		return 2;
	}
	signal(SIGABRT, on_abort);
	signal(SIGSEGV, on_abort);
	signal(SIGBUS, on_abort);
	if (__sanitizer_set_death_callback)
		__sanitizer_set_death_callback(say_current);
	for (int i = 1; i < argc; i++)
		run_path(argv[i]);
	fprintf(stderr, "%s: %lu inputs replayed%s\n", argv[0], n_files, status ? " (some files could not be read)" : "");
	return status;
}
