"""GPU metrics (NVML, DCGM, or the simulator's NVML-shaped state). Per-GPU series carry ``gpu``
(the index); the UUID, model and bus id live on ``lockstep_gpu_info`` only, to keep cardinality low."""
from lockstep.exporters.catalog.enums import (
    CLOCK_EVENT_REASONS,
    DCGM_HEALTH_SYSTEMS,
    HEALTH_FAILED,
    HEALTH_OK,
    HEALTH_WARNING,
    XID_ACTIONS,
    XID_CATEGORIES,
    XID_SEVERITIES,
)
from lockstep.exporters.catalog.model import counter, gauge

G = ("gpu",)

INFO = gauge("lockstep_gpu_info", "Always 1; static facts about each GPU.",
             ("gpu", "uuid", "name", "pci_bus_id", "driver_version"))
UP = gauge("lockstep_gpu_up", "1 if the GPU answers NVML, 0 if it is lost (fell off the bus, XID 79).", G)
UTILIZATION = gauge("lockstep_gpu_utilization_ratio",
                    "Fraction of the sample period a kernel was running (NVML utilization.gpu).", G, "ratio")
SM_ACTIVE = gauge("lockstep_gpu_sm_active_ratio",
                  "Fraction of time at least one warp was active on an SM, averaged over SMs (DCGM or sim).", G, "ratio")
TENSOR_ACTIVE = gauge("lockstep_gpu_tensor_active_ratio",
                      "Fraction of cycles the tensor pipe was active (DCGM or sim).", G, "ratio")
SM_CLOCK = gauge("lockstep_gpu_sm_clock_hertz", "Current SM clock.", G, "hertz")
SM_CLOCK_MAX = gauge("lockstep_gpu_sm_clock_max_hertz", "Maximum SM clock.", G, "hertz")
POWER = gauge("lockstep_gpu_power_watts", "Board power draw.", G, "watts")
POWER_LIMIT = gauge("lockstep_gpu_power_limit_watts", "Enforced power limit.", G, "watts")
ENERGY = counter("lockstep_gpu_energy_joules_total", "Energy consumed since the driver loaded.", G, "joules")
TEMPERATURE = gauge("lockstep_gpu_temperature_celsius", "GPU core temperature.", G, "celsius")
MEMORY_TEMPERATURE = gauge("lockstep_gpu_memory_temperature_celsius", "HBM temperature.", G, "celsius")
MEMORY_USED = gauge("lockstep_gpu_memory_used_bytes", "Frame buffer memory in use.", G, "bytes")
MEMORY_TOTAL = gauge("lockstep_gpu_memory_total_bytes", "Frame buffer memory visible to the driver.", G, "bytes")
CLOCK_EVENT = gauge(
    "lockstep_gpu_clock_event_active",
    f"1 while the clock-event (throttle) reason is active. reason: {', '.join(CLOCK_EVENT_REASONS)}.",
    ("gpu", "reason"))
ECC_ERRORS = counter("lockstep_gpu_ecc_errors_total",
                     "ECC errors since the driver loaded (volatile). type: corrected, uncorrected.", ("gpu", "type"))
REMAPPED_ROWS = gauge("lockstep_gpu_remapped_rows",
                      "Row remapping state. state: correctable, uncorrectable (rows remapped for that cause), "
                      "pending (1 if a remap awaits a GPU reset), failed (1 if a remap failed).", ("gpu", "state"))
XID_ERRORS = counter("lockstep_gpu_xid_errors_total",
                     "XID errors seen through NVML events; a repeated XID counts again. severity "
                     f"({', '.join(XID_SEVERITIES)}), category ({', '.join(XID_CATEGORIES)}) and action "
                     f"({', '.join(XID_ACTIONS)}) come from NVIDIA's Xid Catalog (exporters/catalog/xid.csv).",
                     ("gpu", "xid", "severity", "category", "action"))
