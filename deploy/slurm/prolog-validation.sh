#!/bin/bash
# Slurm Prolog (slurm.conf: Prolog= or a prolog.d/ entry, with PrologFlags=Alloc so it runs when the node
# is allocated): the lockstep health gate (deploy/gate/lockstep-gate.sh: short DCGM diagnostic that must see
# every GPU, loopback ib_write_bw per HCA, each bounded and recorded with `lockstep validate`). A node that
# fails is drained with the failing tests as the reason and the prolog exits 1, so Slurm requeues the job
# elsewhere. The gate runs at most once per LOCKSTEP_GATE_EVERY_S (default 86400: the first job of the day;
# 0: every job), judged by its last recorded DCGM result, and only while that result passed.
set -u
export LOCKSTEP_NODE="${SLURMD_NODENAME:-$(hostname -s)}"
export LOCKSTEP_GATE_DRAIN="${LOCKSTEP_GATE_DRAIN:-slurm}"
dir="${LOCKSTEP_RESULTS_DIR:-/var/lib/lockstep/validation}"
gate="${LOCKSTEP_GATE:-/usr/local/libexec/lockstep/lockstep-gate.sh}"
last="$dir/$LOCKSTEP_NODE/dcgm-diag/gate-diag-r1@1.json"
every="${LOCKSTEP_GATE_EVERY_S:-86400}"
if [ "$every" -gt 0 ] && [ -f "$last" ] && [ $(( $(date +%s) - $(stat -c %Y "$last") )) -lt "$every" ]; then
    # the first "status" of the file is the latest run's (validation/store.py writes "latest" first)
    case "$(grep -o '"status":"[a-z]*"' "$last" | head -n 1)" in
        '"status":"pass"'|'"status":"warn"') exit 0 ;;
    esac
fi
exec "$gate"
