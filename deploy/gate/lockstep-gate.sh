#!/bin/bash
# lockstep health gate: a bounded quick check before work lands on a node, each step recorded with
# `lockstep validate run` (the node agent serves the results; ValidationFailed alerts on them):
#   1. a short DCGM diagnostic (dcgmi diag -r 1 -j) that must report on every GPU (--expect-gpus)
#   2. a loopback ib_write_bw on each HCA (server and client on this node)
# Every step has a hard timeout (its whole process group is killed; the result is `timeout`). On any
# failure the node is drained (LOCKSTEP_GATE_DRAIN: slurm, kubernetes or none) with the failing tests
# as the reason, and the script exits 1. Used by deploy/slurm/prolog-validation.sh and the Kubernetes
# Job in deploy/kubernetes/validation-gate-job.yaml.
#
# LOCKSTEP_NODE            node name (default: short host name)
# LOCKSTEP_RESULTS_DIR     results directory the agent reads (default /var/lib/lockstep/validation)
# LOCKSTEP_EXPECTED_GPUS   GPUs the node must have (default: every GPU nvidia-smi lists; 0 skips step 1)
# LOCKSTEP_GATE_HCAS       HCAs for step 2 (default: every device in /sys/class/infiniband; "" skips it)
# LOCKSTEP_GATE_DIAG_TIMEOUT, LOCKSTEP_GATE_IB_TIMEOUT   seconds (default 300, 60)
# LOCKSTEP_GATE_IB_ARGS    ib_write_bw options (default: -s 1048576 -n 2000 -F)
set -u
lockstep="${LOCKSTEP:-lockstep}"
node="${LOCKSTEP_NODE:-$(hostname -s)}"
dir="${LOCKSTEP_RESULTS_DIR:-/var/lib/lockstep/validation}"
ib_args="${LOCKSTEP_GATE_IB_ARGS:--s 1048576 -n 2000 -F}"
if [ -z "${LOCKSTEP_EXPECTED_GPUS+set}" ]; then
    LOCKSTEP_EXPECTED_GPUS="$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | grep -c .)"
fi
if [ -z "${LOCKSTEP_GATE_HCAS+set}" ]; then
    LOCKSTEP_GATE_HCAS="$(ls /sys/class/infiniband 2>/dev/null | tr '\n' ' ')"
fi

failed=""
record() {  # record NAME KIND TIMEOUT [validate flags...] -- TOOL ARGS...
    local name="$1" kind="$2" timeout="$3"
    shift 3
    if ! "$lockstep" validate run "$kind" --timeout "$timeout" --node "$node" --results-dir "$dir" "$@"; then
        failed="$failed $name"
    fi
}

if [ "${LOCKSTEP_EXPECTED_GPUS:-0}" -gt 0 ]; then
    record diag-r1 dcgm-diag "${LOCKSTEP_GATE_DIAG_TIMEOUT:-300}" --test gate-diag-r1 \
        --expect-gpus "$LOCKSTEP_EXPECTED_GPUS" -- dcgmi diag -r 1 -j
fi
for hca in $LOCKSTEP_GATE_HCAS; do
    # The server answers one client and exits; the client retries while the server starts listening.
    loopback="ib_write_bw -d $hca $ib_args >/dev/null 2>&1 & for try in 1 2 3 4 5; do
              ib_write_bw -d $hca $ib_args localhost && exit 0; sleep 1; done; exit 1"
    record "ib_write_bw/$hca" perftest "${LOCKSTEP_GATE_IB_TIMEOUT:-60}" --test "gate-ib_write_bw/$hca" \
        -- sh -c "$loopback"
done
[ -z "$failed" ] && exit 0

reason="lockstep gate failed:$failed"
echo "$reason" >&2
case "${LOCKSTEP_GATE_DRAIN:-none}" in
    slurm)
        scontrol update nodename="$node" state=drain reason="$reason" ;;
    kubernetes)  # cordon through the API with the pod's service account (validation-gate-rbac.yaml)
        sa=/var/run/secrets/kubernetes.io/serviceaccount
        body="{\"spec\":{\"unschedulable\":true},\"metadata\":{\"annotations\":{\"lockstep.io/drain-reason\":\"$reason\"}}}"
        curl -sS --fail --max-time 10 --cacert "$sa/ca.crt" -H "Authorization: Bearer $(cat "$sa/token")" \
            -H "Content-Type: application/strategic-merge-patch+json" -X PATCH -d "$body" \
            "https://kubernetes.default.svc/api/v1/nodes/$node" >/dev/null ;;
    none) ;;
    *) echo "lockstep gate: unknown LOCKSTEP_GATE_DRAIN '${LOCKSTEP_GATE_DRAIN}'" >&2 ;;
esac
exit 1
