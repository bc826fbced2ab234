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


def _reach_perfcore() -> None:
    """perfcore from where `perfcore run` found it, when this interpreter cannot import it (a checkout
    that was never installed). Last on sys.path, and never on PYTHONPATH: the script's own packages
    stay first, and a different Python that the script starts never sees perfcore's site-packages."""
    import importlib.util

    parent = os.environ.get("PERFCORE_PACKAGE_PARENT")
    if not parent or parent in sys.path or os.path.basename(parent) in ("site-packages", "dist-packages"):
        return  # an installed perfcore: an interpreter that cannot import it is another environment's
    if importlib.util.find_spec("perfcore") is None:
        sys.path.append(parent)


if os.environ.get("PERFCORE_RUN_DIR"):
    try:
        _reach_perfcore()
        from perfcore.run.child import instrument as _perfcore_instrument

        _perfcore_instrument.activate()
    except Exception as _e:  # never break the user's program because profiling could not start
        if isinstance(_e, ModuleNotFoundError) and (_e.name or "").split(".")[0] == "perfcore":
            # another environment's Python: perfcore never lends it its own site-packages
            _why = (f"not active in {sys.executable}: this Python cannot import perfcore (installed in "
                    f"{os.environ.get('PERFCORE_PACKAGE_PARENT', '?')}); run the script with the Python "
                    "perfcore is installed in, or pip install perfcore into this one")
        else:
            _why = f"instrumentation not active: {type(_e).__name__}: {_e}"
        sys.stderr.write(f"perfcore: {_why}\n")
_chain_next_sitecustomize()
