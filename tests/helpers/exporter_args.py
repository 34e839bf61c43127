"""The node agent's config built the way ``lockstep exporter`` builds it, from command-line flags."""
from __future__ import annotations

import argparse

from lockstep.exporters import cli
from lockstep.exporters.config import ExporterConfig


def exporter_config(*argv: str) -> ExporterConfig:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers(), list(argv))
    return cli.config_from_args(parser.parse_args(["exporter", *argv]))
