"""Inputs asked for as the store holds them (``Input.as_stored``) against a REAL Prometheus: the window placed from
their series is the one their aggregated queries give, where a GPU or an HCA has more than one series too.

Prometheus spends several times more CPU on a ``max by``/``group by`` that collapses nothing than on the plain
selector (docs/architecture.md); the placing (``lockstep.analytics.frame.window``) does what it would have done."""
from __future__ import annotations

import subprocess
from dataclasses import replace

import aiohttp
import numpy as np
import pandas as pd
import pytest

from lockstep import localcluster
from lockstep.analytics.frame.inputs import INPUTS
from lockstep.analytics.prom import api as source_prom
from lockstep.analytics.service.fetch import fetch_window
from lockstep.analytics.service.source import PrometheusSource
from lockstep.exporters.catalog import fabric, gpu
from lockstep.stack import Stack, require_binary, start_prometheus

pytestmark = pytest.mark.integration
JOB = "7300"


def _twin(frame: pd.DataFrame, metric: str, labels: str, value) -> list[str]:
    """OpenMetrics lines of a second series of ``metric`` for node00's GPU 0 (or its mlx5_0): ``labels``
    (``job`` and ``instance`` of another scrape), ``value(v)``."""
    rows = frame[(frame["metric"] == metric) & (frame["node"] == "node00")]
    rows = rows[rows["gpu"] == "0"] if rows["gpu"].ne("").any() else rows[rows["device"] == "mlx5_0"]
    return [f"{metric}{{{labels}}} {value(v):.17g} {t:.3f}" for t, v in zip(rows["timestamp"], rows["value"])]


@pytest.fixture(scope="module")
def prometheus(service_sim, tmp_path_factory):
    """The service's test run, and node00's GPU 0 read a second time by another scrape job (hotter, less busy,
    a lower clock), its job_info under a second pod, and a second port of node00's mlx5_0."""
    frame = service_sim.frame
    workdir = tmp_path_factory.mktemp("prom")
    localcluster.backfill(frame.astype({c: str for c in frame.columns if c not in ("timestamp", "value")}), workdir,
                          max_block_duration="24h")
    other = 'job="lockstep-node",instance="node00:9999",node="node00",gpu="0"'
    lines = [*_twin(frame, gpu.TEMPERATURE.name, other, lambda v: v + 7.0),
             *_twin(frame, gpu.SM_ACTIVE.name, other, lambda v: v * 0.5),
             *_twin(frame, gpu.SM_CLOCK.name, other, lambda v: v * 0.9),
             *_twin(frame, gpu.SM_CLOCK_MAX.name, other, lambda v: v),
             *_twin(frame, gpu.JOB_INFO.name, f'job="lockstep-node",instance="node00",node="node00",gpu="0",'
                    f'job_id="{JOB}",pod="other-pod"', lambda v: v),
             *_twin(frame, fabric.IB_TRANSMIT_BYTES.name, 'job="lockstep-node",instance="node00",node="node00",'
                    'device="mlx5_0",port="2"', lambda v: v * 0.25)]
    by_metric: dict[str, list[str]] = {}
    for line in lines:
        by_metric.setdefault(line.split("{", 1)[0], []).append(line)
    text = workdir / "twins.om"
    text.write_text("".join(f"# TYPE {m} {'counter' if m.endswith('_total') else 'gauge'}\n" + "\n".join(ls) + "\n"
                            for m, ls in by_metric.items()) + "# EOF\n")
    subprocess.run([require_binary("promtool"), "tsdb", "create-blocks-from", "openmetrics", "--quiet", str(text),
                    str(workdir / "data")], check=True, capture_output=True, timeout=120)
    with Stack() as stack:
        yield stack.add(start_prometheus({"global": {"scrape_interval": "5s"}, "scrape_configs": []}, workdir))


async def _window(url: str, run, inputs):
    window = source_prom.Window(run.start + run.period, run.start + run.truth["duration_s"], run.period)
    async with aiohttp.ClientSession() as session:
        return await fetch_window(PrometheusSource(session, url, 10.0), JOB, window, inputs=inputs)


async def test_as_stored_the_window_is_the_aggregated_queries_one(prometheus, service_sim):
    stored = [i for i in INPUTS if i.as_stored]
    assert {i.name for i in stored} >= {"member", "sm", "temp", "clock", "tx"}
    outer = ("max by", "sum by", "group by")
    for inp in stored:
        assert not inp.promql(JOB, 5.0, ("node00",)).startswith(outer), inp.name
    aggregated = tuple(replace(i, as_stored=False) for i in INPUTS)
    for inp in aggregated:
        assert inp.promql(JOB, 5.0, ("node00",)).startswith(outer), inp.name
    a = (await _window(prometheus.url, service_sim, INPUTS)).features()
    b = (await _window(prometheus.url, service_sim, aggregated)).features()
    assert list(a.columns) == list(b.columns) and a.pods == b.pods and (a.times == b.times).all()
    assert a.signals.keys() == b.signals.keys()
    for name in a.signals:
        x, y = a.signals[name], b.signals[name]
        assert ((x == y) | (np.isnan(x) & np.isnan(y))).all(), (name, np.argwhere(~((x == y) | (np.isnan(x) & np.isnan(y))))[:5])
    # ...and the second series did land: the hotter reading and the busier one are kept, both ports summed
    col = list(a.columns).index((JOB, "node00", "0"))
    direct = service_sim.frame
    temp = direct[(direct["metric"] == gpu.TEMPERATURE.name) & (direct["node"] == "node00") & (direct["gpu"] == "0")]
    assert np.nanmax(a.signals["temp"][:, col]) == pytest.approx(temp["value"].max() + 7.0)
