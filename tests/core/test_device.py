"""bench.core.device: the one default, --device check and device name."""
import platform

import pytest
import torch

from bench.core import device as D
from bench.core.errors import BenchError
from bench.core.provenance import device_info


def test_default_follows_cuda_availability(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert D.default_device() == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert D.default_device() == "cuda"


def test_bad_devices_are_one_line_errors(monkeypatch):
    with pytest.raises(BenchError, match="unknown device 'tpu'; choose from: cpu, cuda"):
        D.check_device("tpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(BenchError, match="no CUDA device is visible"):
        D.check_device("cuda")
    D.check_device("cpu")  # always fine


def test_names(monkeypatch):
    threads = torch.get_num_threads()
    assert D.device_name("cpu") == \
        f"cpu ({platform.processor() or platform.machine()}, {threads} threads)"
    seen = []
    monkeypatch.setattr(torch.cuda, "get_device_name",
                        lambda d: seen.append(d) or "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert D.device_name("cuda:1") == "NVIDIA H100 80GB HBM3"
    assert seen == [torch.device("cuda:1")]
    assert device_info("cuda:1")["gpu"] == "NVIDIA H100 80GB HBM3"  # records use the same name
    assert "gpu" not in device_info("cpu")
