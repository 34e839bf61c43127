#!/bin/bash
# Slurm Epilog: fail (so Slurm drains the node) when the local lockstep agent reports a failed
# cluster-validation check on any GPU:
#   lockstep_gpu_up 0                    GPU lost (fell off the bus, XID 79)
#   lockstep_gpu_p2p_status not allowed  peer-to-peer blocked (ACS left on in the BIOS, ...)
#   lockstep_gpu_pcie_link_degraded 1    PCIe link trained below its max width
#   lockstep_gpu_persistence_mode 0      persistence mode off
#   lockstep_gpu_ecc_enabled 0           ECC disabled
# An unreachable agent is not a node fault (ExporterDown alerts on it): that exits 0 with a warning.
# An agent that answers but refuses the request (401/403: basic auth on, wrong or no credentials) or
# fails it is: the GPU health gate would be silently off, so that exits 1 with the reason.
# Credentials for an agent with basic auth (--web.config.file): LOCKSTEP_AGENT_CREDENTIALS_FILE, a
# file (mode 0600, root) holding "user:password" on one line; they reach curl on its standard input,
# never on its command line. LOCKSTEP_AGENT_CACERT: the CA file of an agent serving TLS.
# LOCKSTEP_P2P_ALLOWED: comma-separated NVML P2P status codes that pass (default 0 = OK). On PCIe servers
# without NVLink, P2P across CPU sockets is legitimately "IOH topology not supported" (3): set "0,3"
# there, or every job's epilog would drain a healthy node. HGX/SXM systems keep the default.
set -u
url="${LOCKSTEP_AGENT_URL:-http://127.0.0.1:9840/metrics}"
body="$(mktemp)"
trap 'rm -f "$body"' EXIT
curl_config() {  # curl's config syntax on stdin: the password stays out of argv (/proc is world-readable)
    if [ -n "${LOCKSTEP_AGENT_CREDENTIALS_FILE:-}" ]; then
        local creds
        creds="$(head -n 1 "$LOCKSTEP_AGENT_CREDENTIALS_FILE")" || return 1
        creds="${creds//\\/\\\\}"
        printf 'user = "%s"\n' "${creds//\"/\\\"}"
    fi
    if [ -n "${LOCKSTEP_AGENT_CACERT:-}" ]; then
        printf 'cacert = "%s"\n' "$LOCKSTEP_AGENT_CACERT"
    fi
}
if ! config="$(curl_config)"; then
    echo "lockstep healthcheck: cannot read LOCKSTEP_AGENT_CREDENTIALS_FILE; the GPU health gate is off" >&2
    exit 1
fi
status="$(printf '%s\n' "$config" | curl -s -K - -o "$body" -w '%{http_code}' \
          --max-time "${LOCKSTEP_AGENT_TIMEOUT:-10}" "$url")"
rc=$?
if [ "$rc" = 7 ] || [ "$rc" = 28 ]; then  # connection refused, timed out: the agent is down
    echo "lockstep healthcheck: cannot reach $url; skipping GPU checks" >&2
    exit 0
fi
if [ "$rc" != 0 ]; then  # TLS, a bad URL, ...: a configuration error, not a node without an agent
    echo "lockstep healthcheck: curl failed on $url (exit $rc); the GPU health gate cannot run" >&2
    exit 1
fi
if [ "$status" != "200" ]; then
    echo "lockstep healthcheck: $url answered HTTP $status (credentials: LOCKSTEP_AGENT_CREDENTIALS_FILE);" \
         "the GPU health gate cannot run" >&2
    exit 1
fi
metrics="$(cat "$body")"

failures="$(printf '%s\n' "$metrics" | awk -v allowed="${LOCKSTEP_P2P_ALLOWED:-0}" '
    BEGIN { n = split(allowed, codes, ","); for (i = 1; i <= n; i++) ok[codes[i] + 0] = 1 }
    /^#/ { next }
    { split($1, parts, "{"); name = parts[1]; labels = parts[2]; sub(/}$/, "", labels); value = $2 + 0 }
    name == "lockstep_gpu_up" && value == 0                  { print "GPU lost {" labels "}" }
    name == "lockstep_gpu_p2p_status" && !(value in ok)      { print "P2P status " value " {" labels "}" }
    name == "lockstep_gpu_pcie_link_degraded" && value == 1  { print "PCIe link below max width {" labels "}" }
    name == "lockstep_gpu_persistence_mode" && value == 0    { print "persistence mode off {" labels "}" }
    name == "lockstep_gpu_ecc_enabled" && value == 0         { print "ECC disabled {" labels "}" }
')"
[ -z "$failures" ] && exit 0

printf 'lockstep healthcheck: %s\n' "$failures" >&2
reason="lockstep: $(printf '%s' "$failures" | head -n 1)"
if [ -n "${SLURMD_NODENAME:-}" ] && command -v scontrol >/dev/null; then
    scontrol update nodename="$SLURMD_NODENAME" state=drain reason="$reason" || true
fi
exit 1
