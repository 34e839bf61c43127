#!/bin/bash
# Slurm Epilog: remove the job from the GPU→job mapping written by prolog-gpu-jobs.sh (every GPU
# file, so a GPU list that differs from the prolog's cannot leave the job behind). Exits 0 always.
set -u
dir="${LOCKSTEP_GPU_JOB_DIR:-/var/run/lockstep/gpu-jobs}"
users="${LOCKSTEP_GPU_JOB_USER_DIR:-${dir}-users}"
job="${SLURM_JOB_ID:-}"
[ -n "$job" ] && [ -d "$dir" ] || exit 0

exec 9>"$users/.lock" && flock 9
for file in "$dir"/*; do
    [ -f "$file" ] || continue
    grep -qx -- "$job" "$file" || continue
    tmp="$dir/.$(basename "$file").$job"
    grep -vx -- "$job" "$file" >"$tmp"
    if [ -s "$tmp" ]; then mv -f "$tmp" "$file"; else rm -f "$tmp" "$file"; fi
done
rm -f "$users/$job"
exit 0
