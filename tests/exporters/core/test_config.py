"""``lockstep.exporters.config.number_flag``: the collectors' number flags checked in one place, each bad value an
error naming its flag (a word, NaN, a value out of range), the defaults and good values passed through."""
from __future__ import annotations

from types import MappingProxyType

import pytest

from lockstep.exporters.collectors.lustre import LustreOptions
from lockstep.exporters.collectors.nccl_inspector import NcclInspectorOptions
from lockstep.exporters.collectors.nccl_ras import NcclRasOptions
from lockstep.exporters.collectors.nvme import NvmeOptions
from lockstep.exporters.collectors.spectrum_scale import SpectrumScaleOptions
from lockstep.exporters.collectors.steps import StepsOptions
from lockstep.exporters.config import ExporterConfig, number_flag


def config(**flags) -> ExporterConfig:
    return ExporterConfig(flags=MappingProxyType(flags))


def test_the_default_and_good_values_pass_as_their_type():
    assert number_flag(config(), "x.timeout", 2.0, above=0) == 2.0
    assert number_flag(config(**{"x.timeout": "0.5"}), "x.timeout", 2.0, above=0) == 0.5
    value = number_flag(config(**{"x.max": "7"}), "x.max", 1, at_least=1, integer=True)
    assert value == 7 and isinstance(value, int)
    assert number_flag(config(**{"x.max": 0}), "x.max", 1, at_least=0, integer=True) == 0


@pytest.mark.parametrize("raw, kwargs, message", [
    ("abc", {}, "--x.n: 'abc' is not a number"),
    ("nan", {}, "--x.n: 'nan' is not a number"),
    ("1.5", {"integer": True}, "--x.n: '1.5' is not an integer"),
    ("0", {"above": 0}, "--x.n: must be above 0, got 0"),
    ("-1", {"at_least": 0}, "--x.n: must be at least 0, got -1"),
    ("0", {"at_least": 1, "integer": True}, "--x.n: must be at least 1, got 0"),
])
def test_a_bad_value_is_an_error_naming_the_flag(raw, kwargs, message):
    with pytest.raises(ValueError) as err:
        number_flag(config(**{"x.n": raw}), "x.n", 1, **kwargs)
    assert str(err.value) == message


@pytest.mark.parametrize("options, flag, bad", [
    (LustreOptions, "lustre.lctl-timeout", "nan"),
    (SpectrumScaleOptions, "spectrum-scale.timeout", "0"),
    (NvmeOptions, "nvme.smart-timeout", "soon"),
    (NvmeOptions, "nvme.smart-interval", "-1"),
    (StepsOptions, "steps.ttl", "nan"),
    (StepsOptions, "steps.max-senders", "0"),
    (NcclRasOptions, "nccl-ras.poll-interval", "0"),
    (NcclRasOptions, "nccl-ras.max-communicators", "-1"),
    (NcclRasOptions, "nccl-ras.max-answer-bytes", "0"),
    (NcclInspectorOptions, "nccl-inspector.settle", "-0.5"),
    (NcclInspectorOptions, "nccl-inspector.max-files", "many"),
])
def test_each_collectors_number_flags_go_through_it(options, flag, bad):
    with pytest.raises(ValueError, match=f"^--{flag}: "):
        options.from_config(config(**{flag: bad}))
