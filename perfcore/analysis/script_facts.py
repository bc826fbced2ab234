"""What the script already does, as facts advice is checked against: whether its training loader decodes
images, whether torch.compile compiled its model, and whether torch's threads outnumber the cores left
to them (OpenMP threads spin waiting for each other when cores are oversubscribed: a step then takes
many times as long). Pure functions on typed facts; no words."""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import TYPE_CHECKING

from perfcore.analysis.interference import MATERIAL_OTHERS_CORES

if TYPE_CHECKING:  # results imports this module for Oversubscription: only the annotations need these
    from perfcore.analysis.run_context import Loader, Threads

__all__ = [
    "Decode",
    "decode_of",
    "Oversubscription",
    "oversubscription",
    "threads_of",
]


class Decode(str, enum.Enum):
    """How the training loader's items are made: decoded from image files with PIL, decoded with a fast
    decoder already (torchvision.io.decode_jpeg), taken from arrays in memory (no decoding), or unknown."""

    PIL = "pil"
    FAST = "fast"
    NONE = "none"
    UNKNOWN = "unknown"


# Datasets that open an image file per item (torchvision's, by their loader: PIL by default).
_FILE_IMAGES = {
    "ImageFolder",
    "DatasetFolder",
    "ImageNet",
    "CocoDetection",
    "CocoCaptions",
    "VOCDetection",
    "VOCSegmentation",
    "Places365",
    "Flowers102",
    "Food101",
    "StanfordCars",
    "OxfordIIITPet",
    "CelebA",
    "Caltech101",
    "Caltech256",
    "DTD",
    "FGVCAircraft",
    "Country211",
    "SUN397",
    "LFWPeople",
    "INaturalist",
}
# Datasets that hold their items as arrays in memory: nothing is decoded per item.
_IN_MEMORY = {
    "TensorDataset",
    "MNIST",
    "FashionMNIST",
    "KMNIST",
    "EMNIST",
    "QMNIST",
    "CIFAR10",
    "CIFAR100",
    "SVHN",
    "STL10",
    "USPS",
    "FakeData",
    "list",
    "tuple",
    "ndarray",
    "Tensor",
    "range",
}


def decode_of(ld: Loader | None) -> Decode:
    """How the loader's items are made, from its recorded decoder (a built-in workload says which) or its
    dataset's class (a Subset or a wrapper says nothing of what it wraps: unknown)."""
    if ld is None:
        return Decode.UNKNOWN
    if ld.decoder == "pil":
        return Decode.PIL
    if ld.decoder == "torchvision":
        return Decode.FAST
    name = (ld.dataset or "").rsplit(".", 1)[-1]
    if name in _FILE_IMAGES:
        return Decode.PIL
    if name in _IN_MEMORY:
        return Decode.NONE
    return Decode.UNKNOWN


# Other processes take a core from torch's threads when they are material (half a core, the interference
# finding's own bar): less is the sampler, a shell, measurement noise.
FREE_SLACK_CORES = MATERIAL_OTHERS_CORES


@dataclasses.dataclass(frozen=True)
class Oversubscription:
    """torch's intra-op threads against the cores left to them: `threads` on `free_cores` (the CPUs this
    process may use less what other processes used), and the thread count that fits (`fits`). `own`: the
    script's threads outnumber the CPUs it may use, whoever else runs: the script's to fix; otherwise
    other processes' load at the time took the cores, which a setting in the script does not answer
    (one thread fewer is slower on the same machine when it is quiet)."""

    threads: int
    cpus: int
    others_cores: float
    free_cores: float
    fits: int
    source: str  # "torch" (torch.get_num_threads()) or "OMP_NUM_THREADS"
    own: bool = True


def threads_of(
    threads: Threads, torch_threads: int | None, cpu_count: int | None
) -> tuple[int | None, str, int | None]:
    """(threads, where the count came from, CPUs) from an in-process workload's own count (torch_threads,
    cpu_count) or the run's recorded threads (a script under perfcore run)."""
    cpus = threads.cpus or cpu_count
    n = torch_threads or threads.torch
    if n:
        return n, "torch", cpus
    omp = (threads.omp_env or "").strip()
    if omp.isdigit() and int(omp) > 0:
        return int(omp), "OMP_NUM_THREADS", cpus
    return None, "torch", cpus


def oversubscription(
    threads: int | None, cpus: int | None, others_cores: float | None, *, source: str = "torch"
) -> Oversubscription | None:
    """The finding when the threads outnumber the free cores (by more than a core's measurement noise),
    else None. Without a thread count or a CPU count nothing is said."""
    if not threads or not cpus or threads < 2:
        return None
    others = max(float(others_cores or 0.0), 0.0)
    free = max(float(cpus) - others, 0.0)
    if threads <= free + FREE_SLACK_CORES:
        return None
    own = threads > cpus
    # The script's own excess is fixed by its own CPU count; what others' load leaves is a moment's figure.
    fits = int(cpus) if own else max(int(math.floor(free + FREE_SLACK_CORES)), 1)
    if fits >= threads:
        return None
    return Oversubscription(int(threads), int(cpus), others, free, fits, source, own)
