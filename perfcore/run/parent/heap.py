"""The finishing process gives back what it frees: a long run's column-sized arrays come and go all through
the finish, and glibc's malloc would keep them."""

from __future__ import annotations

__all__ = ["give_back_freed", "MMAP_THRESHOLD"]

MMAP_THRESHOLD = 256 * 1024  # bytes: a block this large gets its own mapping, unmapped when freed
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter


def give_back_freed() -> bool:
    """Blocks of MMAP_THRESHOLD bytes and more get their own mapping from now on, returned to the OS when
    freed. glibc raises that threshold (up to 32 MiB) each time it frees such a block, after which a 1M-step
    run's 8 MB columns came from the heap, which kept them: 100 MiB more held after the part was written,
    to the end of the finish. Fixing the threshold stops that. True where it was set (glibc); elsewhere
    nothing changes."""
    try:
        import ctypes

        return bool(ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError, TypeError):
        return False
