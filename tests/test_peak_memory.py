"""Per-step peak memory without wiping the user's own peak statistics (a fake allocator with
torch.cuda.memory's functions: memory_stats, reset_peak_memory_stats, and max_memory_allocated
reading memory_stats through the module, as torch's does)."""
from __future__ import annotations

import types

from perfcore.capture.peak_memory import PeakMemory


def fake_cuda():
    alloc = {"cur": 0, "peak": 0}
    mem = types.SimpleNamespace()
    mem.memory_stats = lambda device=None: {"allocated_bytes.all.peak": alloc["peak"],
                                            "allocated_bytes.all.current": alloc["cur"]}

    def reset_peak_memory_stats(device=None):
        alloc["peak"] = alloc["cur"]

    mem.reset_peak_memory_stats = reset_peak_memory_stats
    mem.max_memory_allocated = lambda device=None: mem.memory_stats(device=device).get("allocated_bytes.all.peak", 0)
    cuda = types.SimpleNamespace(memory_stats=mem.memory_stats, reset_peak_memory_stats=reset_peak_memory_stats,
                                 current_device=lambda: 0, memory=mem)

    def use(nbytes):  # allocate nbytes at once, then free them
        alloc["cur"] += nbytes
        alloc["peak"] = max(alloc["peak"], alloc["cur"])
        alloc["cur"] -= nbytes

    return cuda, mem, use


def test_per_step_peaks_and_the_users_peak_both_hold():
    cuda, mem, use = fake_cuda()
    pm = PeakMemory(cuda=cuda, cuda_memory=mem).install()
    use(500)
    assert pm.step_peak() == 500
    use(200)
    assert pm.step_peak() == 200  # this step's own peak, not the run's
    # The user's script never reset: it still sees the run's peak, through every entry point.
    assert mem.max_memory_allocated() == 500
    assert cuda.memory_stats()["allocated_bytes.all.peak"] == 500
    use(900)
    assert mem.max_memory_allocated() == 900


def test_users_reset_starts_their_peak_afresh():
    cuda, mem, use = fake_cuda()
    pm = PeakMemory(cuda=cuda, cuda_memory=mem).install()
    use(800)
    pm.step_peak()
    cuda.reset_peak_memory_stats()
    use(100)
    assert mem.max_memory_allocated() == 100
    assert pm.step_peak() == 100


def test_uninstall_restores_torchs_functions():
    cuda, mem, use = fake_cuda()
    orig = mem.memory_stats
    pm = PeakMemory(cuda=cuda, cuda_memory=mem).install()
    assert mem.memory_stats is not orig
    pm.uninstall()
    assert mem.memory_stats is orig and cuda.memory_stats is orig
