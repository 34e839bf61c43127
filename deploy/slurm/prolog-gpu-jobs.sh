#!/bin/bash
# Slurm Prolog: record which job holds which GPU for the lockstep agent's `jobs` collector, in
# dcgm-exporter's --hpc-job-mapping-dir layout (one file per GPU index, one job id per line), so
# either exporter can read it. GPUs come from SLURM_JOB_GPUS (indices) or CUDA_VISIBLE_DEVICES
# (indices or, with newer Slurm, GPU UUIDs, mapped to indices through nvidia-smi).
# Telemetry must never fail a job: problems are reported on stderr and the script exits 0.
set -u
dir="${LOCKSTEP_GPU_JOB_DIR:-/var/run/lockstep/gpu-jobs}"
users="${LOCKSTEP_GPU_JOB_USER_DIR:-${dir}-users}"
smi="${LOCKSTEP_NVIDIA_SMI:-nvidia-smi}"
job="${SLURM_JOB_ID:-}"
gpus="${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-}}"
[ -n "$job" ] && [ -n "$gpus" ] || exit 0
mkdir -p "$dir" "$users" || exit 0

index_of() {  # GPU UUID -> index
    "$smi" --query-gpu=index,uuid --format=csv,noheader 2>/dev/null |
        awk -F', *' -v uuid="$1" '$2 == uuid { print $1 }'
}

exec 9>"$users/.lock" && flock 9   # two jobs sharing a GPU: serialise the read-modify-write
for gpu in ${gpus//,/ }; do
    case "$gpu" in
        GPU-*) index="$(index_of "$gpu")" ;;
        *) index="$gpu" ;;
    esac
    if ! [[ "$index" =~ ^([0-9]+|MIG-[0-9a-fA-F-]+)$ ]]; then
        echo "lockstep prolog: job $job: cannot map GPU '$gpu' to an index" >&2
        continue
    fi
    tmp="$dir/.$index.$job"
    { grep -vx -- "$job" "$dir/$index" 2>/dev/null; echo "$job"; } >"$tmp" && mv -f "$tmp" "$dir/$index"
done
printf '%s\n' "${SLURM_JOB_USER:-}" >"$users/$job"
exit 0
