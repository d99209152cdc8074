"""The agent-workload suite: tasks of the kinds coding agents send to a Python
sandbox, each a self-contained cell that reads the project's files under
workspace/ and writes its outputs under workspace/outputs/.

make_data(root) writes the inputs (deterministic); TASKS is a list of
(name, code).  Every task ends with a print() or a final expression, and runs
the same in the server, in a Jupyter kernel and under `python3 -c` when the
working directory is the project root.
"""
import json
import os
import random


def make_data(root):
    """Writes workspace/{sales.csv, customers.xlsx, metrics.json, reviews.csv}."""
    ws = os.path.join(root, "workspace")
    os.makedirs(os.path.join(ws, "outputs"), exist_ok=True)
    rnd = random.Random(7)
    regions = ["north", "south", "east", "west"]
    products = ["alpha", "beta", "gamma", "delta", "omega"]
    with open(os.path.join(ws, "sales.csv"), "w") as f:
        f.write("date,region,product,units,price,customer_id\n")
        for i in range(20000):
            day = 1 + (i * 7) % 365
            f.write("2025-%02d-%02d,%s,%s,%d,%.2f,%d\n" % (
                1 + (day - 1) // 31 % 12, 1 + (day - 1) % 28, rnd.choice(regions),
                rnd.choice(products), rnd.randint(1, 40), rnd.uniform(2, 120), rnd.randint(1, 500)))
    words = ("fast slow broken great terrible okay refund love hate shipping late early "
             "quality price support friendly rude box damaged perfect again").split()
    with open(os.path.join(ws, "reviews.csv"), "w") as f:
        f.write("review_id,customer_id,stars,text\n")
        for i in range(5000):
            text = " ".join(rnd.choice(words) for _ in range(rnd.randint(3, 25)))
            f.write('%d,%d,%d,"%s"\n' % (i, rnd.randint(1, 500), rnd.randint(1, 5), text))
    samples = []
    for i in range(6000):
        ep = rnd.choice(["/api/users", "/api/orders", "/api/search", "/health"])
        lat = rnd.gauss(80, 15) if ep != "/api/search" else rnd.gauss(200, 40)
        if rnd.random() < 0.01:
            lat *= 6
        samples.append({"endpoint": ep, "ts": 1735689600 + i * 10, "latency_ms": round(lat, 2)})
    with open(os.path.join(ws, "metrics.json"), "w") as f:
        json.dump(samples, f)
    # Excel input through openpyxl (what pandas.read_excel uses).
    from openpyxl import Workbook
    wb = Workbook()
    sh = wb.active
    sh.title = "customers"
    sh.append(["customer_id", "name", "segment", "signup_year"])
    for c in range(1, 501):
        sh.append([c, "customer %d" % c, rnd.choice(["retail", "smb", "enterprise"]),
                   rnd.randint(2015, 2025)])
    wb.save(os.path.join(ws, "customers.xlsx"))


_LOAD = "import pandas as pd\ndf = pd.read_csv('workspace/sales.csv', parse_dates=['date'])\n"
_REV = "import pandas as pd\nrv = pd.read_csv('workspace/reviews.csv')\n"
_MET = "import pandas as pd, json\nm = pd.DataFrame(json.load(open('workspace/metrics.json')))\n"

