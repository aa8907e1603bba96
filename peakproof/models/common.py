"""What the model ports share: the seeds' generators and JavaScript's number formatting.

The seeds print with ``Number.prototype.toFixed`` and round with ``Math.round``; both
round halves up on the exact binary value, where Python's ``format`` and ``round`` round
halves to even. A port that is exact "to the printed digit" has to print the JS way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Iterator

LCG_A, LCG_C, LCG_M = 1103515245, 12345, 2**32
MINSTD_A, MINSTD_M = 48271, 2**31 - 1


def lcg32(seed: int) -> Iterator[float]:
    """The seeds' 32-bit LCG: ``s = (s * 1103515245 + 12345) mod 2^32``, value ``s / 2^32``."""
    s = seed % LCG_M
    while True:
        s = (s * LCG_A + LCG_C) % LCG_M
        yield s / LCG_M


def lcg32_stream(seed: int, n: int) -> list[float]:
    """The first ``n`` values of :func:`lcg32` as a list (models that replay one stream)."""
    out = [0.0] * n
    s = seed % LCG_M
    for i in range(n):
        s = (s * LCG_A + LCG_C) & 0xFFFFFFFF
        out[i] = s / 4294967296
    return out


class LazyStream:
    """Values of :func:`lcg32` by index, computed in chunks as far as they are read."""

    def __init__(self, seed: int, chunk: int = 1 << 18) -> None:
        self._s = seed % LCG_M
        self._chunk = chunk
        self.values: list[float] = []

    def ensure(self, n: int) -> list[float]:
        while len(self.values) < n:
            s, out = self._s, []
            for _ in range(self._chunk):
                s = (s * LCG_A + LCG_C) & 0xFFFFFFFF
                out.append(s / 4294967296)
            self._s = s
            self.values.extend(out)
        return self.values


def minstd_uniforms(seed: int, n: int) -> Any:
    """``n`` draws of MINSTD (``s = s * 48271 mod 2^31-1``, value ``s / (2^31-1)``), vectorised.

    Jump-ahead: s[j*B + k] = s[j*B] * 48271^k mod M, so a block of multipliers times a
    column of block starts gives every state; int64 products stay below 2^62.
    """
    import numpy as np

    block = 1024
    mult = np.empty(block, dtype=np.int64)
    m = 1
    for k in range(block):
        m = m * MINSTD_A % MINSTD_M
        mult[k] = m  # 48271^(k+1)
    starts = np.empty((n + block - 1) // block, dtype=np.int64)
    s = seed % MINSTD_M
    step = int(mult[-1])
    for j in range(len(starts)):
        starts[j] = s
        s = s * step % MINSTD_M
    states = (starts[:, None] * mult[None, :]) % MINSTD_M
    return states.reshape(-1)[:n] / MINSTD_M


def js_fixed(x: float, digits: int) -> str:
    """``x.toFixed(digits)`` as JavaScript prints it (halves up on the exact binary value)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    q = Decimal(1).scaleb(-digits)
    d = Decimal(x).quantize(q, rounding=ROUND_HALF_UP)
    text = f"{d:f}"
    return "0" + text[2:] if text.startswith("-0") and d == 0 else text


def js_round(x: float) -> int:
    """``Math.round``: the nearest integer, halves towards +infinity."""
    return math.floor(x + 0.5) if abs(x) < 2**52 else int(x)


def grouped(text: str) -> str:
    """Thousands separators on the integer part of a printed number: 1234567.891 -> 1,234,567.891."""
    sign = "-" if text.startswith("-") else ""
    body = text.lstrip("-")
    whole, dot, frac = body.partition(".")
    return sign + f"{int(whole):,}" + dot + frac


def fx(x: float, digits: int) -> str:
    """A figure for English tables: JS rounding, thousands grouped."""
    return grouped(js_fixed(x, digits))


def table(headers: list[str], rows: list[list[str]], first_left: bool = True) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 and first_left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


@dataclass
class Params:
    """Base of each model's assumptions: every field has the seed's value as default."""

    def describe(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def param_field(default: Any, help: str) -> Any:
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help})
    return field(default=default, metadata={"help": help})
