"""bench_refresh.py's figures: each size's phases summarized, printed beside the figures measured before incremental refresh
measured before incremental refresh, and held to the issue's budgets."""
from __future__ import annotations

import os

from lockstep.analytics.prom.answersize import SERVE_DEFAULT

# measured before incremental refresh: GPUs → (refresh s, of which fetch and decode s, peak RSS GB)
BEFORE = {1024: (20.3, 19.0, 1.5), 4096: (89.0, 87.0, 5.4)}
# the targets set for incremental refresh: GPUs → (steady refresh s, steady peak RSS MB); the first fetch of 16,384 within 3 GB
BUDGETS = {4096: (5.0, 1536.0), 16384: (15.0, 3072.0)}
FIRST_FETCH_MB = {16384: 3072.0}
MIN_SAMPLES_RATIO = 10.0
THROTTLED = [("node05", "3")]


def _median(rows: list[dict], key: str) -> float:
    values = sorted(r[key] for r in rows)
    return values[len(values) // 2]


def summarize(r: dict) -> dict:
    steady, full, (first,) = r["steady"], r["full"], r["first"]
    row = {"gpus": r["gpus"], "minutes": r["minutes"], "backfill": r["backfill"], "first_s": first["wall_s"],
           "first_rss_mb": r["first_peak_rss_mb"],
           "steady_s": _median(steady, "wall_s"), "steady_score_s": _median(steady, "score_s"),
           "steady_prom_cpu_s": _median(steady, "prom_cpu_s"), "steady_samples": _median(steady, "samples"),
           "steady_rss_mb": r["steady_peak_rss_mb"], "full_s": _median(full, "wall_s"),
           "full_prom_cpu_s": _median(full, "prom_cpu_s"), "full_samples": _median(full, "samples"),
           "incremental": all(s["full_fetches"] == 0 for s in steady) and all(f["full_fetches"] == 1 for f in full),
           "flagged": sorted({tuple(f) for phase in ("first", "steady", "full") for s in r[phase] for f in s["flagged"]})}
    row["largest_answer_mb"] = r["largest_answer_bytes"] / 2 ** 20
    row["samples_ratio"] = row["full_samples"] / max(row["steady_samples"], 1)
    row["cpu_ratio"] = row["full_prom_cpu_s"] / max(row["steady_prom_cpu_s"], 0.01)
    row["wall_ratio"] = row["full_s"] / row["steady_s"]
    return row


def report(rows: list[dict], pm: dict | None, load: tuple, setup: str) -> bool:
    """Print the figures; False when a budget is over."""
    print(f"one job's refresh, {setup}, against a real Prometheus (load average {load[0][0]:.1f} before, "
          f"{load[1][0]:.1f} after, on {os.cpu_count()} CPUs)")
    print(f"{'GPUs':>6} | {'first s':>7} {'RSS MB':>7} | {'steady s':>8} {'score s':>7} {'Prom CPU':>8} {'samples':>9} "
          f"{'RSS MB':>7} | {'refetch s':>9} {'Prom CPU':>8} {'samples':>10} | {'x samples':>9} {'x CPU':>6} {'x wall':>6}")
    for r in rows:
        print(f"{r['gpus']:>6} | {r['first_s']:>7.1f} {r['first_rss_mb']:>7.0f} | {r['steady_s']:>8.2f} "
              f"{r['steady_score_s']:>7.2f} {r['steady_prom_cpu_s']:>8.2f} {r['steady_samples']:>9} {r['steady_rss_mb']:>7.0f} | "
              f"{r['full_s']:>9.1f} {r['full_prom_cpu_s']:>8.2f} {r['full_samples']:>10} | {r['samples_ratio']:>9.1f} "
              f"{r['cpu_ratio']:>6.1f} {r['wall_ratio']:>6.1f}")
    print("steady = median of 5 refreshes 30 s apart (the held window moved on); refetch = the same refresh with the "
          "window fetched whole (median of 2); x = refetch / steady; RSS = the service's peak in that phase")
    for r in rows:
        print(f"largest answer read at {r['gpus']:,} GPUs: {r['largest_answer_mb']:.1f} MiB, against the service's "
              f"--prometheus-max-answer-size of {SERVE_DEFAULT >> 20} MiB ({r['largest_answer_mb'] / (SERVE_DEFAULT >> 20):.0%})")
    for gpus, (wall, fetch, gb) in BEFORE.items():
        now = next((r for r in rows if r["gpus"] == gpus), None)
        if now:
            print(f"before incremental refresh, at {gpus:,} GPUs: {wall:.1f} s per refresh "
                  f"({fetch:.1f} s fetching and decoding), "
                  f"{gb:.1f} GB; now {now['steady_s']:.2f} s steady ({wall / now['steady_s']:.0f}x), "
                  f"{now['full_s']:.1f} s fetching the whole window ({wall / now['full_s']:.1f}x), "
                  f"{max(now['first_rss_mb'], now['steady_rss_mb']) / 1024:.2f} GB")
    for r in rows + ([pm] if pm else []):
        b = r["backfill"]
        print(f"TSDB of {r['gpus']:,} GPUs x {r['minutes']} min (the analytics' series): lockstep sim backfill took "
              f"{b['wall_s']:.0f} s, peak RSS {b['peak_rss_mb']:.0f} MB (built once, kept between runs)")
    if pm:
        print(f"post-mortem of {pm['gpus']:,} GPUs x 1 h: {pm['wall_s']:.1f} s, peak RSS {pm['peak_rss_mb']:.0f} MB, "
              f"Prometheus CPU {pm['prom_cpu_s']:.1f} s, stragglers {pm['stragglers']}")
    return _budgets(rows, pm)


def _budgets(rows: list[dict], pm: dict | None) -> bool:
    ok = True
    for r in rows:
        checks = [(f"steady samples x{r['samples_ratio']:.1f} fewer (>= {MIN_SAMPLES_RATIO:g})",
                   r["samples_ratio"] >= MIN_SAMPLES_RATIO),
                  ("moved on when steady, fetched whole when dropped", r["incremental"]),
                  (f"flagged {r['flagged']}", r["flagged"] == THROTTLED),
                  (f"largest answer {r['largest_answer_mb']:.1f} MiB (< half the cap, {SERVE_DEFAULT >> 21} MiB)",
                   r["largest_answer_mb"] < SERVE_DEFAULT / 2 ** 21)]
        if r["gpus"] in BUDGETS:
            wall, mb = BUDGETS[r["gpus"]]
            checks.append((f"steady {r['steady_s']:.2f} s (< {wall:g}), {r['steady_rss_mb']:.0f} MB (< {mb:.0f})",
                           r["steady_s"] < wall and r["steady_rss_mb"] < mb))
        if r["gpus"] in FIRST_FETCH_MB:
            checks.append((f"first fetch {r['first_rss_mb']:.0f} MB (< {FIRST_FETCH_MB[r['gpus']]:.0f})",
                           r["first_rss_mb"] < FIRST_FETCH_MB[r["gpus"]]))
        for what, good in checks:
            print(f"budget {r['gpus']:,} GPUs: {what}: {'ok' if good else 'OVER'}")
            ok &= good
    if pm and [tuple(s) for s in pm["stragglers"]] != THROTTLED:
        print(f"post-mortem: unexpected stragglers {pm['stragglers']}")
        ok = False
    return ok
