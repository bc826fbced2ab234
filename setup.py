"""Builds perfcore._C with torch's BuildExtension.

CUDA mode (CUPTI tracer, CUDA-event timer, transfer sweep, calibration kernels) when torch is a
CUDA build and a CUDA toolkit is found; CPU mode otherwise or with PERFCORE_CPU_ONLY=1. Every
reason for the CPU mode (a failed CUDA-mode compile too) is one line that says how to get the CUDA
mode; none fails the install. The settings chosen are printed and written to
perfcore/_build_info.json, which `perfcore env` shows.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import setup
from setuptools.extension import Extension

ROOT = Path(__file__).resolve().parent
BUILD_INFO = ROOT / "perfcore" / "_build_info.json"
# Turing, Ampere, Hopper, plus PTX so newer GPUs can JIT. sm_80 code runs on 8.6 and 8.9 as well,
# so they get no entry of their own; nvcc 13 has dropped everything before 7.5.
DEFAULT_ARCH_LIST = "7.5;8.0;9.0+PTX"

# Files that need the CUDA runtime or CUPTI; every other .cpp under csrc/ builds in both modes
# (found, not listed: a new file is compiled without touching this script).
CUDA_ONLY_SOURCES = [
    "csrc/cuda_calls.cpp",
    "csrc/cuda_check.cpp",
    "csrc/events.cpp",
    "csrc/fake_runtime.cpp",
    "csrc/transfer.cpp",
    "csrc/cupti/decoder.cpp",
    "csrc/cupti/buffers.cpp",
    "csrc/cupti/tracer.cpp",
    "csrc/cupti/quiet_api.cpp",
    "csrc/cupti/fake_buffer.cpp",
]
# How to get the CUDA mode, said after every reason for the CPU mode.
REBUILD_HINT = "then reinstall perfcore with pip's --no-build-isolation"
# The oldest torch perfcore is tested with (make test-cuda12 runs the tests that patch torch on it,
# make test on the newest); pyproject.toml's torch dependency says the same.
MIN_TORCH = (2, 8)


def sources(mode: str, root: Path = ROOT) -> list[str]:
    """Every .cpp (and, in CUDA mode, .cu) under csrc/, relative to root, in a stable order."""
    found = sorted(p.relative_to(root).as_posix() for p in (root / "csrc").rglob("*.cpp"))
    common = [f for f in found if f not in CUDA_ONLY_SOURCES]
    if mode != "cuda":
        return common
    cu = sorted(p.relative_to(root).as_posix() for p in (root / "csrc").rglob("*.cu"))
    return common + [f for f in CUDA_ONLY_SOURCES if f in found] + cu


def log(msg: str) -> None:
    print(f"perfcore build: {msg}", flush=True)


def fail(msg: str) -> None:
    raise SystemExit(f"perfcore build: error: {msg}")


def truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def isolated_build() -> bool:
    """True inside a PEP 517 isolated build env (pip's or pypa/build's), which hides the user's torch."""
    return any("pip-build-env-" in p or "build-env-" in p for p in [sys.prefix] + sys.path)


def torch_missing(error: str) -> str:
    """The one line that says what to type instead when torch cannot be imported at build time."""
    # Under pip's isolation sys.prefix is still the user's environment, so its site-packages tell
    # whether torch is there but hidden.
    paths = sysconfig.get_paths()
    hidden = any((Path(paths[k]) / "torch").is_dir() for k in ("purelib", "platlib"))
    if hidden or (isolated_build() and not any("pip-build-env-" in p for p in sys.path)):
        return (
            "perfcore compiles against the torch you run with, and build isolation hides it: "
            "run the same pip command with --no-build-isolation (e.g. pip install --no-build-isolation .)"
        )
    if isolated_build():
        return (
            f"torch is not installed in {sys.prefix}: install torch first (pip install torch), then run "
            "the same pip command with --no-build-isolation (e.g. pip install --no-build-isolation .)"
        )
    return (
        f"torch is not importable here ({error}): install torch first (pip install torch), "
        "then pip install --no-build-isolation ."
    )


