"""The exposition encoder, checked with prometheus_client's own text and OpenMetrics parsers."""
import math

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from lockstep.exporters.catalog import fabric, gpu, health
from lockstep.exporters.toolkit.exposition import (
    Encoder,
    format_value,
    render_openmetrics,
    render_text,
    wants_openmetrics,
)
from lockstep.exporters.toolkit.sample import Sample

SAMPLES = [
    Sample(gpu.TEMPERATURE, ("0",), 71.0),
    Sample(gpu.TEMPERATURE, ("1",), 68.5),
    Sample(gpu.ENERGY, ("0",), 123456789.25),
    Sample(fabric.IB_RATE, ("mlx5_0", "1"), 50e9),
    Sample(health.SCRAPE_COLLECTOR_SUCCESS, ('we"ird\\name\n',), 1.0),
]


def families():
    fams = {}
    Encoder().add(fams, SAMPLES)
    return fams


def as_dict(parsed):
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in parsed for s in f.samples}


def test_text_format_round_trips_through_the_reference_parser():
    parsed = list(parse_text(render_text(families())))
    values = as_dict(parsed)
    assert values[("lockstep_gpu_temperature_celsius", (("gpu", "1"),))] == 68.5
    assert values[("lockstep_gpu_energy_joules_total", (("gpu", "0"),))] == 123456789.25
    assert values[("lockstep_ib_port_rate_bytes_per_second", (("device", "mlx5_0"), ("port", "1")))] == 50e9
    assert values[("lockstep_scrape_collector_success", (("collector", 'we"ird\\name\n'),))] == 1.0
    types = {f.name: f.type for f in parsed}
    assert types["lockstep_gpu_energy_joules"] == "counter"
    assert types["lockstep_gpu_temperature_celsius"] == "gauge"


def test_openmetrics_format_round_trips_and_ends_with_eof():
    text = render_openmetrics(families())
    assert text.endswith("# EOF\n")
    parsed = list(parse_openmetrics(text))
    values = as_dict(parsed)
    assert values[("lockstep_gpu_energy_joules_total", (("gpu", "0"),))] == 123456789.25
    energy = next(f for f in parsed if f.name == "lockstep_gpu_energy_joules")
    assert energy.type == "counter" and energy.unit == "joules"


def test_label_count_mismatch_is_rejected():
    with pytest.raises(ValueError, match="lockstep_gpu_temperature_celsius"):
        Encoder().add({}, [Sample(gpu.TEMPERATURE, ("0", "extra"), 1.0)])


@pytest.mark.parametrize("value,text", [(1.0, "1"), (0.25, "0.25"), (float("nan"), "NaN"),
                                        (math.inf, "+Inf"), (-math.inf, "-Inf"), (1e20, "1e+20"), (3, "3")])
def test_value_formatting(value, text):
    assert format_value(value) == text


def test_content_negotiation():
    assert wants_openmetrics("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
    assert not wants_openmetrics("text/plain;version=0.0.4")
    assert not wants_openmetrics("")
