"""`--seeds` syntax shared by `bench run` and `bench report`: N, A-B or a comma list."""
from __future__ import annotations

from bench.core.errors import BenchError

MAX_SEED = 1000  # more seeds than any calibration study needs; catches typos like 1000000


def parse_seeds(text) -> list[int]:
    """'5' -> 0..4, '2-4' -> 2,3,4, '0,3' -> 0,3; every seed in 0..MAX_SEED-1."""
    text = str(text).strip()
    try:
        if "," in text:
            seeds = [int(s) for s in text.split(",") if s.strip()]
        elif "-" in text.lstrip("-"):
            lo, hi = text.split("-", 1)
            if int(lo) > int(hi):
                raise BenchError(f"--seeds {text}: the range starts above its end ({lo} > {hi}); "
                                 f"write {hi.strip()}-{lo.strip()}")
            seeds = list(range(int(lo), min(int(hi), MAX_SEED) + 1))
        else:
            n = int(text)
            if n < 1:
                raise BenchError(f"--seeds {text}: need at least one seed (e.g. --seeds 5 or 0-4)")
            seeds = list(range(min(n, MAX_SEED + 1)))
    except ValueError:
        raise BenchError(f"--seeds {text}: expected N, A-B or a comma list of ints") from None
    if not seeds or min(seeds) < 0:
        raise BenchError(f"--seeds {text}: seeds must be non-negative and at least one")
    if max(seeds) >= MAX_SEED:
        raise BenchError(f"--seeds {text}: seeds must be below {MAX_SEED} (N at most {MAX_SEED})")
    return list(dict.fromkeys(seeds))


def format_seeds(seeds) -> str:
    """[0, 1, 2, 5] -> '0-2,5' (sorted; contiguous runs as ranges)."""
    out, seeds = [], sorted(set(seeds))
    for s in seeds:
        if out and s == out[-1][1] + 1:
            out[-1][1] = s
        else:
            out.append([s, s])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in out)
