"""perfcore's entry into a profiled interpreter: `perfcore run` puts this folder first on PYTHONPATH.

It activates perfcore.run.child.instrument only when PERFCORE_CHILD_CONFIG names the configuration a
`perfcore run` wrote for this process, then hands over to any sitecustomize this one shadows, so the
environment behaves as it would without perfcore.
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


def _package_parent():
    """Where the perfcore this boot folder belongs to lives: `perfcore run` put this folder
    (perfcore/run/child/_boot) on PYTHONPATH. Taken from this file's own place, never from the settings
    file, which is not read before perfcore has checked it."""
    parent = os.path.realpath(__file__)
    for _ in range(5):  # sitecustomize.py, _boot, child, run, perfcore
        parent = os.path.dirname(parent)
    return parent


def _reach_perfcore(parent) -> bool:
    """perfcore from where `perfcore run` found it, when this interpreter cannot import it (a checkout
    that was never installed). Last on sys.path, and never on PYTHONPATH: the script's own packages
    stay first, and a different Python that the script starts never sees perfcore's site-packages.
    Returns whether it appended the folder."""
    import importlib.util

    if not parent or parent in sys.path or os.path.basename(parent) in ("site-packages", "dist-packages"):
        return False  # an installed perfcore: an interpreter that cannot import it is another environment's
    if importlib.util.find_spec("perfcore") is None:
        sys.path.append(parent)
        return True
    return False


if os.environ.get("PERFCORE_CHILD_CONFIG"):
    _config_path = os.environ["PERFCORE_CHILD_CONFIG"]
    _parent = _package_parent()
    _appended = False
    try:
        _appended = _reach_perfcore(_parent)
        from perfcore.run.child import instrument as _perfcore_instrument

        _perfcore_instrument.activate_from_file(_config_path)
    except Exception as _e:  # never break the user's program because profiling could not start
        if _appended and sys.path and sys.path[-1] == _parent:
            sys.path.pop()  # a configuration that was not this process's lends it nothing
        if isinstance(_e, ModuleNotFoundError) and (_e.name or "").split(".")[0] == "perfcore":
            # another environment's Python: perfcore never lends it its own site-packages
            _why = (
                f"not active in {sys.executable}: this Python cannot import perfcore (installed in "
                f"{_parent or '?'}); run the script with the Python perfcore is installed in, or pip "
                "install perfcore into this one"
            )
        elif type(_e).__name__ == "ConfigError":
            _why = (
                f"not active: {_e}; this Python runs unprofiled (profile it with perfcore run, or unset "
                "PERFCORE_CHILD_CONFIG)"
            )
        else:
            _why = f"instrumentation not active: {type(_e).__name__}: {_e}"
        sys.stderr.write(f"perfcore: {_why}\n")
_chain_next_sitecustomize()
