"""Numbers as people write them: a guess as it was typed, a measurement to 3 significant digits, a count of
bytes in the binary unit it fits (6.25 KiB), and never an exponent where nobody would write one (2000, not 2e+03;
3,000 GB/s, not 3e+03). Below the rest of the course: it imports nothing of it."""
from __future__ import annotations

import math


def typed(v) -> str:
    """A guess as the student typed it: 2000, not 2e+03; 0.25, not 2.5e-01."""
    v = float(v)
    text = f"{v:.12g}"
    if "e" in text and 1e-6 <= abs(v) < 1e16:
        text = f"{v:.12f}".rstrip("0").rstrip(".")
    return text


def readable(v) -> str:
    """A revealed number to 3 significant digits, without an exponent where people write none:
    717, 0.716, 2,150,000,000."""
    v = float(v)
    if not math.isfinite(v) or v == 0:
        return f"{v:g}"
    if not 1e-4 <= abs(v) < 1e16:
        return f"{v:.3g}"
    rounded = float(f"{v:.3g}")
    if abs(rounded) >= 1000:
        return f"{rounded:,.0f}"
    return typed(rounded)


def byte_size(n: float) -> str:
    """A count of bytes in B, KiB, MiB or GiB: 512 B, 6.25 KiB, 16.0 KiB, 1.5 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            if unit == "B":
                return f"{n:.0f} {unit}"
            # 6.25 KiB as "6.25", not "6.2": two halves of 12.5 KiB should add up on the page
            two = abs(n) < 10 and abs(n - round(n, 1)) > 1e-9
            return f"{n:.2f} {unit}" if two else f"{n:.1f} {unit}"
        n /= 1024
