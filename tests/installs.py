"""perfcore installed as a user installs it, apart from this checkout: a clone of the working tree, venvs that
see the dev environment's packages (torch and the rest) but not its perfcore, and the README's install lines.
tests/test_install.py and tests/test_notebook.py install from the same clone (conftest's perfcore_clone): pip
builds a local folder in place, so the second install reuses the first one's compiled objects."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# PERFCORE_WHEEL_MODE=auto (scripts/test.sh sets it) builds as pip would, in the CUDA mode where it can; the
# default, cpu, keeps a hand-run short.
WHEEL_MODE = os.environ.get("PERFCORE_WHEEL_MODE", "cpu")
# The dev environment's own copy: an editable install whose finder would put the checkout back.
HIDDEN_FROM_VIEW = re.compile(r"^(perfcore\b.*|__editable__.*)$")


def tree_files() -> list[str]:
    """What a fresh clone of the working tree holds (tracked plus new files not ignored)."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return sorted(f for f in out.split("\0") if f and (ROOT / f).is_file())


def copy_tree(files: list[str], dest: Path) -> Path:
    for f in files:
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, dest / f)
    return dest


def clone_tree(dest: Path) -> Path:
    """A git repository at dest holding the working tree as one commit: what a clone of it would be."""
    copy_tree(tree_files(), dest)
    git = ["git", "-c", "user.name=perfcore-test", "-c", "user.email=test@localhost", "-c", "init.defaultBranch=main"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "working tree"]):
        subprocess.run(git + args, cwd=dest, check=True, capture_output=True)
    return dest


def readme_install_lines(readme: str) -> list[str]:
    """The shell commands of the README's install section, as written (notebook `!` prefixes dropped)."""
    m = re.search(r"^## Install[^\n]*\n(.*?)(?=^## )", readme + "\n## ", re.S | re.M)
    assert m, "README has no Install section"
    block = re.search(r"```(?:bash|sh|shell)?\n(.*?)```", m.group(1), re.S)
    assert block, "README's Install section has no command block"
    lines = [ln.split(" #")[0].strip() for ln in block.group(1).splitlines()]
    return [ln.lstrip("!%").strip() for ln in lines if ln and not ln.startswith("#")]


def dev_site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def make_env(base: Path, view_of: Path | None = None, keep=lambda name: not HIDDEN_FROM_VIEW.match(name)) -> Path:
    """A venv at base/venv that sees `view_of` (a site-packages; the dev venv's by default) through symlinks,
    minus what `keep` drops (by default the dev venv's perfcore, whose finder would put the checkout back).

    The view is a site dir of its own (its .pth files run, as setuptools' distutils hook needs),
    outside the venv's prefix, so pip installs into the venv and never touches the view.
    """
    view_of = view_of or dev_site_packages()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(base / "venv")], check=True)
    view = base / "view"
    view.mkdir()
    for entry in view_of.iterdir():
        if keep(entry.name):
            (view / entry.name).symlink_to(entry)
    py = base / "venv" / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "_view.pth").write_text(f"import site; site.addsitedir({str(view)!r})\n")
    # The venv's own `pip` command, as in Colab; without it PATH would find another Python's pip.
    pip = base / "venv" / "bin" / "pip"
    pip.write_text(f"#!{py}\nimport sys\nfrom pip._internal.cli.main import main\nsys.exit(main())\n")
    pip.chmod(0o755)
    return py


def env_for(venv_py: Path, **extra: str) -> dict[str, str]:
    """The environment of a shell in that venv: its bin first on PATH, no PYTHONPATH or leftover build
    switch, and the build mode WHEEL_MODE asks for (unless `extra` sets it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PERFCORE_CPU_ONLY", "VIRTUAL_ENV")}
    bindir = str(venv_py.parent)
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and not p.startswith(str(ROOT))]
    mode = {} if WHEEL_MODE == "auto" else {"PERFCORE_CPU_ONLY": "1"}
    env.update(PATH=os.pathsep.join([bindir] + path), VIRTUAL_ENV=str(venv_py.parent.parent), **{**mode, **extra})
    return env


def sh(cmd, cwd: Path, env: dict, timeout: int = 600) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, cwd=cwd, env=env, shell=isinstance(cmd, str), capture_output=True, text=True,
                       timeout=timeout)
    r.text = r.stdout + r.stderr  # type: ignore[attr-defined]
    return r


def ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, f"{r.args} exited {r.returncode}:\n{r.text[-4000:]}"
    return r.text
