"""The wheel installs one import namespace, ``lockstep``: the repository's top-level folders are its
subpackages (``analytics/`` → ``lockstep.analytics``), so nothing it installs can collide with another
distribution's top-level names (``analytics`` is also Segment's ``analytics-python``)."""
from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).parent
SUBPACKAGES = ("exporters", "analytics", "alerts", "dashboards", "simulator", "validation")


def packages_under(folder: str, name: str) -> dict[str, str]:
    """Every package below ``folder`` (a folder with Python files or data), named under ``name``."""
    found = {}
    for path in sorted([ROOT / folder, *(p for p in (ROOT / folder).rglob("*") if p.is_dir())]):
        if "__pycache__" in path.parts or not any(f.is_file() for f in path.iterdir()):
            continue
        rel = path.relative_to(ROOT / folder)
        found[".".join((name, *rel.parts))] = path.relative_to(ROOT).as_posix()
    return found


package_dir = packages_under("lockstep", "lockstep")
for sub in SUBPACKAGES:
    package_dir.update(packages_under(sub, f"lockstep.{sub}"))

setup(packages=sorted(package_dir), package_dir=package_dir)
