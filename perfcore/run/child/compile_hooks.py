"""torch.compile under perfcore: dynamo must see what it sees without perfcore.

perfcore's forward hook on nn.Module.__call__ is a native callable (no Python frame per module
call). Dynamo cannot trace into it: where it meets Module.__call__ as a value (super().__call__ in
a layer that overrides __call__, Hugging Face's gradient-checkpointed layers, a checkpoint of
`layer.__call__`) it breaks the graph there, doubling the frames it compiles. So the first
torch.compile puts a Python function on Module.__call__ instead: while dynamo traces it,
is_compiling() is True and the original is all it sees; run eagerly, it calls the native hook. A
script that never compiles keeps the frame-free hook."""

from __future__ import annotations

from typing import Any

__all__ = ["CompileWatch"]


class CompileWatch:
    """Wraps torch.compile: counts the calls (run.json `torch_compile`) and, at the first, makes
    Module.__call__ traceable."""

    def __init__(self, hooks, torch) -> None:
        self.hooks, self.torch = hooks, torch
        self.calls = 0

    def install(self) -> None:
        torch, orig = self.torch, self.torch.compile

        def compile(*args: Any, **kwargs: Any):
            self.calls += 1
            if self.calls == 1:
                try:
                    self.traceable_module_call()
                except Exception as e:  # never fail the user's torch.compile: the hook stays as it was
                    self.hooks.inst.notes.append(
                        f"nn.Module.__call__ was not made traceable for torch.compile: {type(e).__name__}: {e}"
                    )
            return orig(*args, **kwargs)

        compile.__wrapped__ = orig
        compile.__doc__, compile.__name__ = orig.__doc__, orig.__name__
        torch.compile = compile

    def traceable_module_call(self) -> None:
        torch, hooks = self.torch, self.hooks
        owner, attr = hooks.patched["forward"]
        timed = hooks.timed["forward"]
        orig = timed.__wrapped__
        is_compiling = torch.compiler.is_compiling

        def __call__(module, *args, **kwargs):
            if is_compiling():
                return orig(module, *args, **kwargs)
            return timed(module, *args, **kwargs)

        __call__.__wrapped__ = orig
        __call__.__name__ = getattr(orig, "__name__", "__call__")
        # Dynamo starts no frame of its own here (it starts none in torch's own Module.__call__
        # either): it compiles the frames the call leads to, and inlines this one when traced code
        # calls a module. Without it, each module call after a graph break is one more frame.
        import torch._dynamo.eval_frame as eval_frame

        eval_frame.skip_code(__call__.__code__)
        hooks.installed["forward"] = __call__
        setattr(owner, attr, __call__)
        if hooks.direct is not None:
            hooks.direct.traceable()
