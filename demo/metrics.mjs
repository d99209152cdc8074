// The demo's telemetry fixture, generated deterministically (fixed-seed
// PRNG): a few thousand requests to several endpoints over six hours, with a
// few injected latency spikes whose ids are returned so that the demo can
// check that the analysis found exactly them.
//
// Latency = base x (1 + triangular noise of +-22%) x (1 + 8% daily-ish wave).
// The noise is bounded, so no ordinary request lies beyond 2.5 standard
// deviations of its endpoint; each injected spike is 6x to 10x the base.

/** mulberry32: a small, well-known 32-bit PRNG. */
export function mulberry32(seed) {
	let a = seed >>> 0;
	return () => {
		a = (a + 0x6d2b79f5) >>> 0;
		let t = a;
		t = Math.imul(t ^ (t >>> 15), t | 1);
		t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
		return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
	};
}

export const ENDPOINTS = [
	{ endpoint: '/api/checkout', base: 310, weight: 0.12 },
	{ endpoint: '/api/login', base: 85, weight: 0.18 },
	{ endpoint: '/api/orders', base: 220, weight: 0.2 },
	{ endpoint: '/api/profile', base: 60, weight: 0.22 },
	{ endpoint: '/api/search', base: 140, weight: 0.28 },
];

export function generateMetrics({ seed = 20240611, count = 3600, start = '2024-06-11T08:00:00Z', hours = 6, spikes = 7 } = {}) {
	const rnd = mulberry32(seed);
	const t0 = Date.parse(start);
	const span = hours * 3600 * 1000;
	const times = Array.from({ length: count }, () => t0 + Math.floor(rnd() * span)).sort((a, b) => a - b);
	const pick = () => {
		let u = rnd();
		for (const e of ENDPOINTS) { if ((u -= e.weight) < 0) return e; }
		return ENDPOINTS[ENDPOINTS.length - 1];
	};
	const requests = times.map((t, i) => {
		const e = pick();
		const noise = 0.22 * (rnd() + rnd() - 1);
		const wave = 0.08 * Math.sin((2 * Math.PI * (t - t0)) / span);
		const latency = e.base * (1 + noise) * (1 + wave);
		const status = rnd() < 0.985 ? 200 : (rnd() < 0.5 ? 500 : 503);
		return { id: `req-${String(i + 1).padStart(5, '0')}`, ts: new Date(t).toISOString(), endpoint: e.endpoint, latency_ms: Math.round(latency * 10) / 10, status };
	});
	// Spikes: one in every endpoint first, the rest anywhere; never two on one request.
	const injected = [];
	const used = new Set();
	for (let k = 0; k < spikes; k++) {
		const want = k < ENDPOINTS.length ? ENDPOINTS[k].endpoint : null;
		let i;
		do { i = Math.floor(rnd() * count); } while (used.has(i) || (want && requests[i].endpoint !== want));
		used.add(i);
		const e = ENDPOINTS.find((x) => x.endpoint === requests[i].endpoint);
		requests[i].latency_ms = Math.round(e.base * (6 + 4 * rnd()) * 10) / 10;
		injected.push(requests[i].id);
	}
	injected.sort();
	return {
		doc: { service: 'shop-api', region: 'eu-west', window: { start, hours }, requests },
		injected,
	};
}

/** p95 as pandas' Series.quantile(0.95) computes it (linear interpolation). */
export function quantile(values, q) {
	const x = [...values].sort((a, b) => a - b);
	const h = (x.length - 1) * q;
	const lo = Math.floor(h);
	return lo + 1 < x.length ? x[lo] + (h - lo) * (x[lo + 1] - x[lo]) : x[lo];
}
