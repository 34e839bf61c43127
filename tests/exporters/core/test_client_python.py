"""The adapter that embeds a lockstep collector in any prometheus_client registry."""
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from lockstep.exporters.catalog import fabric, gpu
from lockstep.exporters.client_python import ClientPythonCollector
from lockstep.exporters.toolkit.sample import Sample


class _Collector:
    def __init__(self):
        self.temperature = 40.0

    def collect(self):
        self.temperature += 1
        yield Sample(gpu.TEMPERATURE, ("0",), self.temperature)
        yield Sample(fabric.IB_TRANSMIT_BYTES, ("mlx5_0", "1"), 4096.0)
        yield Sample(fabric.IB_TRANSMIT_BYTES, ("mlx5_1", "1"), 8192.0)


def test_registry_exposes_fresh_samples_with_types_and_labels():
    registry = CollectorRegistry()
    registry.register(ClientPythonCollector(_Collector()))
    generate_latest(registry)  # each scrape collects afresh
    families = {f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())}
    temp = families["lockstep_gpu_temperature_celsius"]
    assert temp.type == "gauge" and [(s.labels, s.value) for s in temp.samples] == [({"gpu": "0"}, 42.0)]
    tx = families["lockstep_ib_port_transmit_bytes"]
    assert tx.type == "counter"
    assert {(s.name, s.labels["device"], s.value) for s in tx.samples} == {
        ("lockstep_ib_port_transmit_bytes_total", "mlx5_0", 4096.0),
        ("lockstep_ib_port_transmit_bytes_total", "mlx5_1", 8192.0)}
