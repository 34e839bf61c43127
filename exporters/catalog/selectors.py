"""Which Prometheus scrape job serves which series: the job names of the deploy conventions and the
label matchers every consumer selects them with (the mixin convention: one config of selectors).

The alert and recording rules, the dashboards and the analytics service's queries are functions of
one ``Selectors``; the local stack names its scrape jobs after the same constants. A site that
scrapes under other job names, or adds a cluster matcher, overrides the selectors (the alerts
config's ``selectors:`` section) and nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass

NODE_JOB = "lockstep-node"              # node agents (:9840), each target labelled `node`
POWER_JOB = "lockstep-power"            # power exporter (:9841)
ANALYTICS_JOB = "lockstep-analytics"    # analytics service (:9842)
FABRIC_JOB = "lockstep-fabric"          # fabric exporters (:9843), one per InfiniBand subnet
STORAGE_JOB = "lockstep-storage"        # storage exporter (:9847): the cluster's storage systems


@dataclass(frozen=True)
class Selectors:
    """Label matchers (without braces) that pick each scrape job's series."""

    node: str = f'job="{NODE_JOB}"'
    power: str = f'job="{POWER_JOB}"'
    analytics: str = f'job="{ANALYTICS_JOB}"'
    fabric: str = f'job="{FABRIC_JOB}"'
    storage: str = f'job="{STORAGE_JOB}"'
    exporters: str = 'job=~"lockstep-.*"'   # every lockstep exporter: collector health, `up`
    training: str = ""                       # step times the training job exports itself (its own job)
    # Extra matchers for IB ports that are cabled and expected up (a spare port is down by design).
    ib_port: str = ""


DEFAULT = Selectors()
