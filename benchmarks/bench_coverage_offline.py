"""The margins' coverage on an offline closed loop: the estimator alone, with no client, clock or simulator.

Run: ``python benchmarks/bench_coverage_offline.py [REPS] [sync|async] [WINDOW_S]`` (a few seconds). Each
replication simulates in numpy one step of a closed loop of 16 and 64 users against a server whose TTFT is
lognormal (median 80 ms, sigma 0.4) and whose 32 tokens come every 20 ms (lognormal, sigma 0.3), as
``bench_coverage.py``'s "random" server; the step is cut into half-second slices as
``loadgen.metrics.slices`` cuts it (a value in the slice its request finished in, tokens in the slice they
streamed in), and ``loadgen.stats`` reads each figure's 95 % interval. Prints, per figure, the share of
replications whose interval holds the exact truth, the median relative half-width and the untrusted share.
What the live benchmark adds to this (the client's delay, the simulator's tick, drift between steps on a
shared machine) is what its rows differ by. Asserts nothing.
"""

import math
import sys
from pathlib import Path
from statistics import NormalDist

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadgen.stats import quantile_interval, ratio_interval  # noqa: E402

OUT = 32
TT_MED = 0.080
TT_S = 0.4
TP_MED = 0.020
TP_S = 0.3
BINS = np.geomspace(1e-3, 100, 2000)  # ~0.6% resolution, upper edges
LOWER = np.concatenate([[0.0], BINS[:-1]])


def run(streams, warm, win, rng, slice_s=0.5, sync=True, overhead=0.0):
    t_end = warm + win
    ns = int(math.ceil(win / slice_s))
    ttft_counts = np.zeros((ns, BINS.size), np.int64)
    itl_counts = np.zeros((ns, BINS.size), np.int64)
    dec_counts = np.zeros((ns, BINS.size), np.int64)
    live = np.zeros(ns)
    for _ in range(streams):
        t = 0.0 if sync else rng.uniform(0, 0.75)
        while t < t_end:
            ttft = TT_MED * math.exp(TT_S * rng.standard_normal())
            gaps = TP_MED * np.exp(TP_S * rng.standard_normal(OUT - 1))
            tok_t = t + ttft + np.concatenate([[0.0], np.cumsum(gaps)])
            done = tok_t[-1]
            # tokens streamed in window
            inw = (tok_t >= warm) & (tok_t < t_end)
            idx = ((tok_t[inw] - warm) // slice_s).astype(int)
            np.add.at(live, idx, 1)
            if warm <= t and done < t_end:  # started and finished inside window (closed step)
                k = int((done - warm) // slice_s)
                ttft_counts[k, np.searchsorted(BINS, ttft)] += 1
                np.add.at(itl_counts[k], np.searchsorted(BINS, gaps), 1)
                dec = (OUT - 1) / gaps.sum()
                dec_counts[k, min(np.searchsorted(BINS, dec), BINS.size - 1)] += 1
            t = done + overhead
    secs = np.full(ns, slice_s)
    return ttft_counts, itl_counts, dec_counts, live, secs


def truth(streams):
    z = NormalDist().inv_cdf
    mean_ttft = TT_MED * math.exp(TT_S**2 / 2)
    mean_tp = TP_MED * math.exp(TP_S**2 / 2)
    return {
        "ttft_p50": TT_MED,
        "ttft_p95": TT_MED * math.exp(TT_S * z(0.95)),
        "ttft_p99": TT_MED * math.exp(TT_S * z(0.99)),
        "itl_p99": TP_MED * math.exp(TP_S * z(0.99)),
        "out_tok_s": streams * OUT / (mean_ttft + (OUT - 1) * mean_tp),
    }


def one(streams, rng, warm=1.0, win=5.0, **kw):
    tc, ic, dc, live, secs = run(streams, warm, win, rng, **kw)
    return {
        "ttft_p50": quantile_interval(tc, BINS, 0.5, lower=LOWER),
        "ttft_p95": quantile_interval(tc, BINS, 0.95, lower=LOWER),
        "ttft_p99": quantile_interval(tc, BINS, 0.99, lower=LOWER),
        "itl_p99": quantile_interval(ic, BINS, 0.99, lower=LOWER),
        "out_tok_s": ratio_interval(live, secs),
    }


if __name__ == "__main__":
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    sync = (sys.argv[2] != "async") if len(sys.argv) > 2 else True
    win = float(sys.argv[3]) if len(sys.argv) > 3 else 5.0
    for streams in (16, 64):
        rng = np.random.default_rng(streams)
        tr = truth(streams)
        cov = {k: [] for k in tr}
        unt = {k: 0 for k in tr}
        hw = {k: [] for k in tr}
        for _ in range(reps):
            ivs = one(streams, rng, sync=sync, win=win)
            for k, iv in ivs.items():
                cov[k].append(iv.contains(tr[k]))
                unt[k] += not iv.trusted
                if iv.rel_half_width:
                    hw[k].append(iv.rel_half_width)
        print(
            streams,
            "  ".join(
                f"{k} {100 * np.mean(v):.0f}% ±{100 * np.median(hw[k]):.1f}% u{100 * unt[k] / reps:.0f}"
                for k, v in cov.items()
            ),
        )