def import_torch():
    try:
        import torch
    except ImportError as e:
        fail(torch_missing(str(e)))
    return torch


def torch_too_old(version: str) -> str:
    """The one line that stops the build on a torch older than MIN_TORCH, else ''. pip may already
    have fetched a newer torch for the dependency, but it would install it after building against
    this one, and the extension would not load beside it."""
    m = re.match(r"(\d+)\.(\d+)", version)
    if m is None or (int(m[1]), int(m[2])) >= MIN_TORCH:
        return ""
    need = ".".join(map(str, MIN_TORCH))
    return (
        f"torch {version} is older than {need}, the oldest torch perfcore supports: upgrade it first "
        f"(pip install 'torch>={need}'), then install perfcore again with pip's --no-build-isolation"
    )


def find_cuda_home(candidates: list[Path] | None = None) -> tuple[Path | None, str]:
    """(toolkit, "") or (None, why not): CUDA_HOME from the environment, else the first directory
    that really has the headers and nvcc.

    An `nvcc` on PATH may be a wrapper script (here /usr/local/bin/nvcc), so its parent's parent
    is only a candidate, checked like the others.
    """
    env = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if env:
        home = Path(env)
        if not (home / "include" / "cuda_runtime.h").is_file():
            return None, f"CUDA_HOME={env} has no include/cuda_runtime.h"
        if not (home / "bin" / "nvcc").exists():
            return None, f"CUDA_HOME={env} has no bin/nvcc"
        return home, ""
    if candidates is None:
        candidates = []
        nvcc = shutil.which("nvcc")
        if nvcc:
            candidates.append(Path(nvcc).resolve().parent.parent)
        candidates.append(Path("/usr/local/cuda"))
        candidates += [Path(p) for p in sorted(glob.glob("/usr/local/cuda-*"), reverse=True)]
    headers_only = []
    for c in candidates:
        if (c / "include" / "cuda_runtime.h").is_file():
            if (c / "bin" / "nvcc").exists():
                return c, ""
            headers_only.append(str(c))
    if headers_only:
        return None, f"no nvcc: {headers_only[0]} has the CUDA headers but no bin/nvcc"
    looked = ", ".join(dict.fromkeys(str(c) for c in candidates))
    return None, f"no CUDA toolkit found (looked for include/cuda_runtime.h and bin/nvcc in {looked})"


def nvcc_version(cuda_home: Path) -> str:
    try:
        out = subprocess.run(
            [str(cuda_home / "bin" / "nvcc"), "--version"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    m = re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else "unknown"


def site_dirs() -> list[Path]:
    dirs = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]] + sys.path
    seen, out = set(), []
    for d in dirs:
        p = Path(d) if d else None
        if p and p.is_dir() and p not in seen:
            seen.add(p)
            out.append(p)
    return out


def cupti_api_version(include: Path) -> int:
    for header in ("cupti_version.h", "cupti.h"):
        f = include / header
        if f.is_file():
            m = re.search(r"#define\s+CUPTI_API_VERSION\s+(\d+)", f.read_text(errors="replace"))
            if m:
                return int(m.group(1))
    return 0


def find_cupti(cuda_home: Path, cuda_major: str) -> tuple[dict | None, list[str]]:
    """The CUPTI that will be loaded at run time: torch's own package first, then the toolkit.

    `import torch` loads its libcupti by soname before perfcore._C is imported, and the dynamic
    loader never loads a second library of the same soname, so the headers must be that one's.
    """
    looked: list[str] = []
    candidates: list[tuple[str, Path, Path]] = []
    for site in site_dirs():
        for sub in (f"nvidia/cu{cuda_major}", "nvidia/cuda_cupti"):
            base = site / sub
            candidates.append((f"torch's nvidia package ({sub})", base / "include", base / "lib"))
    candidates += [
        (
            "CUDA toolkit (extras/CUPTI)",
            cuda_home / "extras" / "CUPTI" / "include",
            cuda_home / "extras" / "CUPTI" / "lib64",
        ),
        ("CUDA toolkit", cuda_home / "include", cuda_home / "lib64"),
    ]
    for source, inc, lib in candidates:
        looked.append(str(inc))
        if not (inc / "cupti.h").is_file():
            continue
        libs = sorted(glob.glob(str(lib / "libcupti.so*")), key=len)
        # Versioned sonames only in the pip packages: link the file itself, by full path.
        versioned = [x for x in libs if re.search(r"libcupti\.so\.\d+$", x)] or libs
        if not versioned:
            looked.append(f"{lib} (no libcupti.so*)")
            continue
        return {
            "source": source,
            "include": str(inc),
            "library": versioned[0],
            "api_version": cupti_api_version(inc),
            # The toolkit's own CUPTI is its release: cuda.h beside it says which.
            "release": cupti_release(inc) if source.startswith("torch") else cuda_h_version(cuda_home / "include"),
        }, looked
    return None, looked


