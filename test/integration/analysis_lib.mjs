// A realistic analysis for the history's tests: reads a CSV, a seeded
// random draw, an exception (kept), a timeout (rolled back), a chart and a
// CSV written, a last draw.
import { newProject, execPy, writeFile } from './lib.mjs';

export const ANALYSIS = [
	// np and pd as the session binds them, not imported: the export's setup
	// cell must bind them for a plain kernel.
	['df = pd.read_csv("workspace/data/input.csv")\nprint(df.shape)\ndf["b"].sum()'],
	['draw = np.random.normal(size=4)\nprint([round(float(x), 6) for x in draw])'],
	['total = df["missing"].sum()'],
	['import time\nlost = 1\nwhile True:\n    time.sleep(0.05)', { timeout_s: 1 }],
	['import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(4, 3))\nax.plot(df["a"], df["b"] + draw[: len(df)].sum())\n'
		+ 'fig.savefig("workspace/outputs/chart.png")\nplt.close(fig)\n'
		+ 'df.assign(z=df["a"] * 2).to_csv("workspace/outputs/summary.csv", index=False)\nprint("written")'],
	['print("lost" in dir())\nround(float(np.random.rand()), 8)'],
];

export async function runAnalysis(h) {
	const out = [];
	for (const [code, extra] of ANALYSIS) out.push(await execPy(h, code, extra || {}));
	return out;
}

export function analysisProject(tag) {
	const root = newProject(tag);
	writeFile(root, 'workspace/data/input.csv', 'a,b\n1,10\n2,20\n3,35\n4,41\n');
	return root;
}

