"""Hardware constants of the simulated H100 / ConnectX-7 cluster (fixtures/README.md has the sources)."""

GPU_NAME = "NVIDIA H100 80GB HBM3"   # as NVML names it (lockstep_gpu_info's name)
DRIVER_VERSION = "550.90.07"
MAX_SM_MHZ = 1980          # H100 SXM5 max SM clock
MEM_MHZ = 2619             # HBM3 clock
IDLE_SM_MHZ = 345          # an idle H100 parks its SM clock low
POWER_LIMIT_W = 700.0      # board power limit
MEMORY_TOTAL = 85520809984  # 81,559 MiB visible to the driver
MEMORY_JOB = 71.0e9        # a large-model training job fills most of HBM
MEMORY_IDLE = 5.6e8

# Board power by activity: compute near the limit, NCCL kernels light, a rank spinning in an
# NCCL wait keeps the GPU "utilized" (a kernel is resident) at low SM activity and power.
POWER_IDLE_W = 75.0
POWER_COMPUTE_W = 690.0
POWER_COMM_W = 380.0
POWER_SPIN_W = 125.0
POWER_CKPT_W = 110.0
SM_COMPUTE, SM_COMM, SM_SPIN = 0.86, 0.12, 0.04
TENSOR_COMPUTE = 0.58
THERMAL_THROTTLE_C = 87.0  # H100 slows clocks from ~85 C (sw/hw thermal slowdown)
DEFECT_C = 90.0            # a GPU whose cooling failed (a dried thermal interface, a dead fan) sits at its slowdown

# A step: forward/backward compute, then the exposed part of the gradient all-reduce.
COMPUTE_SHARE = 0.75
LINK_RATE_BPS = 400e9 / 8  # 400 Gb/s per rail (NDR / 400G RoCE)
ALLREDUCE_LINK_EFFICIENCY = 0.8
MTU = 4096
STORM_THROUGHPUT = 0.03    # a paused rail moves ~3% of its normal traffic
STORM_PAUSES_PER_S = 24000  # pause quanta 65535 x 512 bit-times = 84 us at 400G; refreshed every ~42 us
XMIT_WAIT_TICKS_PER_S = 2.5e8  # port_xmit_wait ticks while fully blocked
FLAP_DOWN_S = 2.0
INSPECTOR_INTERVAL_S = 30.0   # NCCL Inspector's minimum dump interval with NCCL_INSPECTOR_PROM_DUMP=1

# Server and rack power: GPUs plus CPUs, NVSwitch, NICs, fans (DGX H100 ~10.2 kW max).
NODE_BASE_IDLE_W = 2000.0
NODE_BASE_BUSY_W = 3600.0
RACK_OVERHEAD_W = 400.0    # top-of-rack switches and management
COOLANT_SUPPLY_C = 40.0        # node inlet loop (fixtures README: ~40 C in, ~45 C out)
COOLANT_CP = 3974.0        # J/(kg K), water-glycol (cooling-unit mockup)
COOLANT_FLOW_LPM_PER_NODE = 18.0
LIQUID_CAPTURE = 0.85      # share of server heat taken by the liquid loop

# Storage: Lustre 1 MiB RPCs, NFS home directory, local NVMe cache.
RPC_BYTES = 1 << 20
SECTOR = 512
# The job's cgroup: its data loader's cache device (nvme1n1, /scratch) and its I/O pressure. The loaders spend
# this share of the running time waiting on a read (PSI "some") even when the input keeps up; while the ranks
# wait for input, every task of the job waits on I/O ("some" and "full").
CACHE_DEVICE = "259:3"
LOADER_IO_SHARE = 0.02

# NCCL's RAS (src/ras/ras_internal.h): a peer that stops answering is considered dead after
# RAS_PEER_DEAD_TIMEOUT; the node agent polls RAS every 15 s (the nccl-ras collector's default).
RAS_PEER_DEAD_TIMEOUT_S = 60.0
RAS_POLL_S = 15.0
