/* When a saved session's state is saved (savepace.h). */
#include "savepace.h"

double save_pace_delay(const struct save_pace *p)
{
	double d = p->last_save_ms * SAVE_IDLE_FACTOR;
	if (!(d >= SAVE_IDLE_MIN_MS)) /* also NaN */
		d = SAVE_IDLE_MIN_MS;
	return d > SAVE_IDLE_MAX_MS ? SAVE_IDLE_MAX_MS : d;
}

void save_pace_saved(struct save_pace *p, double ms)
{
	p->last_save_ms = ms > 0 ? ms : 0;
}

void save_pace_cut(struct save_pace *p, double ms)
{
	if (ms > p->last_save_ms)
		p->last_save_ms = ms;
}

void save_pace_cancel(struct save_pace *p, struct loop *l)
{
	if (p->timer)
		loop_timer_cancel(l, p->timer);
	p->timer = 0;
}

void save_pace_arm(struct save_pace *p, struct loop *l, loop_timer_cb fn, void *arg)
{
	save_pace_cancel(p, l);
	p->timer = loop_timer(l, save_pace_delay(p), fn, arg);
}

void save_pace_fired(struct save_pace *p)
{
	p->timer = 0;
}
