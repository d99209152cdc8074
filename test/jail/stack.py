# numpy, pandas, matplotlib work and a chart lands in the workspace.
import sys, os
import numpy as np, pandas as pd, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
ws = sys.argv[1]
df = pd.DataFrame({"k": np.arange(100) % 7, "v": np.arange(100.0)})
assert abs(df.groupby("k").v.mean().sum() - 346.5) < 50
os.makedirs(ws + "/outputs", exist_ok=True)
fig, ax = plt.subplots(); ax.plot(df.v); fig.savefig(ws + "/outputs/chart.png", dpi=40)
df.to_csv(ws + "/outputs/t.csv")
print("stack ok")
