"""Alerts on training jobs (from the analytics service), rack power and cooling (power exporter) and
on lockstep's own exporters."""
from __future__ import annotations

from lockstep.alerts.model import FOR, Alert, metric
from lockstep.alerts.recording import JOB_GPUS, JOB_LOST_GPU_TIME, RACK_POWER_BUDGET
from lockstep.alerts.settings import AlertsConfig
from lockstep.exporters.catalog.enums import CHECKPOINT, HANG, HARDWARE, PAGE, RANK_DEAD, STALLS_ALERTED_APART, TICKET


def jobs(config: AlertsConfig) -> list[Alert]:
    t, sel = config.thresholds, config.selectors.analytics
    stalled = metric("lockstep_job_stalled", sel, f'cause!~"{"|".join(STALLS_ALERTED_APART)}"')
    hung = metric("lockstep_job_stalled", sel, f'cause="{HANG}"')
    missing = metric("lockstep_job_member_missing", sel)
    culprit = f'max by (job_id, node, gpu, rank, cause) ({metric("lockstep_job_hang_culprit", sel)}) == 1'
    large = f"{JOB_GPUS} >= {t.rank_hung_page_gpus:g}"
    score = f'min by (job_id, node, gpu) ({metric("lockstep_straggler_score", sel)})'
    flagged = f'max by (job_id, node, gpu) ({metric("lockstep_straggler_flagged", sel)}) == 1'
    broken = metric("lockstep_straggler_cause", sel, f'cause="{HARDWARE}"')
    hardware = f"max by (job_id, node, gpu) ({broken}) == 1"
    last = metric("lockstep_job_checkpoint_last_duration_seconds", sel)
    seconds = metric("lockstep_job_checkpoint_seconds_total", sel)
    count = metric("lockstep_job_checkpoints_total", sel)
    return [
        # Checkpoint stalls are expected and bounded; they have their own alert below. A hang pages as Hung.
        Alert("TrainingJobStalled", f"max by (job_id, cause) ({stalled}) == 1", PAGE,
              "Training job {{ $labels.job_id }} stalled ({{ $labels.cause }})",
              "Job {{ $labels.job_id }} has made no progress for " + FOR
              + "; the analytics service attributes the stall to {{ $labels.cause }}.", for_="10m"),
        # The analytics service flags a straggler once two signals agree and the slowdown persisted; the
        # alert's value is the score (evidence for the reader), the flag decides.
        Alert("TrainingJobStraggler", f"{score}\nand on (job_id, node, gpu)\n{flagged}", TICKET,
              "Straggler in job {{ $labels.job_id }}: {{ $labels.node }} GPU {{ $labels.gpu }}",
              "{{ $labels.node }} GPU {{ $labels.gpu }} holds job {{ $labels.job_id }} back: it runs at "
              "{{ $value | humanizePercentage }} of the best ranks' speed and every rank waits for it.",
              keep_firing_for=t.straggler_keep_firing_for, for_="5m"),
        # A straggler its own hardware explains (a thermal or hardware slowdown, the power brake, its clock below
        # its peers', a narrow PCIe link, a hardware XID), also when it was slow since the job started: the
        # node is a quarantine candidate (alerts/quarantine.py drains it; the running job finishes first).
        Alert("GPUHardwareStraggler", hardware, TICKET,
              "Broken GPU slows job {{ $labels.job_id }}: {{ $labels.node }} GPU {{ $labels.gpu }}",
              "{{ $labels.node }} GPU {{ $labels.gpu }} holds job {{ $labels.job_id }} back and its own hardware "
              "explains it (the straggler's evidence says which: clock-event reasons, its clock against its peers', "
              "temperature, PCIe link, XIDs). Drain {{ $labels.node }}"
              "{{ if $labels.gpu }} (GPU {{ $labels.gpu }}){{ end }} once the job can move.", for_="5m"),
        Alert("TrainingJobHung", f"max by (job_id) ({hung}) == 1", PAGE,
              "Training job {{ $labels.job_id }} is hung",
              "Job {{ $labels.job_id }} shows no compute, no traffic and no I/O for "
              + FOR + ": a rank is deadlocked or waiting on a lost peer.", for_="5m"),
        # One alert per missing member: the page names the node (and pod) the rest of the job waits for.
        Alert("TrainingJobMemberLost", f"max by (job_id, node, pod) ({missing}) == 1", PAGE,
              "Training job {{ $labels.job_id }} lost a member on {{ $labels.node }}"
              "{{ if $labels.pod }} (pod {{ $labels.pod }}){{ end }}",
              "The GPUs job {{ $labels.job_id }} held on {{ $labels.node }}{{ if $labels.pod }} (pod "
              "{{ $labels.pod }}){{ end }} left the GPU-job mapping (the pod is gone, or the node agent "
              "stopped answering) and the rest of the job has waited in its collective for " + FOR
              + ": it burns its GPUs until the member is back or the job is restarted.", for_="2m"),
        # One alert per rank the hung job waits for, named by NCCL's RAS: a page where the job is large (many
        # GPUs burn for one rank), a ticket otherwise.
        *(rank_hung(culprit, f"\n{how} on (job_id) ({large})", severity, size)
          for how, severity, size in (("and", PAGE, f"at least {t.rank_hung_page_gpus:g}"),
                                      ("unless", TICKET, f"under {t.rank_hung_page_gpus:g}"))),
        Alert("CheckpointStallExcessive",
              f'{JOB_LOST_GPU_TIME}{{cause="{CHECKPOINT}"}} > {t.checkpoint_lost_ratio:g}', TICKET,
              "Checkpoints cost job {{ $labels.job_id }} {{ $value | humanizePercentage }} of its GPU time",
              "Job {{ $labels.job_id }} lost {{ $value | humanizePercentage }} of its allocated GPU time to "
              f"blocking checkpoints over {t.checkpoint_window} (threshold {t.checkpoint_lost_ratio:.0%}).",
              for_="15m"),
        # The last checkpoint against the mean of the job's earlier ones (the service's counters: all of them
        # less the last), once it has a history: slower storage, a bigger state, or a checkpoint tier filling up.
        Alert("CheckpointSlow", f"{last}\n> {t.checkpoint_slow_factor:g} * (({seconds} - {last}) / ({count} - 1))\n"
                                f"and {count} >= {t.checkpoint_slow_min_history + 1}", TICKET,
              "Job {{ $labels.job_id }}'s last checkpoint was slow",
              "Job {{ $labels.job_id }}'s last checkpoint took {{ $value | humanizeDuration }}, more than "
              f"{t.checkpoint_slow_factor:g} times the mean of its earlier checkpoints: check the file system it "
              "writes to (lockstep_job_checkpoint_last_bandwidth_bytes_per_second, StorageLatencyHigh).", for_="1m"),
    ]