def cuda_h_version(include: Path) -> str | None:
    """ "12.4" from include/cuda.h's CUDA_VERSION (12040), or None."""
    f = include / "cuda.h"
    m = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", f.read_text(errors="replace")) if f.is_file() else None
    return f"{int(m.group(1)) // 1000}.{int(m.group(1)) % 1000 // 10}" if m else None


def cupti_release(include: Path) -> str | None:
    """ "12.8" for a CUPTI from a pip package (its dist-info says the release), else None."""
    site = include.parent.parent.parent  # site-packages/nvidia/<pkg>/include
    for d in sorted(glob.glob(str(site / "nvidia_cuda_cupti*.dist-info"))):
        m = re.search(r"-(\d+)\.(\d+)[^-]*\.dist-info$", d)
        if m:
            return f"{m.group(1)}.{m.group(2)}"
    return None


def version_tuple(v: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v or "")[:2])


# The CUPTI headers csrc/cupti/records.h includes, never cupti.h: that one pulls
# generated_cuda_meta.h, which needs a cuda.h as new as its CUPTI.
CUPTI_HEADERS = (
    "cupti_activity.h",
    "cupti_callbacks.h",
    "cupti_result.h",
    "cupti_version.h",
    "cupti_runtime_cbid.h",
    "cupti_driver_cbid.h",
)


def stage_cupti_headers(include: str, dest: Path | None = None) -> Path:
    """Copy CUPTI's own headers (cupti_*.h with cuda_stdint.h and the Openacc/Openmp folders that
    cupti_activity.h includes; not cupti.h nor generated_*.h) to a private folder placed first on
    the include path, so CUPTI comes from the loaded library's package while cuda.h and
    cuda_runtime.h still come from the toolkit nvcc belongs to. cuda_stdint.h goes too: a toolkit
    that keeps CUPTI under extras/CUPTI has it only there."""
    dest = dest or ROOT / "build" / "cupti_include"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for h in glob.glob(os.path.join(include, "cupti_*.h")) + glob.glob(os.path.join(include, "cuda_stdint.h")):
        shutil.copy2(h, dest)
    for sub in ("Openacc", "Openmp"):
        if os.path.isdir(os.path.join(include, sub)):
            shutil.copytree(os.path.join(include, sub), dest / sub)
    return dest


def cupti_header_error(staged: Path, *cuda_includes: Path, cxx: str | None = None) -> str:
    """'' when CUPTI's headers compile with this toolkit's cuda.h (g++ -fsyntax-only, a second),
    else the compiler's first error line."""
    cxx = cxx or os.environ.get("CXX") or shutil.which("g++") or "c++"
    src = "".join(f"#include <{h}>\n" for h in CUPTI_HEADERS) + "int main() { return 0; }\n"
    try:
        r = subprocess.run(
            [cxx, "-fsyntax-only", "-std=c++17", "-x", "c++", "-I", str(staged)]
            + [f"-I{d}" for d in cuda_includes]
            + ["-"],
            input=src,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "LC_ALL": "C"},
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"{cxx} did not run ({e})"
    # The staged folder is gone by the time anyone reads the line: name the header alone.
    out = (r.stdout + r.stderr).replace(f"{staged}{os.sep}", "")
    return "" if r.returncode == 0 else first_error_line(out) or f"{cxx} exited {r.returncode}"


