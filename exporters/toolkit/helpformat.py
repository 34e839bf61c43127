"""``--help`` that shows a flag's default only where it has one."""
from __future__ import annotations

import argparse


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """A None default means "derived" (from another flag, the host or the registry) and a False one
    "off unless given": the help text says which, and "(default: None)" would contradict it. A
    switch's default is its absence: "--no-background ... (default: True)" reads as the opposite."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        switch = isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction))
        if switch or action.default in (None, False) or action.default == []:
            return action.help
        return super()._get_help_string(action)
