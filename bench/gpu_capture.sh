#!/usr/bin/env bash
# Records what lockstep reads from a real NVIDIA driver, on a machine with a GPU, into DIR:
#   nvml-idle.json / nvml-busy.json  what NVML answered (bench_gpu.py --nvml --capture): fields it
#                                    supports, CPU per scrape, each NVML function's cost per call
#   nvml-idle.xml  / nvml-busy.xml   the same GPUs' `nvidia-smi -q -x` (replay-backend fixtures)
#   agent-idle.prom / agent-busy.prom  the node agent's /metrics with its default collectors
#   agent.log                        the node agent's log
# "busy" is taken while a bf16 matrix-multiply loop (PyTorch) keeps every GPU loaded.
# Usage: bench/gpu_capture.sh DIR   (needs python3 with this repo's dependencies; torch for the load)
set -u
dir=${1:?usage: bench/gpu_capture.sh DIR}
mkdir -p "$dir"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"
port=19840

scrape() {  # scrape NAME: the agent's /metrics into DIR/agent-NAME.prom, waiting up to 60 s for it
    python3 - "$port" "$dir/agent-$1.prom" <<'EOF'
import sys
from lockstep.stack import http_get, wait_on
url, path, answer = f"http://127.0.0.1:{sys.argv[1]}/metrics", sys.argv[2], []

def answered() -> bool:
    try:
        answer[:] = [http_get(url, timeout=30)]
    except OSError:
        return False
    return answer[0][0] == 200

wait_on(answered, 60, url)
open(path, "wb").write(answer[0][1])
print(path, len(answer[0][1].splitlines()), "lines")
EOF
}

nvidia-smi -L
timeout 180 python3 bench/bench_gpu.py --nvml --capture "$dir/nvml-idle.json"
python3 -m lockstep exporter --web.listen-address "127.0.0.1:$port" >"$dir/agent.log" 2>&1 &
agent=$!
scrape idle

python3 - <<'EOF' &
import time, torch
mats = [torch.randn(8192, 8192, device=f"cuda:{i}", dtype=torch.bfloat16) for i in range(torch.cuda.device_count())]
end = time.monotonic() + 60
while time.monotonic() < end:
    for m in mats:
        m @ m
    torch.cuda.synchronize()
EOF
load=$!
sleep 20  # let clocks, power and temperature reach their loaded values
scrape busy
timeout 180 python3 bench/bench_gpu.py --nvml --capture "$dir/nvml-busy.json"
wait "$load"
kill "$agent"
wait "$agent"
echo "agent exit status $?"
