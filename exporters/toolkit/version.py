"""The installed version of lockstep."""
from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("lockstep-telemetry")
except PackageNotFoundError:  # running from a source tree that is not installed
    VERSION = "0.0.0+source"
