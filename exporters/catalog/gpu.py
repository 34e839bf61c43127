"""GPU metrics (NVML, DCGM, or the simulator's NVML-shaped state). Per-GPU series carry ``gpu``
(the index); the UUID, model and bus id live on ``lockstep_gpu_info`` only, to keep cardinality low."""
from exporters.catalog.model import counter, gauge

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
    "1 while the clock-event (throttle) reason is active. reason: gpu_idle, applications_clocks_setting, "
    "sw_power_cap, hw_slowdown, sync_boost, sw_thermal_slowdown, hw_thermal_slowdown, hw_power_brake_slowdown, "
    "display_clock_setting.", ("gpu", "reason"))
ECC_ERRORS = counter("lockstep_gpu_ecc_errors_total",
                     "ECC errors since the driver loaded (volatile). type: corrected, uncorrected.", ("gpu", "type"))
REMAPPED_ROWS = gauge("lockstep_gpu_remapped_rows",
                      "Row remapping state. state: correctable, uncorrectable (rows remapped for that cause), "
                      "pending (1 if a remap awaits a GPU reset), failed (1 if a remap failed).", ("gpu", "state"))
XID_ERRORS = counter("lockstep_gpu_xid_errors_total",
                     "XID errors seen through NVML events; a repeated XID counts again.", ("gpu", "xid"))
PCIE_REPLAY = counter("lockstep_gpu_pcie_replay_total", "PCIe replay counter.", G)
PCIE_WIDTH = gauge("lockstep_gpu_pcie_link_width", "Current PCIe link width (lanes).", G)
PCIE_WIDTH_MAX = gauge("lockstep_gpu_pcie_link_width_max", "Maximum PCIe link width (lanes).", G)
PCIE_GEN = gauge("lockstep_gpu_pcie_link_generation", "Current PCIe link generation.", G)
PCIE_GEN_MAX = gauge("lockstep_gpu_pcie_link_generation_max", "Maximum PCIe link generation.", G)
NVLINK_ERRORS = counter("lockstep_gpu_nvlink_errors_total",
                        "NVLink error counters per link. type: replay, recovery, crc_flit, crc_data.",
                        ("gpu", "link", "type"))
JOB_INFO = gauge("lockstep_gpu_job_info", "Always 1; the Slurm job currently holding the GPU.",
                 ("gpu", "uuid", "job_id", "user"))

METRICS = (INFO, UP, UTILIZATION, SM_ACTIVE, TENSOR_ACTIVE, SM_CLOCK, SM_CLOCK_MAX, POWER, POWER_LIMIT,
           ENERGY, TEMPERATURE, MEMORY_TEMPERATURE, MEMORY_USED, MEMORY_TOTAL, CLOCK_EVENT, ECC_ERRORS,
           REMAPPED_ROWS, XID_ERRORS, PCIE_REPLAY, PCIE_WIDTH, PCIE_WIDTH_MAX, PCIE_GEN, PCIE_GEN_MAX,
           NVLINK_ERRORS, JOB_INFO)