def rank_hung(culprit: str, size_match: str, severity: str, size: str) -> Alert:
    rank = "{{ if $labels.rank }}rank {{ $labels.rank }}{{ else }}a rank{{ end }}"
    return Alert(
        "TrainingJobRankHung", culprit + size_match, severity,
        "Job {{ $labels.job_id }} waits for " + rank + " on {{ $labels.node }} GPU {{ $labels.gpu }}",
        "Job {{ $labels.job_id }} (" + size + " GPUs) is hung on one of its ranks: NCCL's RAS shows " + rank
        + " on {{ $labels.node }} GPU {{ $labels.gpu }} "
        f'{{{{ if eq $labels.cause "{RANK_DEAD}" }}}}no longer answering (its process is gone or frozen)'
        "{{ else }}behind its communicator (it stopped entering collectives){{ end }} while every other rank has "
        "waited for it in a collective for " + FOR + ".", for_="3m",
        # a RAS answer missed (a scrape or a poll) leaves one sample without its culprit: no second page for it
        keep_firing_for="1m")


def facility(config: AlertsConfig) -> list[Alert]:
    t, sel = config.thresholds, config.selectors.power
    coolant = metric("lockstep_coolant_temperature_celsius", sel, f'loop=~"{t.coolant_loop}"')
    return [
        Alert("RackPowerNearBudget", f"{RACK_POWER_BUDGET} > {t.rack_power_budget_ratio:g}", PAGE,
              "Rack {{ $labels.rack }} at {{ $value | humanizePercentage }} of its power budget",
              "Rack {{ $labels.rack }} draws {{ $value | humanizePercentage }} of its breaker budget "
              f"(threshold {t.rack_power_budget_ratio:.0%}); a load step can trip the breaker and take "
              "the whole rack down.", for_="5m"),
        Alert("CoolantTemperatureHigh", f"{coolant} > {t.coolant_supply_celsius:g}", TICKET,
              "Coolant {{ $labels.loop }} at {{ $value }} °C on {{ $labels.target }}",
              "The {{ $labels.loop }} loop of {{ $labels.target }} is at {{ $value }} °C "
              f"(limit {t.coolant_supply_celsius:g} °C); GPUs will throttle thermally next.", for_="5m"),
    ]


