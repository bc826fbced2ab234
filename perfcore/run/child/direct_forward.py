"""Forward found however it is called: `model.forward(x)`, or `self.forward(x)` from a method of the
user's own (pytorch/examples' forward-forward trains each layer that way), never passes through
nn.Module.__call__, where the forward hook sits, so its matmuls would count as host.

So the forward of a module class of the user's own (defined outside the standard library,
site-packages and perfcore) is timed as forward too, when the user's code that is running while the
class is made (its file and the files importing it) reads `.forward` anywhere: a script that never
calls forward directly keeps its classes exactly as written. The class's forward becomes a Python
function (functools.wraps: signature, name and source as the original's) that calls a native
TimedCall of the original: inside a module call the hook depth is already one and the call goes
straight through, at depth zero (a direct call) it opens the forward phase. While dynamo traces, it
calls the original, so torch.compile sees the same graph: its code is skipped as a frame of its own,
as the compile hook's Module.__call__ is."""

from __future__ import annotations

import dis
import functools
import sys
import types
from typing import Any

__all__ = ["DirectForwards", "reads_forward"]


def reads_forward(code: types.CodeType) -> bool:
    """Whether `code`, or any function or class body inside it, reads an attribute named forward."""
    stack, seen = [code], set()
    while stack:
        co = stack.pop()
        if id(co) in seen:
            continue
        seen.add(id(co))
        if "forward" in co.co_names:
            for ins in dis.get_instructions(co):
                if ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and ins.argval == "forward":
                    return True
        stack.extend(c for c in co.co_consts if isinstance(c, types.CodeType))
    return False


class DirectForwards:
    """Watches module classes as they are made (nn.Module.__init_subclass__) and times the forward of
    those a direct call may reach; armed and disarmed with the forward hook."""

    def __init__(self, hooks, torch) -> None:
        self.hooks, self.torch = hooks, torch
        self.wrapped: list[tuple[type, Any, Any]] = []  # (class, original forward, its TimedCall)
        self.scope = None  # the forward phase's scope while armed
        self._reads: dict[int, tuple[types.CodeType, bool]] = {}  # a file's code -> whether it reads .forward
        self._prefixes: tuple[str, ...] | None = None

    def install(self) -> None:
        Module, watch = self.torch.nn.Module, self

        def __init_subclass__(cls, **kwargs):
            super(Module, cls).__init_subclass__(**kwargs)
            try:
                watch.class_made(cls, sys._getframe(1))
            except Exception as e:  # never fail the user's class: its forward stays as written
                watch.hooks.inst.notes.append(f"{cls.__qualname__}.forward is not timed: {type(e).__name__}: {e}")

        Module.__init_subclass__ = classmethod(__init_subclass__)

    def class_made(self, cls: type, frame) -> None:
        from perfcore.capture.line_sampler import is_library, library_prefixes

        orig = vars(cls).get("forward")
        if not isinstance(orig, types.FunctionType):
            return
        if self._prefixes is None:
            self._prefixes = library_prefixes()
        if is_library(orig.__code__.co_filename, self._prefixes):
            return
        # The user's code running now: the class's file, and the user's files importing it.
        while frame is not None:
            code = frame.f_code
            if not is_library(code.co_filename, self._prefixes) and self._code_reads_forward(code):
                self._wrap(cls, orig)
                return
            frame = frame.f_back

    def _code_reads_forward(self, code: types.CodeType) -> bool:
        kept = self._reads.get(id(code))
        if kept is None or kept[0] is not code:
            kept = (code, reads_forward(code))
            self._reads[id(code)] = kept
        return kept[1]

    def _wrap(self, cls: type, orig) -> None:
        from perfcore._C import TimedCall

        timed = TimedCall(orig)
        timed.scope = self.scope
        is_compiling = self.torch.compiler.is_compiling

        @functools.wraps(orig)
        def forward(module, *args, **kwargs):
            if is_compiling():
                return orig(module, *args, **kwargs)
            return timed(module, *args, **kwargs)

        self.wrapped.append((cls, orig, timed))
        cls.forward = forward
        if "torch._dynamo" in sys.modules:  # else at the first torch.compile (CompileWatch)
            self.traceable()

    def traceable(self) -> None:
        """Dynamo starts no frame at the wrapper (every wrapper shares one code object): after a graph
        break it compiles the original forward's frame, as it does without perfcore."""
        if not self.wrapped:
            return
        import torch._dynamo.eval_frame as eval_frame

        eval_frame.skip_code(vars(self.wrapped[0][0])["forward"].__code__)

    def arm(self, scope) -> None:
        self.scope = scope
        for _, _, timed in self.wrapped:
            timed.scope = scope

    def uninstall(self) -> None:
        """Every wrapped class's forward back as written."""
        self.arm(None)
        for cls, orig, _ in reversed(self.wrapped):
            if getattr(vars(cls).get("forward"), "__wrapped__", None) is orig:
                cls.forward = orig
        self.wrapped = []
