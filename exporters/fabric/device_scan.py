"""The device set a sysfs collector reads: rediscovered when ``<sysfs>/class/infiniband`` changes (and
once a minute, for ports or counter files that appeared without the listing changing: a driver reload
that kept the device name, hw_counters created after the device), with the held descriptors of
vanished devices and ports closed."""
from __future__ import annotations

import time
from pathlib import Path

from exporters.fabric.sysfs import HeldFiles
from exporters.fabric.topology import IbDevice, discover, listing

REDISCOVER_S = 60.0


class DeviceScan:
    def __init__(self, sysfs: Path) -> None:
        self.sysfs = sysfs
        self.files = HeldFiles()
        self.devices: tuple[IbDevice, ...] = ()
        self._listing: tuple[str, ...] | None = None
        self._next = 0.0

    def refresh(self) -> tuple[IbDevice, ...] | None:
        """The device set if it was (re)discovered for this scrape, else None (nothing to rebuild)."""
        self.files.new_scrape()
        names = listing(self.sysfs)
        now = time.monotonic()
        if names == self._listing and now < self._next:
            return None
        for device in self.devices:
            if device.name not in names:
                self.files.forget(device.path + "/")
        self._listing, self._next = names, now + REDISCOVER_S
        devices = discover(self.sysfs, names)
        if devices == self.devices and devices:  # periodic check found nothing new
            return None
        # A port can vanish while its device stays (port unbound, split undone): its plan is dropped,
        # so nothing would read (and reopen or close) its descriptors again.
        kept = {port.path for device in devices for port in device.ports}
        for port in (p for device in self.devices for p in device.ports if p.path not in kept):
            self.files.forget(port.path + "/")
        self.devices = devices
        return devices

    def close(self) -> None:
        self.files.close()
