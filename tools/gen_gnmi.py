"""Generate the Python gRPC code of the gNMI service (``make proto``).

Input: ``exporters/third_party/gnmi/gnmi.proto`` and ``gnmi_ext.proto``, openconfig/gnmi's
``proto/gnmi/gnmi.proto`` and ``proto/gnmi_ext/gnmi_ext.proto`` copied byte for byte (source and commit
in ``exporters/third_party/gnmi/README.md``). Output, checked in next to them: ``gnmi_pb2.py``,
``gnmi_pb2_grpc.py`` and ``gnmi_ext_pb2.py``.

gnmi.proto imports its extension file by its Go import path
(``github.com/openconfig/gnmi/proto/gnmi_ext/gnmi_ext.proto``), which protoc would turn into a Python
package ``github.com...`` that cannot be imported. ``local_import`` points that one import at the copy
beside it before protoc runs; the messages, their package (``gnmi``, ``gnmi_ext``) and so the wire format
are unchanged; the generated imports name the package as the wheel installs it. The protoc and plugin
are those of the grpcio-tools release ``tools/gen_podresources.py`` pins (one pin for both keeps
pyproject.toml's protobuf and grpcio ranges honest).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_podresources import installed_names, pinned_tools, stamp  # noqa: E402  (the one pinned release, beside this file)

REPO = Path(__file__).resolve().parents[1]
PACKAGE_PATH = ("exporters", "third_party", "gnmi")
PACKAGE = REPO.joinpath(*PACKAGE_PATH)
SOURCES = ("gnmi_ext.proto", "gnmi.proto")
OUTPUTS = {"gnmi_ext.proto": ("gnmi_ext_pb2.py",), "gnmi.proto": ("gnmi_pb2.py", "gnmi_pb2_grpc.py")}
UPSTREAM_EXT_IMPORT = 'import "github.com/openconfig/gnmi/proto/gnmi_ext/gnmi_ext.proto";'


def local_import(text: str) -> str:
    """gnmi.proto with its gnmi_ext import pointing at the copy in this package."""
    if UPSTREAM_EXT_IMPORT not in text:
        raise ValueError(f"gnmi.proto no longer has the line {UPSTREAM_EXT_IMPORT!r}: check the upstream file")
    return text.replace(UPSTREAM_EXT_IMPORT, f'import "{"/".join(PACKAGE_PATH)}/gnmi_ext.proto";')


def generate(out: Path) -> None:
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        package = root.joinpath(*PACKAGE_PATH)
        package.mkdir(parents=True)
        for name in SOURCES:
            text = (PACKAGE / name).read_text()
            (package / name).write_text(local_import(text) if name == "gnmi.proto" else text)
        protoc = [sys.executable, "-m", "grpc_tools.protoc", f"-I{root}"]
        protoc_version = subprocess.run([*protoc, "--version"], check=True, capture_output=True, text=True).stdout
        for name in SOURCES:
            subprocess.run([*protoc, f"--python_out={root}", f"--grpc_python_out={root}",
                            "/".join(PACKAGE_PATH + (name,))], check=True, cwd=root)
            for output in OUTPUTS[name]:
                text = installed_names((package / output).read_text(), PACKAGE_PATH)
                (out / output).write_text(stamp("gen_gnmi.py", "/".join(PACKAGE_PATH + (name,)), (PACKAGE / name).read_bytes(),
                                                protoc_version.strip()) + text)


def main() -> int:
    if not pinned_tools():
        return 2
    generate(PACKAGE)
    print(f"wrote {', '.join(o for outs in OUTPUTS.values() for o in outs)} in {PACKAGE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
