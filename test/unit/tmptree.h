/* Removes a test's temporary tree: every entry below path and path itself,
 * following no symlink (nftw with FTW_PHYS).  Shared by the unit tests. */
#ifndef TEST_TMPTREE_H
#define TEST_TMPTREE_H

#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>

static inline int tmp_tree_rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(p);
	return 0;
}

static inline void tmp_tree_remove(const char *path)
{
	nftw(path, tmp_tree_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
