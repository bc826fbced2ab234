"""perfcore's exception tree. The CLI turns each into one line and an exit code."""

from __future__ import annotations

__all__ = [
    "PerfcoreError",
    "UsageError",
    "DeviceUnavailable",
    "CudaError",
    "CuptiError",
    "CuptiUnavailable",
    "NativeUnavailable",
    "RunFailed",
    "BadResultFile",
    "ResultWriteError",
]


class PerfcoreError(Exception):
    """Base of every error perfcore raises on purpose. exit_code is what the CLI exits with."""

    exit_code = 1


class UsageError(PerfcoreError):
    """The API or CLI was used in a way that would give a wrong measurement."""

    exit_code = 2


class DeviceUnavailable(PerfcoreError):
    """A GPU feature was asked for where no usable GPU is (or perfcore was built without CUDA)."""

    exit_code = 3


class CudaError(PerfcoreError):
    """A CUDA runtime call failed; the message names the call and CUDA's error."""


class CuptiError(PerfcoreError):
    """A CUPTI call failed. `code` is CUPTI's CUptiResult."""

    exit_code = 3

    # The CUptiResult that means "someone else has CUPTI" (cupti_result.h).
    MULTIPLE_SUBSCRIBERS = 39

    def __init__(self, message: str, code: int = -1):
        super().__init__(message)
        self.code = code

    @property
    def held_by_other(self) -> bool:
        return self.code == self.MULTIPLE_SUBSCRIBERS


class CuptiUnavailable(DeviceUnavailable):
    """CUPTI tracing was asked for but this build or this machine cannot provide it."""


class NativeUnavailable(PerfcoreError):
    """perfcore._C is missing or failed to load (perfcore was not built, or built for another torch)."""


class RunFailed(PerfcoreError):
    """The command ran but produced nothing to report (no steps, no instrumented Python)."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code or 1


class BadResultFile(PerfcoreError):
    """A result file perfcore reads (run.json, steps.csv, sweep.json ...) is missing, truncated, corrupt,
    of another kind or from a newer perfcore. exit_code 2 when the user named it, 1 otherwise."""

    def __init__(self, path, problem: str, fix: str = "", exit_code: int = 2):
        super().__init__(f"{path}: {problem}" + (f"; {fix}" if fix else ""))
        self.path, self.problem, self.exit_code = path, problem, exit_code


class ResultWriteError(PerfcoreError):
    """A result file could not be written (disk full, read-only folder). Files written before stay valid."""
