"""Slurm: the mapping directory the prolog/epilog in deploy/slurm/ maintain, in dcgm-exporter's
``--hpc-job-mapping-dir`` layout: one file per GPU, named by its index (or its UUID: newer Slurm puts
UUIDs in CUDA_VISIBLE_DEVICES; a MIG device's is MIG-<uuid>), holding one job id per line. The job's
user is in ``<user-dir>/<job_id>``.
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from lockstep.exporters.gpu.mig import DeviceRef
from lockstep.exporters.jobs.devices import resolve
from lockstep.exporters.jobs.rows import JobRow
from lockstep.exporters.readfile import read_text
from lockstep.exporters.toolkit.logs import once

log = logging.getLogger("lockstep.jobs")
_JOB_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")   # Slurm: 123, 123_4 (arrays), 123+1 (het jobs)
_GPU_NAME = re.compile(r"^(\d+|GPU-[0-9a-fA-F-]+|MIG-[0-9a-fA-F-]+)$")


@dataclass(frozen=True, slots=True)
class JobMapping:
    gpu: str      # file name: an index or a UUID
    job_id: str


def parse_mapping(files: Mapping[str, str]) -> list[JobMapping]:
    """``{file name: content}`` of the mapping directory → (gpu, job) pairs; other files are ignored."""
    out = []
    for name, text in sorted(files.items()):
        if not _GPU_NAME.match(name):
            continue
        out.extend(JobMapping(name, line.strip()) for line in text.splitlines() if line.strip())
    return out


def read_dir(path: str) -> dict[str, str]:
    files = {}
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return {}
    for name in names:
        entry = os.path.join(path, name)
        try:
            files[name] = read_text(entry)
        except (FileNotFoundError, IsADirectoryError):  # removed by an epilog mid-scrape, or a subdirectory
            continue
        except PermissionError as exc:  # one unreadable file loses that GPU's mapping, not every GPU's
            once(log, logging.WARNING, f"perm:{name}", "cannot read job mapping %s: %s", entry, exc.strerror)
            continue
    return files


class SlurmSource:
    def __init__(self, mapping_dir: Path, user_dir: Path) -> None:
        self.mapping_dir, self.user_dir = os.fspath(mapping_dir), os.fspath(user_dir)

    def mappings(self) -> list[JobMapping]:
        return parse_mapping(read_dir(self.mapping_dir))

    def rows(self, mappings: list[JobMapping], refs: Mapping[str, DeviceRef]) -> list[JobRow]:
        """``refs``: ``device_refs`` of the node's GPUs. A MIG device's job carries its parent GPU's index
        and the MIG UUID. A GPU named by both an index file and a UUID file (two prologs, or a prolog
        switched from indices to UUIDs) is one row, not two."""
        # A training job usually holds every GPU of the node: its user file is read once, not per GPU.
        users = {job_id: self._user(job_id) for job_id in {mapping.job_id for mapping in mappings}}
        rows: dict[JobRow, None] = {}
        for mapping in mappings:
            ref = resolve(mapping.gpu, refs)
            rows.setdefault(JobRow(ref.gpu, ref.uuid, mapping.job_id, users[mapping.job_id]))
        return list(rows)

    def _user(self, job_id: str) -> str:
        if not _JOB_ID.match(job_id):  # a job id is a path component here: no "..", no "/"
            return ""
        try:
            return read_text(os.path.join(self.user_dir, job_id)).strip()
        except (FileNotFoundError, NotADirectoryError):
            return ""
