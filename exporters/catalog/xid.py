"""The XID catalog (``xid.csv`` beside this file: every code in NVIDIA's Xid Catalog, its source cited
there), and the one rule turning a code into what operators act on.

``lockstep_gpu_xid_errors_total`` carries each code's ``severity``, ``category`` and ``action``; alert
rules and the quarantine receiver act on those labels, never on a list of codes.

The vocabularies are in ``enums`` (XID_CATEGORIES, XID_ACTIONS, XID_SEVERITIES):

- category: ``application`` (NVIDIA points at the workload: CHECK_APP/CUDA, the XID 13/31/137 flows,
  or its trigger text says so), ``driver`` (driver, firmware or GSP software), ``engine`` (a GPU
  engine faulted or timed out and NVIDIA names no cause), ``hardware`` (memory, PCIe, NVLink, power),
  ``informational``, ``unused`` (NVIDIA: not raised on Ampere and newer).
- action, from NVIDIA's immediate-action bucket: IGNORE → none, RESTART_APP → restart_app, RESET_GPU
  → reset_gpu, RESTART_BM and RESTART_VM → reboot_node, CHECK_MECHANICALS → service_hardware,
  UPDATE_SWFW → update_software, CONTACT_SUPPORT → investigate; workflows and blanks as each row's note says.
- severity: ``critical`` when the GPU must not take new work until someone acts (reset_gpu,
  reboot_node, service_hardware); ``warning`` when a job died or someone should look (restart_app,
  update_software, investigate, or hardware reporting trouble it handled); ``info`` otherwise.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

# ACTIONS, CATEGORIES, SEVERITIES: the vocabularies, re-exported for the catalog's readers
from lockstep.exporters.catalog.enums import XID_ACTIONS as ACTIONS  # noqa: F401
from lockstep.exporters.catalog.enums import XID_CATEGORIES as CATEGORIES  # noqa: F401
from lockstep.exporters.catalog.enums import XID_CRITICAL, XID_INFO, XID_WARNING
from lockstep.exporters.catalog.enums import XID_DRAIN_ACTIONS as DRAIN_ACTIONS
from lockstep.exporters.catalog.enums import XID_SEVERITIES as SEVERITIES  # noqa: F401

BUCKETS = {"IGNORE": "none", "RESTART_APP": "restart_app", "RESET_GPU": "reset_gpu", "RESTART_BM": "reboot_node",
           "RESTART_VM": "reboot_node", "CHECK_MECHANICALS": "service_hardware", "UPDATE_SWFW": "update_software",
           "CONTACT_SUPPORT": "investigate"}
SOURCE = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
PATH = Path(__file__).with_name("xid.csv")


@dataclass(frozen=True, slots=True)
class Xid:
    code: int
    mnemonic: str
    description: str
    applies_to: tuple[str, ...]
    nvidia_immediate_action: str
    nvidia_investigatory_action: str
    category: str
    action: str
    note: str

    @property
    def severity(self) -> str:
        return severity(self.category, self.action)


def severity(category: str, action: str) -> str:
    if action in DRAIN_ACTIONS:
        return XID_CRITICAL
    if action != "none" or category == "hardware":
        return XID_WARNING
    return XID_INFO


# A code newer than this table (drivers add codes every branch): someone should look.
UNKNOWN = Xid(0, "", "not in NVIDIA's catalog as of this release", (), "", "", "unknown", "investigate", "")


def load(path: Path = PATH) -> dict[int, Xid]:
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    table = {}
    for row in csv.DictReader(lines):
        xid = Xid(int(row["code"]), row["mnemonic"], row["description"], tuple(row["applies_to"].split()),
                  row["nvidia_immediate_action"], row["nvidia_investigatory_action"], row["category"], row["action"],
                  row["note"])
        table[xid.code] = xid
    return table


CATALOG = load()


def lookup(code: int) -> Xid:
    return CATALOG.get(code, UNKNOWN)
