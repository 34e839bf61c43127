"""lockstep dashboards: Grafana dashboards as code (grafanalib), provisioned from deploy/grafana/.

``lockstep dashboards build --out DIR`` writes seven dashboards, each with a stable uid and the
``${datasource}`` variable on every panel, linked to each other (time range and variables kept):

=====================  ====================  ==============================================================
uid                    variables             shows
=====================  ====================  ==============================================================
lockstep-overview      (none)                GPUs healthy/throttled/lost, jobs and goodput, fleet activity
                                             heatmap, firing alerts, fabric and storage, rack power/budget
lockstep-job           job_id                straggler ranking with evidence, per-GPU activity heatmap,
                                             step time, stalls by cause, lost GPU-hours, rails, storage
lockstep-node          node                  clocks vs max, clock-event reasons, thermals, power vs limit,
                                             ECC, remapped rows, XIDs, PCIe/NVLink, P2P and link checks
lockstep-fabric        node, rail            throughput vs rate, xmit_wait, symbol errors, flaps, PFC
                                             pauses and paused fraction per priority, storms, ECN/CNP
lockstep-storage       node                  throughput per mount, metadata ops, checkpoints, NFS RTT, disks
lockstep-power         (none)                rack power vs budget and headroom, PDU energy, coolant,
                                             GPU-hours allocated/productive/lost month to date
=====================  ====================  ==============================================================

Layout of the package: ``config`` (the selectors every query is a function of, from
``lockstep.exporters.catalog.selectors``), ``grafana`` (the one grafanalib wrapper), ``panels`` (one factory
per panel type), ``queries`` (shared joins), one module per dashboard, ``build`` (render all),
``lint`` and ``promql`` (checks the tests run), ``check`` (run every panel query against a Prometheus).

Where the alerts' recording rules (``lockstep.alerts.recording``) record what a panel shows (the PFC paused
fraction and watchdog events, a job's lost GPU-time rate, rack power against budget, the SM clock
ratio, GPUs per job), the panel reads the recorded series: it shows what the alert sees, over the
alert's window, and Prometheus must load the generated rule file.

To change a dashboard: edit its module, run ``lockstep dashboards build --out
deploy/grafana/dashboards`` and commit the JSON; the tests fail while the two differ.
"""
