"""Byte-level mutations for the fuzz tests, as hypothesis strategies.

A :class:`Mutation` is one of: a truncation (keep the first ``n`` bytes, fewer than all), a
few flipped bits, a zero-length file, or wrong magic (the first or the last four bytes, where
ORC, Parquet and JSON keep what identifies them, replaced by other bytes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

#: Examples a fuzz test runs (CI: this default; ``ACID_FUZZ_EXAMPLES=300`` for a longer run).
EXAMPLES = int(os.environ.get("ACID_FUZZ_EXAMPLES", "60"))
#: The fuzz tests' hypothesis profile: a fixed budget, derandomized so that CI runs the same
#: examples every time (``ACID_FUZZ_RANDOM=1`` draws new ones), no deadline (an example
#: compacts a table). Applied to the fuzz tests only, never loaded as everyone's default.
PROFILE = "acid-fuzz"
settings.register_profile(
    PROFILE,
    max_examples=EXAMPLES,
    derandomize=os.environ.get("ACID_FUZZ_RANDOM") != "1",
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
#: Decorator for the fuzz tests' ``@given`` functions.
fuzz_settings = settings(settings.get_profile(PROFILE))
#: No fuzz test may take longer than this per 20 examples: a hang dumps the stacks and ends.
HANG_SECONDS = 120

KINDS = ("truncate", "flip", "zero", "magic")


@dataclass(frozen=True)
class Mutation:
    kind: str
    #: truncate: bytes kept; flip: (offset, bit) pairs; magic: (at_end, replacement)
    detail: object = None

    def apply(self, data: bytes) -> bytes:
        if self.kind == "zero":
            return b""
        if self.kind == "truncate":
            assert isinstance(self.detail, int)
            return data[: self.detail]
        if self.kind == "flip":
            out = bytearray(data)
            for offset, bit in self.detail:  # type: ignore[union-attr]
                out[offset] ^= 1 << bit
            return bytes(out)
        at_end, replacement = self.detail  # type: ignore[misc]
        width = min(4, len(data))
        if at_end:
            return data[: len(data) - width] + replacement[:width]
        return replacement[:width] + data[width:]

    def __str__(self) -> str:
        return f"{self.kind}({self.detail})" if self.detail is not None else self.kind


def mutations(data: bytes) -> st.SearchStrategy[Mutation]:
    """Every kind of mutation of ``data`` (non-empty); each one changes it."""
    size = len(data)
    truncate = st.integers(0, size - 1).map(lambda n: Mutation("truncate", n))
    flip = st.lists(
        st.tuples(st.integers(0, size - 1), st.integers(0, 7)),
        min_size=1,
        max_size=4,
        unique_by=lambda pair: pair[0],
    ).map(lambda pairs: Mutation("flip", tuple(pairs)))
    zero = st.just(Mutation("zero"))
    magic = st.tuples(st.booleans(), st.binary(min_size=4, max_size=4)).map(
        lambda pair: Mutation("magic", pair)
    )
    return st.one_of(truncate, flip, zero, magic).filter(lambda m: m.apply(data) != data)


def mutate_file(path: Path, mutation: Mutation) -> bytes:
    """Apply ``mutation`` to the file at ``path`` in place; returns the original bytes."""
    original = path.read_bytes()
    path.write_bytes(mutation.apply(original))
    return original