PCIE_REPLAY = counter("lockstep_gpu_pcie_replay_total", "PCIe replay counter.", G)
PCIE_WIDTH = gauge("lockstep_gpu_pcie_link_width", "Current PCIe link width (lanes).", G)
PCIE_WIDTH_MAX = gauge("lockstep_gpu_pcie_link_width_max", "Maximum PCIe link width (lanes).", G)
PCIE_GEN = gauge("lockstep_gpu_pcie_link_generation", "Current PCIe link generation.", G)
PCIE_GEN_MAX = gauge("lockstep_gpu_pcie_link_generation_max", "Maximum PCIe link generation.", G)
NVLINK_ERRORS = counter("lockstep_gpu_nvlink_errors_total",
                        "NVLink error counters per link. type: replay, recovery, crc_flit, crc_data. link: the link "
                        "number, or \"total\" for the sum over all links (the default; per-link series with "
                        "--gpu.nvlink-per-link).",
                        ("gpu", "link", "type"))
JOB_INFO = gauge(
    "lockstep_gpu_job_info",
    "Always 1; the training job currently holding the GPU (a MIG device: its uuid). scheduler: slurm (job_id the "
    "Slurm job id, user its owner) or kubernetes (job_id <namespace>/<name> of the job the pod belongs to, rank "
    "its replica or completion index, and the pod, namespace and container holding the GPU, as dcgm-exporter "
    "names them). A GPU no job holds has no series.",
    ("gpu", "uuid", "job_id", "user", "rank", "pod", "namespace", "container", "scheduler"))

# Added by the GPU collector: fields NVML/DCGM have that the core set lacks, and the
# cluster-validation checks (settings that silently cost throughput or correctness).
MEMORY_UTILIZATION = gauge("lockstep_gpu_memory_utilization_ratio",
                           "Fraction of the sample period device memory was read or written (NVML utilization.memory).",
                           G, "ratio")
SM_OCCUPANCY = gauge("lockstep_gpu_sm_occupancy_ratio",
                     "Resident warps per SM as a fraction of the maximum, averaged over SMs (DCGM or sim).", G, "ratio")
DRAM_ACTIVE = gauge("lockstep_gpu_dram_active_ratio",
                    "Fraction of cycles the device memory interface was sending or receiving (DCGM or sim).", G, "ratio")
NVLINK_BANDWIDTH = gauge("lockstep_gpu_nvlink_bandwidth_bytes_per_second",
                         "NVLink data rate over all links (DCGM profiling). direction: rx, tx.",
                         ("gpu", "direction"), "bytes_per_second")
MEMORY_CLOCK = gauge("lockstep_gpu_memory_clock_hertz", "Current memory clock.", G, "hertz")
MEMORY_CLOCK_MAX = gauge("lockstep_gpu_memory_clock_max_hertz", "Maximum memory clock.", G, "hertz")
PERSISTENCE_MODE = gauge("lockstep_gpu_persistence_mode",
                         "1 if persistence mode is on, 0 if off (off: driver state is torn down between jobs, "
                         "slowing job start and losing settings).", G)
ECC_ENABLED = gauge("lockstep_gpu_ecc_enabled", "1 if ECC is currently enabled on the GPU memory, 0 if disabled.", G)
PCIE_LINK_DEGRADED = gauge(
    "lockstep_gpu_pcie_link_degraded",
    "1 if the PCIe link trained below its maximum width (lanes), else 0. Generation is not compared: GPUs drop the "
    "link generation at idle to save power; compare lockstep_gpu_pcie_link_generation with _max under load.", G)
P2P_STATUS = gauge(
    "lockstep_gpu_p2p_status",
    "NVML peer-to-peer read status from gpu to peer (nvmlGpuP2PStatus_t): 0 ok, 1 chipset_not_supported, "
    "2 gpu_not_supported, 3 topology_not_supported (e.g. ACS left enabled in the BIOS), 4 disabled_by_regkey, "
    "5 not_supported, 6 unknown. Anything but 0 means NCCL falls back to staging through host memory.",
    ("gpu", "peer"))

# Added with the per-GPU verdict: driver-reserved memory, page retirement, MIG instances.
MEMORY_RESERVED = gauge("lockstep_gpu_memory_reserved_bytes",
                        "Frame buffer memory the driver and firmware set aside (not in used_bytes; NVML v2 memory "
                        "info, R510+).", G, "bytes")
RETIRED_PAGES = gauge("lockstep_gpu_retired_pages",
                      "Frame buffer pages retired (dynamic page retirement, GPUs before Ampere). cause: single_bit "
                      "(multiple single-bit ECC errors), double_bit.", ("gpu", "cause"))
RETIRED_PAGES_PENDING = gauge("lockstep_gpu_retired_pages_pending",
                              "1 if a page retirement waits for the next driver reload or reboot, else 0.", G)
