"""JSON from an untrusted peer (a BMC, an Alertmanager webhook) with one error type for every way it
can be bad: ``json.loads`` raises JSONDecodeError, UnicodeDecodeError, ValueError (an integer past
``int()``'s digit limit) and RecursionError (nesting past the interpreter's stack)."""
from __future__ import annotations

import json
from typing import Any


def load_json(body: bytes | str) -> Any:
    """The decoded document; ValueError with a short message for anything that is not JSON."""
    try:
        return json.loads(body)
    except RecursionError:
        raise ValueError("nested too deeply") from None