def exporters(config: AlertsConfig) -> list[Alert]:
    sel = config.selectors.exporters
    return [
        Alert("ExporterCollectorFailing",
              f"{metric('lockstep_scrape_collector_success', sel)} == 0", TICKET,
              "Collector {{ $labels.collector }} failing on {{ $labels.instance }}",
              "The {{ $labels.collector }} collector of {{ $labels.job }} on {{ $labels.instance }} has failed every "
              "scrape for " + FOR + "; its metrics are absent, not zero.", for_="10m"),
        Alert("ExporterDown", f"up{{{sel}}} == 0", TICKET,
              "{{ $labels.job }} target {{ $labels.instance }} is down",
              "Prometheus cannot scrape {{ $labels.job }} at {{ $labels.instance }}; every alert that needs its "
              "metrics is blind.", for_="5m"),
        # A target that service discovery drops has no `up` at all, so `== 0` never sees it; when every
        # node agent is gone (DaemonSet deleted, selector typo) all GPU and fabric alerts would go silent.
        Alert("ExporterDown", f"absent(up{{{config.selectors.node}}})", TICKET,
              "no lockstep-node target is scraped",
              f"Prometheus has no target left for {config.selectors.node}: service discovery lost every node "
              "agent, so every GPU and fabric alert is blind.",
              (("signal", "targets_gone"),), for_="5m"),
    ]


def fleet(config: AlertsConfig) -> list[Alert]:
    """The analytics service's fleet pass: a GPU degraded against its peers (same model and driver)."""
    sel = config.selectors.analytics
    score = f'max by (node, gpu, model) ({metric("lockstep_gpu_peer_outlier_score", sel)})'
    degraded = f'max by (node, gpu) ({metric("lockstep_gpu_peer_degraded", sel)}) == 1'
    return [
        # The verdict already persisted (analytics/scoring/peers.py); the value is the outlier score.
        Alert("GPUSlowerThanPeers", f"{score}\nand on (node, gpu)\n{degraded}", TICKET,
              "{{ $labels.node }} GPU {{ $labels.gpu }} is degraded against its peers",
              "{{ $labels.node }} GPU {{ $labels.gpu }} ({{ $labels.model }}) sits {{ $value | printf \"%.1f\" }} "
              "robust units from the median of its model's GPUs on the same driver across the fleet, while loaded; "
              "lockstep_gpu_peer_deviation names the features (sm_clock, power, thermal, pcie).", for_="5m"),
    ]


def alerts(config: AlertsConfig) -> list[Alert]:
    return jobs(config) + facility(config) + exporters(config) + fleet(config)
