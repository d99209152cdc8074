/* Deletion from an open-addressing table, the one way the project does it.
 *
 * A table here is an array of a power of two slots, an entry kept at its
 * key's home slot or the first empty one after it (linear probing), never
 * more than half full, so a look always ends at its key or at an empty
 * slot.  Emptying a slot would cut the probe runs that cross it, hiding
 * entries placed beyond it; tombstones instead would fill a table that
 * churns (watches dropped and added for the life of a session).  So the
 * entries after the emptied slot that a look could no longer reach are
 * moved back into it, one hole at a time, until an empty slot ends the
 * run. */
#ifndef PSM_COMMON_OATAB_H
#define PSM_COMMON_OATAB_H

#include <stdbool.h>
#include <stddef.h>

struct oatab_ops {
	/* Slot i holds an entry. */
	bool (*used)(const void *tab, size_t i);
	/* The home slot of the entry in slot i. */
	size_t (*home)(const void *tab, size_t i);
	/* Slot from's entry copied into slot to. */
	void (*move)(void *tab, size_t to, size_t from);
	/* Slot i emptied. */
	void (*clear)(void *tab, size_t i);
};

/* Empties slot i of tab (slots: a power of two) and moves back the entries
 * after it that a look would otherwise not reach. */
void oatab_erase(void *tab, size_t slots, size_t i, const struct oatab_ops *ops);

#endif