def first_error_line(output: str) -> str:
    """The compiler's first error, trimmed to one line: what a user needs when pip hides the rest."""
    for line in output.splitlines():
        if re.search(r"\b(error|fatal)\b", line, re.IGNORECASE) and not line.lstrip().startswith(("ninja:", "FAILED:")):
            return line.strip()[:300]
    return ""


def cupti_pair_refusal(info: dict) -> str:
    """'' when the CUPTI headers and the toolkit's cuda.h work together, else CPU mode's reason.

    Decided by a try-compile only where the pair is in doubt (CUPTI newer than cuda.h): older
    CUPTI headers always build against a newer cuda.h of the same major."""
    cupti = info["cupti"]
    include = Path(info["cuda_home"]) / "include"
    cuda_h = cuda_h_version(include)
    cupti_v = cupti.get("release")
    # No cuda.h is no pair to judge: the compile itself fails then, and says so in its own line.
    if not cuda_h or (cupti_v and version_tuple(cupti_v) <= version_tuple(cuda_h)):
        return ""
    staged = stage_cupti_headers(cupti["include"], ROOT / "build" / "cupti_check")
    try:
        err = cupti_header_error(staged, include)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    if not err:
        return ""
    whose = "torch's CUPTI" if cupti["source"].startswith("torch") else "the CUPTI found"
    return (
        f"{whose} {cupti_v or 'API %s' % cupti['api_version']} needs CUDA toolkit >= {cupti_v or 'its'} headers; "
        f"this nvcc is {info['toolkit_version']} (cuda.h {cuda_h or '?'} at {include}: {err}); for the CUDA mode "
        f"set CUDA_HOME to a CUDA {cupti_v or info['toolkit_version'].split('.')[0]}+ toolkit, {REBUILD_HINT}"
    )


def decide(torch=None) -> dict:
    """CUDA or CPU mode, and why. Every reason for the CPU mode is one line that ends with how to
    get the CUDA mode; none of them fails the install. `torch` is injectable for tests."""
    torch = torch or import_torch()
    info: dict = {
        "mode": "cpu",
        "reason": "",
        "torch_version": torch.__version__,
        "torch_cuda_version": torch.version.cuda,
        "python": sys.version.split()[0],
        # A CUDA build of torch and no PERFCORE_CPU_ONLY: a CPU mode is then worth a warning at
        # run time, since pip showed nothing of why.
        "cuda_wanted": bool(torch.version.cuda) and not truthy("PERFCORE_CPU_ONLY"),
        "cuda_home": None,
        "toolkit_version": None,
        "cupti": None,
        "arch_list": None,
        "cxx_flags": [],
        "nvcc_flags": [],
    }

    def cpu(why: str, how: str) -> dict:
        info["reason"] = f"{why}; for the CUDA mode {how}"
        return info

    if truthy("PERFCORE_CPU_ONLY"):
        return cpu("PERFCORE_CPU_ONLY=1 was set at build time", f"unset it, {REBUILD_HINT}")
    if not torch.version.cuda:
        return cpu(f"torch {torch.__version__} is a CPU build", f"install a CUDA build of torch, {REBUILD_HINT}")
    torch_major = torch.version.cuda.split(".")[0]
    toolkit_hint = f"install the CUDA {torch_major}.x toolkit (nvcc, CUPTI) and set CUDA_HOME to it, {REBUILD_HINT}"
    cuda_home, why = find_cuda_home()
    if cuda_home is None:
        return cpu(why, toolkit_hint)
    toolkit = nvcc_version(cuda_home)
    if toolkit == "unknown":
        return cpu(f"{cuda_home}/bin/nvcc --version does not say its release", toolkit_hint)
    if toolkit.split(".")[0] != torch_major:
        return cpu(
            f"torch {torch.__version__} is built for CUDA {torch.version.cuda} but nvcc at {cuda_home} "
            f"is CUDA {toolkit}",
            toolkit_hint,
        )
    cupti, looked = find_cupti(cuda_home, torch_major)
    if cupti is None:
        return cpu(
            "no CUPTI headers and library found (looked for cupti.h and libcupti.so* in " + ", ".join(looked) + ")",
            toolkit_hint,
        )
    info.update(mode="cuda", cuda_home=str(cuda_home), toolkit_version=toolkit, cupti=cupti)
    refusal = cupti_pair_refusal(info)
    if refusal:
        info.update(mode="cpu", cuda_home=None, toolkit_version=None, cupti=None, reason=refusal)
    return info


