"""Pure parsers for storage sources: Lustre llite stats (procfs, debugfs, ``lctl get_param``),
NFS ``/proc/self/mountstats``, ``/proc/diskstats`` and the mount table. Text in, frozen dataclasses
out; the collectors in ``exporters/collectors/{lustre,nfs,disk}.py`` do the reading, with
``lockstep.exporters.readfile.read_text``."""