MIG_MODE = gauge("lockstep_gpu_mig_mode",
                 "1 if MIG is enabled on the GPU, 0 if disabled; absent on GPUs without MIG. With MIG on, the "
                 "GPU's utilization is not supported and absent; see lockstep_gpu_mig_* per GPU instance.", G)
MIG_INFO = gauge("lockstep_gpu_mig_info",
                 "Always 1; a MIG device (compute instance) of a GPU: its GPU instance, compute instance, "
                 "profile (e.g. 1g.10gb; empty where NVML does not say) and UUID (MIG-...), which schedulers "
                 "hand to jobs.", ("gpu", "gpu_instance", "compute_instance", "profile", "uuid"))
MIG_MEMORY_USED = gauge("lockstep_gpu_mig_memory_used_bytes", "Frame buffer memory in use in a MIG GPU instance.",
                        ("gpu", "gpu_instance", "profile"), "bytes")
MIG_MEMORY_TOTAL = gauge("lockstep_gpu_mig_memory_total_bytes", "Frame buffer memory of a MIG GPU instance.",
                         ("gpu", "gpu_instance", "profile"), "bytes")
# The per-GPU verdict: the agent's checks, and DCGM's health-watch systems as dcgm_<system>.
HEALTH = gauge(
    "lockstep_gpu_health",
    f"Verdict of one check of the GPU: {HEALTH_OK} ok, {HEALTH_WARNING} warning, {HEALTH_FAILED} failed; absent where "
    "the GPU does not report what the check needs. check: bus (2: lost, fell off the bus), xid (worst XID severity "
    "within --gpu.xid-window), ecc_uncorrectable (2: volatile uncorrectable errors, reset needed), row_remap "
    "(1 pending, 2 failed), retired_pages (1 at 15 or pending, 2 at 63), pcie (1: below max width or over 8 "
    "replays a minute), nvlink (1: errors growing, 2: a link went down), thermal (1: thermal slowdown), driver "
    "(1: persistence mode off), pcie_link (1: link generation or width below its maximum while the GPU is over 50 % "
    "busy; held while idle), clocks (1: a clock-event reason without thermal or power cause, hw_slowdown or "
    "applications_clocks_setting, held 5 minutes), nvlink_links (1: fewer NVLinks active than the GPU has; "
    f"--gpu.nvlink-per-link only), and dcgm_<system> (DCGM health watches: {', '.join(DCGM_HEALTH_SYSTEMS)}).",
    ("gpu", "check"))
HEALTHY = gauge("lockstep_gpu_healthy", "0 if any lockstep_gpu_health check of the GPU failed (2), else 1.", G)
GPUS_EXPECTED = gauge("lockstep_node_gpus_expected",
                      "GPUs the node should have: --gpu.expected-count, or its Slurm GRES (--gpu.expected-count=slurm).")
GPUS_VISIBLE = gauge("lockstep_node_gpus_visible",
                     "GPUs NVML enumerates on the node; 0 while the driver or NVML is unavailable.")

METRICS = (INFO, UP, UTILIZATION, SM_ACTIVE, TENSOR_ACTIVE, SM_CLOCK, SM_CLOCK_MAX, POWER, POWER_LIMIT,
           ENERGY, TEMPERATURE, MEMORY_TEMPERATURE, MEMORY_USED, MEMORY_TOTAL, CLOCK_EVENT, ECC_ERRORS,
           REMAPPED_ROWS, XID_ERRORS, PCIE_REPLAY, PCIE_WIDTH, PCIE_WIDTH_MAX, PCIE_GEN, PCIE_GEN_MAX,
           NVLINK_ERRORS, JOB_INFO, MEMORY_UTILIZATION, SM_OCCUPANCY, DRAM_ACTIVE, NVLINK_BANDWIDTH, MEMORY_CLOCK,
           MEMORY_CLOCK_MAX, PERSISTENCE_MODE, ECC_ENABLED, PCIE_LINK_DEGRADED, P2P_STATUS, MEMORY_RESERVED,
           RETIRED_PAGES, RETIRED_PAGES_PENDING, MIG_MODE, MIG_INFO, MIG_MEMORY_USED, MIG_MEMORY_TOTAL, HEALTH,
           HEALTHY, GPUS_EXPECTED, GPUS_VISIBLE)
