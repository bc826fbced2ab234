"""perfcore's entry into a profiled interpreter: `perfcore run` puts this folder first on PYTHONPATH.

It activates perfcore.run.child.instrument only when PERFCORE_RUN_DIR is set, then hands over to any
sitecustomize this one shadows, so the environment behaves as it would without perfcore.
"""
import os
import sys


def _chain_next_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    saved_path, saved_mod = list(sys.path), sys.modules.pop("sitecustomize", None)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import importlib

        importlib.import_module("sitecustomize")
    except ImportError:
        pass
    finally:
        sys.path[:] = saved_path
        if saved_mod is not None:
            sys.modules["sitecustomize"] = saved_mod


if os.environ.get("PERFCORE_RUN_DIR"):
    try:
        from perfcore.run.child import instrument as _perfcore_instrument

        _perfcore_instrument.activate()
    except Exception as _e:  # never break the user's program because profiling could not start
        sys.stderr.write(f"perfcore: instrumentation not active: {type(_e).__name__}: {_e}\n")
_chain_next_sitecustomize()