TASKS = [
    ("csv describe", _LOAD + "print(df.describe().round(2).to_string())"),
    ("groupby sum", _LOAD + "df['revenue'] = df.units * df.price\n"
     "print(df.groupby('region').revenue.sum().round(2))"),
    ("groupby multi agg", _LOAD + "print(df.groupby(['region','product']).agg("
     "units=('units','sum'), mean_price=('price','mean')).round(2).head(12))"),
    ("merge with excel", _LOAD + "cu = pd.read_excel('workspace/customers.xlsx')\n"
     "j = df.merge(cu, on='customer_id')\nprint(j.groupby('segment').units.sum())"),
    ("read excel", "import pandas as pd\ncu = pd.read_excel('workspace/customers.xlsx')\n"
     "print(cu.segment.value_counts(), cu.signup_year.describe())"),
    ("pivot table", _LOAD + "print(df.pivot_table(index='region', columns='product', "
     "values='units', aggfunc='sum'))"),
    ("resample weekly", _LOAD + "s = df.set_index('date').units.resample('W').sum()\n"
     "print(s.describe().round(1))"),
    ("rolling mean", _LOAD + "d = df.groupby('date').units.sum().sort_index()\n"
     "print(d.rolling(7).mean().dropna().tail())"),
    ("p95 per endpoint", _MET + "print(m.groupby('endpoint').latency_ms.quantile(0.95).round(2))"),
    ("anomalies 2.5 sd", _MET + "g = m.groupby('endpoint').latency_ms\n"
     "z = (m.latency_ms - g.transform('mean')) / g.transform('std')\n"
     "print(int((z.abs() > 2.5).sum()), 'anomalies')"),
    ("line chart", _MET + "import matplotlib\nmatplotlib.use('Agg')\n"
     "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\n"
     "for ep, g in m.groupby('endpoint'): ax.plot(g.ts, g.latency_ms.rolling(20).mean(), label=ep)\n"
     "ax.legend(); fig.savefig('workspace/outputs/latency_trend.png', dpi=80); plt.close(fig)\n"
     "print('saved')"),
    ("bar chart", _LOAD + "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
     "ax = df.groupby('product').units.sum().plot.bar()\n"
     "ax.figure.savefig('workspace/outputs/units_by_product.png', dpi=80); plt.close('all')\n"
     "print('saved')"),
    ("scatter with fit", _LOAD + "import numpy as np, matplotlib\nmatplotlib.use('Agg')\n"
     "import matplotlib.pyplot as plt\nk = np.polyfit(df.price, df.units, 1)\n"
     "fig, ax = plt.subplots(); ax.scatter(df.price[:2000], df.units[:2000], s=2)\n"
     "ax.plot(df.price, np.polyval(k, df.price), 'r'); fig.savefig('workspace/outputs/scatter.png', dpi=80)\n"
     "plt.close(fig); print(k.round(4))"),
    ("seaborn histogram", _MET + "import matplotlib\nmatplotlib.use('Agg')\nimport seaborn as sns\n"
     "ax = sns.histplot(data=m, x='latency_ms', hue='endpoint', bins=40)\n"
     "ax.figure.savefig('workspace/outputs/latency_hist.png', dpi=80)\nimport matplotlib.pyplot as plt\n"
     "plt.close('all'); print('saved')"),
    ("seaborn boxplot", _LOAD + "import matplotlib\nmatplotlib.use('Agg')\nimport seaborn as sns\n"
     "ax = sns.boxplot(data=df, x='region', y='price')\n"
     "ax.figure.savefig('workspace/outputs/price_box.png', dpi=80)\nimport matplotlib.pyplot as plt\n"
     "plt.close('all'); print('saved')"),
    ("t-test", _LOAD + "from scipy import stats\n"
     "r = stats.ttest_ind(df[df.region=='north'].price, df[df.region=='south'].price)\n"
     "print(round(r.statistic, 4), round(r.pvalue, 4))"),
    ("pearson", _LOAD + "from scipy import stats\nr = stats.pearsonr(df.price, df.units)\n"
     "print(round(r[0], 5))"),
    ("chi-square", _LOAD + "from scipy import stats\nct = pd.crosstab(df.region, df['product'])\n"
     "chi2, p, dof, _ = stats.chi2_contingency(ct)\nprint(round(chi2, 3), dof)"),
    ("normality test", _MET + "from scipy import stats\n"
     "print({k: round(stats.shapiro(g.latency_ms[:500]).pvalue, 4) for k, g in m.groupby('endpoint')})"),
    ("optimize", "from scipy.optimize import minimize\nimport numpy as np\n"
     "r = minimize(lambda x: (x[0]-3)**2 + (x[1]+1)**2 + np.sin(x[0]), [0, 0])\nprint(r.x.round(4))"),
    ("linear regression", _LOAD + "from sklearn.linear_model import LinearRegression\n"
     "X = pd.get_dummies(df[['price','region']], drop_first=True)\n"
     "m = LinearRegression().fit(X, df.units)\nprint(round(m.score(X, df.units), 5))"),
    ("logistic regression", _REV + "from sklearn.feature_extraction.text import CountVectorizer\n"
     "from sklearn.linear_model import LogisticRegression\n"
     "X = CountVectorizer(max_features=200).fit_transform(rv.text)\ny = rv.stars >= 4\n"
     "c = LogisticRegression(max_iter=200).fit(X, y)\nprint(round(c.score(X, y), 4))"),
    ("random forest", _LOAD + "from sklearn.ensemble import RandomForestRegressor\n"
     "from sklearn.model_selection import train_test_split\n"
     "X = df[['price','customer_id']]; y = df.units\n"
     "a, b, c, d = train_test_split(X, y, random_state=0)\n"
     "print(round(RandomForestRegressor(n_estimators=20, random_state=0).fit(a, c).score(b, d), 4))"),
    ("kmeans", _LOAD + "from sklearn.cluster import KMeans\n"
     "km = KMeans(n_clusters=4, n_init=3, random_state=0).fit(df[['price','units']])\n"
     "print(sorted(pd.Series(km.labels_).value_counts().tolist()))"),
    ("train/test split score", _REV + "from sklearn.model_selection import cross_val_score\n"
     "from sklearn.tree import DecisionTreeClassifier\nX = rv[['customer_id']]; y = rv.stars\n"
     "print(cross_val_score(DecisionTreeClassifier(max_depth=3), X, y, cv=3).round(3))"),
    ("sympy solve", "import sympy as sp\nx = sp.symbols('x')\n"
     "print(sp.solve(x**3 - 6*x**2 + 11*x - 6, x))"),
    ("sympy integrate", "import sympy as sp\nx = sp.symbols('x')\n"
     "print(sp.integrate(sp.exp(-x**2) * x**3, (x, 0, sp.oo)))"),
    ("statsmodels ols", _LOAD + "import statsmodels.formula.api as smf\n"
     "r = smf.ols('units ~ price + C(region)', data=df).fit()\nprint(round(r.rsquared, 6))"),
    ("string lengths", _REV + "print(rv.text.str.len().describe().round(2))"),
    ("string contains", _REV + "print(rv.text.str.contains('refund').sum(), "
     "rv.text.str.contains('late|damaged', regex=True).sum())"),
    ("word counts", _REV + "print(rv.text.str.split().explode().value_counts().head(10))"),
    ("regex extract", _REV + "print(rv.text.str.extract(r'(\\w+) (refund|support)').dropna()[0]"
     ".value_counts().head())"),
    ("string cleanup", _REV + "t = rv.text.str.upper().str.replace(' ', '_', regex=False)\n"
     "print(t.str[:12].value_counts().head(3))"),
    ("json normalize", "import json, pandas as pd\n"
     "rows = [{'id': i, 'meta': {'a': i % 3, 'b': {'c': i * 2}}} for i in range(5000)]\n"
     "print(pd.json_normalize(rows).groupby('meta.a')['meta.b.c'].sum())"),
    ("write csv", _LOAD + "df.groupby(['region','product']).units.sum().reset_index()"
     ".to_csv('workspace/outputs/summary.csv', index=False)\nprint('written')"),
    ("write json", _MET + "m.groupby('endpoint').latency_ms.describe().round(2)"
     ".to_json('workspace/outputs/latency.json')\nprint('written')"),
    ("linear algebra", "import numpy as np\nrng = np.random.default_rng(0)\n"
     "A = rng.normal(size=(300, 300)); b = rng.normal(size=300)\n"
     "x = np.linalg.solve(A, b)\nprint(round(float(np.abs(A @ x - b).max()), 12) < 1e-8)"),
    ("fft", "import numpy as np\nt = np.linspace(0, 1, 4096, endpoint=False)\n"
     "s = np.sin(2*np.pi*50*t) + 0.5*np.sin(2*np.pi*120*t)\n"
     "f = np.abs(np.fft.rfft(s))\nprint(sorted(np.argsort(f)[-2:].tolist()))"),
    ("crosstab", _LOAD + "print(pd.crosstab(df.region, df.units > 20, normalize='index').round(3))"),
    ("cumulative per group", _LOAD + "d = df.sort_values('date')\n"
     "d['cum'] = d.groupby('region').units.cumsum()\nprint(d.groupby('region').cum.max())"),
    ("quantile bins", _LOAD + "print(pd.qcut(df.price, 5).value_counts().sort_index())"),
    ("weekday features", _LOAD + "print(df.groupby(df.date.dt.day_name()).units.mean().round(3))"),
    ("interpolate", "import numpy as np, pandas as pd\n"
     "s = pd.Series(np.where(np.arange(10000) % 7 == 0, np.nan, np.arange(10000.0)))\n"
     "print(s.interpolate().isna().sum(), round(s.fillna(s.mean()).mean(), 3))"),
    ("exact arithmetic", "from fractions import Fraction\nfrom decimal import Decimal, getcontext\n"
     "getcontext().prec = 50\nprint(sum(Fraction(1, k) for k in range(1, 60)), Decimal(2).sqrt())"),
]
