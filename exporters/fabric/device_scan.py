"""The device set a sysfs collector reads: rediscovered when ``<sysfs>/class/infiniband`` changes (and
once a minute, for ports or counter files that appeared without the listing changing: a driver reload
that kept the device name, hw_counters created after the device), with the held descriptors of
vanished devices and ports closed.

A hot-unplugged HCA, or one whose driver is unbound or reloaded, loses its directory in the class
listing (the listing is read once per scrape anyway): its descriptors are closed and its series are
absent from then on; when it returns it is discovered afresh. Reads on a descriptor of a device that
went away between two scrapes fail with ENODEV and are reopened once (``HeldFiles``). When the class
directory itself is gone (the RDMA core unloaded) the collectors say so through their success metric
(``NoData``), as node_exporter's infiniband collector does.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

from lockstep.exporters.fabric.sysfs import HeldFiles
from lockstep.exporters.fabric.topology import IbDevice, class_dir, class_listing, discover
from lockstep.exporters.registry import NoData
from lockstep.exporters.toolkit.logs import kv

log = logging.getLogger("lockstep.fabric.devices")
REDISCOVER_S = 60.0


class DeviceScan:
    def __init__(self, sysfs: Path) -> None:
        self.sysfs = sysfs
        self.files = HeldFiles()
        self.devices: tuple[IbDevice, ...] = ()
        self._listing: tuple[str, ...] | None = None
        self._next = 0.0
        self._was_present: bool | None = None   # None: not looked yet
        self._discovered = False

    def refresh(self) -> tuple[IbDevice, ...] | None:
        """The device set if it was (re)discovered for this scrape, else None (nothing to rebuild).
        Raises ``NoData`` when the class directory is absent."""
        self.files.new_scrape()
        names = class_listing(self.sysfs)
        self._note_presence(names is not None)
        if names is None:
            self._drop_vanished((), quiet=True)   # the class directory's warning says it for all
            self.devices, self._listing = (), None
            raise NoData(f"{class_dir(self.sysfs)} is absent (no RDMA driver loaded)")
        now = time.monotonic()
        if names == self._listing and now < self._next:
            return None
        self._drop_vanished(names)
        self._listing, self._next = names, now + REDISCOVER_S
        devices = discover(self.sysfs, names)
        if devices == self.devices and devices:  # periodic check found nothing new
            return None
        # A port can vanish while its device stays (port unbound, split undone): its plan is dropped,
        # so nothing would read (and reopen or close) its descriptors again.
        kept = {port.path for device in devices for port in device.ports}
        for port in (p for device in self.devices for p in device.ports if p.path not in kept):
            self.files.forget(port.path + "/")
        if self._discovered:
            for name in sorted({d.name for d in devices} - {d.name for d in self.devices}):
                log.info("RDMA device appeared", extra=kv(device=name))
        self.devices, self._discovered = devices, True
        return devices

    def _drop_vanished(self, present: tuple[str, ...], quiet: bool = False) -> None:
        """Close the descriptors of devices no longer listed (hot-unplug, driver unbound or reloaded)."""
        for device in self.devices:
            if device.name not in present:
                if not quiet:
                    log.warning("RDMA device vanished; its series are absent until it returns",
                                extra=kv(device=device.name))
                self.files.forget(device.path + "/")

    def _note_presence(self, present: bool) -> None:
        if present != self._was_present:
            if not present:
                (log.warning if self._was_present else log.debug)(
                    "RDMA class directory absent", extra=kv(path=class_dir(self.sysfs)))
            elif self._was_present is False:
                log.info("RDMA class directory back", extra=kv(path=class_dir(self.sysfs)))
        self._was_present = present

    def close(self) -> None:
        self.files.close()
