"""IPMI DCMI power reading, the fallback for BMCs without Redfish: the text of
``ipmitool dcmi power reading`` or FreeIPMI's ``ipmi-dcmi --get-system-power-statistics``.

Out-of-band targets use ipmitool with ``-E``: the password travels in ``IPMI_PASSWORD``, not argv
(which every local user can read in ps)."""
from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from lockstep.exporters.catalog import power as m
from lockstep.exporters.power.config import Target
from lockstep.exporters.toolkit.sample import Sample

# ipmitool: "Instantaneous power reading: 220 Watts"; ipmi-dcmi: "Current Power : 378 Watts"
_CURRENT = ("instantaneous power reading", "current power")
_STATE = ("power reading state is", "power measurement")
_WATTS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*watts?\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class DcmiPower:
    current_watts: float | None
    active: bool


def parse_dcmi_power(text: str) -> DcmiPower:
    """Either tool's output. A BMC whose power measurement is deactivated prints stale or zero
    readings, so the reading only counts when the state line says active(ated)."""
    current, active = None, None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip().lower()
        if not sep:
            continue
        if key in _CURRENT and (match := _WATTS.match(value)):
            current = float(match.group(1))
        elif key in _STATE:
            active = value.strip().lower() in ("activated", "active")
    # Older ipmitool releases print no state line; a reading is then taken as valid.
    return DcmiPower(current, active if active is not None else current is not None)


def command(target: Target) -> tuple[list[str], dict[str, str]]:
    """argv and environment for the tool; in-band (``local``) needs no credentials."""
    tool = target.ipmi_tool
    env = dict(os.environ)
    if "ipmi-dcmi" in Path(tool).name:
        return [tool, "--get-system-power-statistics"], env
    argv = [tool]
    if target.url != "local":
        parts = urlsplit(target.url)
        argv += ["-I", "lanplus", "-H", parts.hostname or "", "-p", str(parts.port or 623)]
        if target.credentials:
            argv += ["-U", target.credentials.username, "-E"]
            env["IPMI_PASSWORD"] = target.credentials.password
    return argv + ["dcmi", "power", "reading"], env


async def poll_ipmi(target: Target, timeout_s: float) -> list[Sample]:
    argv, env = command(target)
    proc = await asyncio.create_subprocess_exec(*argv, env=env, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except asyncio.TimeoutError:
        raise TimeoutError(f"{Path(argv[0]).name} timed out after {timeout_s:g}s") from None
    finally:
        if proc.returncode is None:  # timed out or the poll was cancelled: no orphan tool processes
            proc.kill()
            await proc.wait()
    if proc.returncode != 0:
        detail = err.decode(errors="replace").strip()[:200]
        raise RuntimeError(f"{Path(argv[0]).name} exited {proc.returncode}: {detail}")
    reading = parse_dcmi_power(out.decode(errors="replace"))
    if reading.current_watts is None or not reading.active:
        raise ValueError("no active DCMI power reading in the output")
    return [Sample(m.CHASSIS_POWER, (target.name,), reading.current_watts)]
