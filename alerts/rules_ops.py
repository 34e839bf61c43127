"""Alerts on training jobs (from the analytics service), rack power and cooling (power exporter) and
on lockstep's own exporters."""
from __future__ import annotations

from alerts.config import AlertsConfig
from alerts.model import PAGE, TICKET, Alert, metric


def jobs(config: AlertsConfig) -> list[Alert]:
    t, sel = config.thresholds, config.selectors.analytics
    stalled = metric("lockstep_job_stalled", sel, 'cause!~"checkpoint|hang"')
    hung = metric("lockstep_job_stalled", sel, 'cause="hang"')
    score = f'min by (job_id, node, gpu) ({metric("lockstep_straggler_score", sel)})'
    flagged = f'max by (job_id, node, gpu) ({metric("lockstep_straggler_flagged", sel)}) == 1'
    return [
        # Checkpoint stalls are expected and bounded; they have their own alert below. A hang pages as Hung.
        Alert("TrainingJobStalled", f"max by (job_id, cause) ({stalled}) == 1", PAGE,
              "Training job {{ $labels.job_id }} stalled ({{ $labels.cause }})",
              "Job {{ $labels.job_id }} has made no progress for " + config.for_of("TrainingJobStalled")
              + "; the analytics service attributes the stall to {{ $labels.cause }}."),
        # The analytics service flags a straggler once two signals agree and the slowdown persisted; the
        # alert's value is the score (evidence for the reader), the flag decides.
        Alert("TrainingJobStraggler", f"{score}\nand on (job_id, node, gpu)\n{flagged}", TICKET,
              "Straggler in job {{ $labels.job_id }}: {{ $labels.node }} GPU {{ $labels.gpu }}",
              "{{ $labels.node }} GPU {{ $labels.gpu }} holds job {{ $labels.job_id }} back: it runs at "
              "{{ $value | humanizePercentage }} of the best ranks' speed and every rank waits for it.", keep_firing_for=t.straggler_keep_firing_for),
        Alert("TrainingJobHung", f"max by (job_id) ({hung}) == 1", PAGE,
              "Training job {{ $labels.job_id }} is hung",
              "Job {{ $labels.job_id }} shows no compute, no traffic and no I/O for "
              + config.for_of("TrainingJobHung") + ": a rank is deadlocked or waiting on a lost peer."),
        Alert("CheckpointStallExcessive",
              f'lockstep:job_lost_gpu_time:ratio{{cause="checkpoint"}} > {t.checkpoint_lost_ratio:g}', TICKET,
              "Checkpoints cost job {{ $labels.job_id }} {{ $value | humanizePercentage }} of its GPU time",
              "Job {{ $labels.job_id }} lost {{ $value | humanizePercentage }} of its allocated GPU time to "
              f"blocking checkpoints over {t.checkpoint_window} (threshold {t.checkpoint_lost_ratio:.0%})."),
    ]


def facility(config: AlertsConfig) -> list[Alert]:
    t, sel = config.thresholds, config.selectors.power
    coolant = metric("lockstep_coolant_temperature_celsius", sel, f'loop=~"{t.coolant_loop}"')
    return [
        Alert("RackPowerNearBudget", f"lockstep:rack_power_budget:ratio > {t.rack_power_budget_ratio:g}", PAGE,
              "Rack {{ $labels.rack }} at {{ $value | humanizePercentage }} of its power budget",
              "Rack {{ $labels.rack }} draws {{ $value | humanizePercentage }} of its breaker budget "
              f"(threshold {t.rack_power_budget_ratio:.0%}); a load step can trip the breaker and take "
              "the whole rack down."),
        Alert("CoolantTemperatureHigh", f"{coolant} > {t.coolant_supply_celsius:g}", TICKET,
              "Coolant {{ $labels.loop }} at {{ $value }} °C on {{ $labels.target }}",
              "The {{ $labels.loop }} loop of {{ $labels.target }} is at {{ $value }} °C "
              f"(limit {t.coolant_supply_celsius:g} °C); GPUs will throttle thermally next."),
    ]


def exporters(config: AlertsConfig) -> list[Alert]:
    sel = config.selectors.exporters
    return [
        Alert("ExporterCollectorFailing",
              f"{metric('lockstep_scrape_collector_success', sel)} == 0", TICKET,
              "Collector {{ $labels.collector }} failing on {{ $labels.instance }}",
              "The {{ $labels.collector }} collector of {{ $labels.job }} on {{ $labels.instance }} has failed every "
              "scrape for " + config.for_of("ExporterCollectorFailing") + "; its metrics are absent, not zero."),
        Alert("ExporterDown", f"up{{{sel}}} == 0", TICKET,
              "{{ $labels.job }} target {{ $labels.instance }} is down",
              "Prometheus cannot scrape {{ $labels.job }} at {{ $labels.instance }}; every alert that needs its "
              "metrics is blind."),
        # A target that service discovery drops has no `up` at all, so `== 0` never sees it; when every
        # node agent is gone (DaemonSet deleted, selector typo) all GPU and fabric alerts would go silent.
        Alert("ExporterDown", f"absent(up{{{config.selectors.node}}})", TICKET,
              "no lockstep-node target is scraped",
              f"Prometheus has no target left for {config.selectors.node}: service discovery lost every node "
              "agent, so every GPU and fabric alert is blind.",
              (("signal", "targets_gone"),)),
    ]


def alerts(config: AlertsConfig) -> list[Alert]:
    return jobs(config) + facility(config) + exporters(config)
