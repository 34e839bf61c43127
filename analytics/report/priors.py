"""Field failure rates to judge a fleet's against, per component, per 1,000 GPU-days.

Source: Meta, "The Llama 3 Herd of Models" (2024, arXiv:2407.21783), Table 5: root causes of the 419
unexpected interruptions of the 405B model's 54-day pre-training on 16,384 H100 GPUs. Those are job
interruptions (one per failure that stopped the job), which is what a hardware XID or a link that
went down does to a synchronous job. The causes the review can see are mapped to its components;
software, host and unknown causes are left out.
"""
from __future__ import annotations

import pandas as pd

SOURCE = "Llama 3 paper (arXiv:2407.21783) Table 5: 16,384 H100, 54 days"
GPU_DAYS = 16_384 * 54

# component → (causes in Table 5, interruptions)
CAUSES = {
    "gpu": ("Faulty GPU 148, GPU SRAM memory 19, GPU system processor 17", 148 + 19 + 17),
    "gpu memory": ("GPU HBM3 memory 72", 72),
    "network": ("Network switch/cable 35", 35),
}


def table() -> pd.DataFrame:
    rows = [{"component": c, "causes": causes, "interruptions": n, "per_1000_gpu_days": 1000.0 * n / GPU_DAYS,
             "source": SOURCE} for c, (causes, n) in CAUSES.items()]
    return pd.DataFrame(rows)