def arch_list(torch) -> str:
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    try:
        visible = torch.cuda.is_available() and torch.cuda.device_count() > 0
    except Exception:
        visible = False
    if visible:
        caps = sorted({"%d.%d" % torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})
        return ";".join(caps)
    # No GPU visible: torch's own probe would fail (IndexError in _get_cuda_arch_flags).
    return DEFAULT_ARCH_LIST


def check_compiler() -> None:
    cxx = os.environ.get("CXX", "c++")
    if shutil.which(cxx) is None and shutil.which("g++") is None:
        fail(
            f"no C++ compiler found (looked for $CXX={cxx!r} and g++ on PATH); install one "
            "(Debian/Ubuntu: apt-get install g++) and build again"
        )


def extension_settings(info: dict, torch_include: str) -> dict:
    """The Extension's arguments for info's mode; records the flags and links in info."""
    # torch's include dir carries pybind11; perfcore uses no torch headers and links no torch
    # library, so _C builds in seconds and does not depend on libtorch at load time.
    cxx = ["-O3", "-std=c++17", "-fvisibility=hidden", "-Wall", "-Wno-unused-function"]
    # Python's own CFLAGS often carry -g: on the pybind11 bindings that is a third of the build
    # time and a 15 MB object for a wheel nobody debugs. PERFCORE_DEBUG_SYMBOLS=1 keeps it.
    if not truthy("PERFCORE_DEBUG_SYMBOLS"):
        cxx.append("-g0")
    nvcc = ["-O3", "-std=c++17", "--expt-relaxed-constexpr"]
    kw: dict = {
        "sources": sources(info["mode"]),
        "include_dirs": [str(ROOT / "csrc"), torch_include],
        "define_macros": [],
        "library_dirs": [],
        "libraries": [],
        "extra_link_args": [],
    }
    if info["mode"] == "cuda":
        cupti = info["cupti"]
        staged = stage_cupti_headers(cupti["include"])
        kw["include_dirs"] = [str(staged)] + kw["include_dirs"] + [str(Path(info["cuda_home"]) / "include")]
        kw["define_macros"].append(("PERFCORE_WITH_CUDA", "1"))
        lib64 = str(Path(info["cuda_home"]) / "lib64")
        kw["library_dirs"].append(lib64)
        kw["libraries"].append("cudart")
        cupti_dir = os.path.dirname(cupti["library"])
        kw["extra_link_args"] += [cupti["library"], f"-Wl,-rpath,{cupti_dir}", f"-Wl,-rpath,{lib64}"]
        info["nvcc_flags"] = nvcc
    kw["extra_compile_args"] = {"cxx": cxx, "nvcc": nvcc}
    info["cxx_flags"] = cxx
    info["link"] = kw["extra_link_args"] + [f"-l{x}" for x in kw["libraries"]]
    return kw


def report(info: dict, *copies: Path) -> None:
    """Say what was chosen, and write it where `perfcore env` reads it (the tree and the wheel)."""
    # pip shows these lines only with -v (or when the build fails); `perfcore env` repeats them.
    log(f"{info['mode'].upper()} mode" + (f": {info['reason']}" if info["reason"] else ""))
    log(f"torch {info['torch_version']} (CUDA {info['torch_cuda_version']})")
    if info["mode"] == "cuda":
        log(f"CUDA_HOME={info['cuda_home']} (nvcc {info['toolkit_version']}), arch list {info['arch_list']}")
        c = info["cupti"]
        log(f"CUPTI API {c['api_version']} from {c['source']}: {c['library']}")
    for path in (BUILD_INFO,) + copies:
        if path.parent.is_dir():
            path.write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")


