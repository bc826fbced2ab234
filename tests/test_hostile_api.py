"""The Python API given what users give it by mistake: one UsageError line (what, why, what to do),
never a raw TypeError/ValueError from deep inside, and nothing wrong accepted."""
from __future__ import annotations

import pytest
import torch

import perfcore
from perfcore.errors import UsageError


@pytest.mark.parametrize("warmup", [float("nan"), float("inf"), "5", None, 1.5, True, -1])
def test_steptimer_warmup_must_be_a_whole_number_of_steps(warmup):
    with pytest.raises(UsageError, match="warmup") as e:
        perfcore.StepTimer(device="cpu", warmup=warmup)
    assert "\n" not in str(e.value)


def test_steptimer_takes_a_plain_int_warmup():
    assert perfcore.StepTimer(device="cpu", warmup=0).warmup == 0


@pytest.mark.parametrize("device", ["quantum", "cuda:x", 3, ""])
def test_workload_device_is_checked_when_made(device):
    with pytest.raises(UsageError, match="is not a device"):
        perfcore.Workload(dataset=[], model=torch.nn.Linear(1, 1), loss_fn=lambda *a: 0, device=device)


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:1", torch.device("cpu")])
def test_workload_takes_the_devices_torch_names(device):
    assert perfcore.Workload(dataset=[], model=None, loss_fn=None, device=device).device == device


@pytest.mark.parametrize("doc, field", [({"steps": "x"}, "steps"), ({"step_time_ms": {"mean": "fast"}}, "step_time_ms.mean"),
                                        ({"breakdown_fraction": {"load": float("nan")}}, "breakdown_fraction.load"),
                                        ({"warmup_steps": [1]}, "warmup_steps")])
def test_summary_names_the_field_that_is_not_a_number(doc, field):
    with pytest.raises(UsageError, match=f"perfcore.summary: {field} is"):
        perfcore.summary(doc)
