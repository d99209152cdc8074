/* Deletion from an open-addressing table (oatab.h). */
#include "oatab.h"

void oatab_erase(void *tab, size_t slots, size_t i, const struct oatab_ops *ops)
{
	size_t mask = slots - 1;
	ops->clear(tab, i);
	for (size_t j = (i + 1) & mask; ops->used(tab, j); j = (j + 1) & mask) {
		size_t h = ops->home(tab, j);
		/* A look for j's entry starts at h and walks forward: it still
		 * reaches j without crossing the hole at i when h lies
		 * cyclically in (i, j]. */
		if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
			continue;
		ops->move(tab, i, j);
		ops->clear(tab, j);
		i = j;
	}
}
