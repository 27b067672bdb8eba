"""bench.core loads without torch: every module of it imports in a fresh
process with torch still unloaded, and statefile.damage (the dry run's look
at a resume state) judges a file by its header without loading torch either.
Where torch is needed (writing or reading a state's tensors), it is imported
inside the function."""
import json
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "bench" / "core"
PROBE = """
import importlib, json, sys
loaded = {{}}
for name in {names}:
    importlib.import_module(name)
    loaded[name] = "torch" in sys.modules
from bench.core import statefile
why = statefile.damage(sys.argv[1])
print(json.dumps({{"loaded": loaded, "why": why, "torch": "torch" in sys.modules}}))
"""


def test_every_core_module_and_a_state_header_check_load_no_torch(tmp_path):
    names = sorted(f"bench.core.{p.stem}" for p in CORE.glob("*.py") if p.stem != "__init__")
    assert "bench.core.statefile" in names and len(names) > 20
    state = tmp_path / "state.safetensors"
    state.write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{}   ")  # a header, no state format
    out = subprocess.run([sys.executable, "-c", PROBE.format(names=names), str(state)],
                         capture_output=True, text=True, check=True).stdout
    found = json.loads(out)
    assert [n for n, torch in found["loaded"].items() if torch] == []
    assert found["why"] == "not a state of this version" and not found["torch"]


def test_a_state_still_round_trips_its_tensors():
    import torch

    from bench.core import statefile

    state = {"w": torch.arange(6, dtype=torch.float16).reshape(2, 3), "step": 7}
    back = statefile.loads(bytes(statefile.dumps(state)))
    assert back["step"] == 7 and back["w"].dtype == torch.float16
    assert torch.equal(back["w"], state["w"])