def compile_failed_reason(error: BaseException, output: str = "") -> str:
    """CPU mode's reason after a failed CUDA-mode compile: the compiler's own first error line
    (ninja and distutils raise only "Error compiling objects for extension")."""
    first = first_error_line(output) or (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
    how = "fix what it says"
    if re.search(r"unsupported (GNU|clang) version", output):
        how = "set CC/CXX to a gcc this nvcc accepts"
    return f"the CUDA-mode compile failed ({first}); for the CUDA mode {how}, {REBUILD_HINT}"


class Tee:
    """Copies what the compilers write to file descriptors 1 and 2 into a buffer while it still
    reaches the terminal: the compiler runs in a subprocess, so sys.stdout cannot catch it."""

    def __init__(self, limit: int = 1 << 20):
        self.limit, self.chunks, self.saved, self.threads = limit, [], [], []

    def __enter__(self):
        import threading

        for fd in (1, 2):
            sys.stdout.flush() if fd == 1 else sys.stderr.flush()
            r, w = os.pipe()
            keep = os.dup(fd)
            os.dup2(w, fd)
            os.close(w)
            self.saved.append((fd, keep))
            t = threading.Thread(target=self._pump, args=(r, keep), daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def _pump(self, r: int, out: int) -> None:
        size = 0
        while True:
            data = os.read(r, 65536)
            if not data:
                break
            os.write(out, data)
            if size < self.limit:
                self.chunks.append(data)
                size += len(data)
        os.close(r)

    def __exit__(self, *exc):
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, keep in self.saved:
            os.dup2(keep, fd)  # closes the pipe's last write end: the pump sees EOF
        for t in self.threads:
            t.join(timeout=10)
        for _, keep in self.saved:
            os.close(keep)
        return False

    def text(self) -> str:
        return b"".join(self.chunks).decode(errors="replace")


def main() -> None:
    # Metadata-only invocations (egg_info for pip's dependency resolution) need no build decisions.
    if any(a in sys.argv for a in ("egg_info", "dist_info", "--name", "--version", "sdist")) and not any(
        a in sys.argv for a in ("build_ext", "bdist_wheel", "develop", "install", "editable_wheel")
    ):
        setup()
        return

    check_compiler()
    too_old = torch_too_old(import_torch().__version__)
    if too_old:
        fail(too_old)
    info = decide()
    if info["mode"] == "cuda":
        # torch.utils.cpp_extension reads CUDA_HOME when it is imported: set it first.
        os.environ["CUDA_HOME"] = info["cuda_home"]
    import torch
    from torch.utils.cpp_extension import BuildExtension, include_paths

    if info["mode"] == "cuda":
        os.environ["TORCH_CUDA_ARCH_LIST"] = info["arch_list"] = arch_list(torch)
    torch_include = include_paths()[0]
    ext = Extension("perfcore._C", language="c++", **extension_settings(info, torch_include))
    report(info)

    class BuildExt(BuildExtension.with_options(use_ninja=True)):
        """A CUDA-mode compile or link failure falls back to the CPU mode with one line, like the
        other reasons, so a pip install still gives a working perfcore. PERFCORE_CUDA_FALLBACK=0
        (scripts/setup.sh) keeps the failure, for whoever is changing the native code."""

        def build_extensions(self):
            if info["mode"] != "cuda" or os.environ.get("PERFCORE_CUDA_FALLBACK", "1") == "0":
                super().build_extensions()
                return
            tee = Tee()
            try:
                with tee:
                    super().build_extensions()
            except Exception as e:  # ninja's RuntimeError, distutils' CompileError/LinkError
                cpu = {
                    **info,
                    "mode": "cpu",
                    "reason": compile_failed_reason(e, tee.text()),
                    "cuda_home": None,
                    "toolkit_version": None,
                    "cupti": None,
                    "arch_list": None,
                    "nvcc_flags": [],
                }
                for k, v in extension_settings(cpu, torch_include).items():
                    setattr(ext, k, v)
                report(cpu, Path(self.build_lib) / "perfcore" / "_build_info.json")
                super().build_extensions()

    setup(ext_modules=[ext], cmdclass={"build_ext": BuildExt})


if __name__ == "__main__":
    main()
