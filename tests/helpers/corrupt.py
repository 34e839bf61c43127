"""Corrupted text for the parsers' property tests (hypothesis strategies): real lines cut and spliced, odd
digits, blanks, huge numbers."""
from __future__ import annotations

from hypothesis import strategies as st

# Text a corrupted file could hold: real lines cut and spliced, odd digits, blanks, huge numbers.
TOKENS = st.sampled_from(["0", "12", "²", "\u0663", "9" * 30, "9" * 5000, "-1", "nan", ":", "samples", "[bytes]",
                          "device", "mounted on", "with fstype", "nfs4", "bytes:", "per-op statistics", "\t",
                          "NIC statistics:", "driver:", "=", "llite.fs-ffff.stats=", "\x00", "é"])
NOISE = st.lists(st.one_of(TOKENS, st.text(max_size=12)), max_size=40).map(" ".join)


def spliced(path) -> st.SearchStrategy[str]:
    """A real file with lines dropped, duplicated, swapped for noise or cut short."""
    lines = path.read_text().splitlines()

    def edit(choices: list[tuple[int, int, str]]) -> str:
        out = list(lines)
        for where, how, noise in choices:
            i = where % len(out) if out else 0
            if not out:
                out.append(noise)
            elif how == 0:
                out[i] = noise
            elif how == 1:
                out[i] = out[i][: len(out[i]) // 2]
            elif how == 2:
                out.insert(i, out[i])
            else:
                del out[i]
        return "\n".join(out) + "\n"

    return st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 3), NOISE), max_size=6).map(edit)
