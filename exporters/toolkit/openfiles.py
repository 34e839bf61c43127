"""The process' open-files limit, lifted at start as Go exporters do."""
from __future__ import annotations

import logging

from lockstep.exporters.toolkit.logs import kv

log = logging.getLogger("lockstep.web")


def raise_open_files_limit(cap: int = 1 << 20) -> int:
    """Lift the soft open-files limit to the hard one (at most ``cap``); the soft limit now. Debian's
    default soft limit is 1024: every connection a service holds is a descriptor, and so is every
    connection the power exporter keeps to a BMC (up to four per target)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = cap if hard == resource.RLIM_INFINITY else min(hard, cap)
    if soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-files limit", extra=kv(soft=soft, hard=hard, err=str(exc)))
    return soft
