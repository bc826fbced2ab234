"""The golden corpus in tests/golden/: run folders that real perfcore commands made, and what each command
prints and writes when it reads them back, locked, so that a change to how results are modelled and said
shows every output it changes.

    python scripts/golden.py check    render every folder and compare with the locked outputs (diffs shown)
    python scripts/golden.py update   lock what the current code renders (a deliberate change: list it)
    python scripts/golden.py make     make the folders again with the commands in CASES (the README's
                                      table is written from them), then lock their renders

Run it with this checkout's perfcore: PYTHONPATH=<checkout> python scripts/golden.py check.
`make` runs the commands in WORK, with copies of the scripts they run, and renders there too: the
terminal names a user's file relative to the current folder, so that folder is part of each render.
"""

from __future__ import annotations

import argparse
import difflib
import html.parser
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "golden"
RUNS = GOLDEN / "runs"
EXPECTED = GOLDEN / "expected"
README = GOLDEN / "README.md"
REPORT_DOCS = REPO / "tests" / "report_docs"
# Where the commands ran and where renders run: a fixed folder, so a site reads as the user saw it.
WORK = Path("/tmp/perfcore-golden")


@dataclass(frozen=True)
class Case:
    """One folder of the corpus: the perfcore command that made it (its arguments after `perfcore`, split as
    a shell splits them; OUT is its folder, python this Python), what it is for, the exit code the command
    gives, and the environment it ran with."""

    name: str
    command: str
    purpose: str
    exit_code: int = 0
    env: dict[str, str] = field(default_factory=dict)


TORCHRUN = "run --warmup 3 --out OUT -- python -m torch.distributed.run --nproc_per_node 2 ddp_train.py --slow-rank 1"
CASES: tuple[Case, ...] = (
    Case("demo", "demo --quick --out OUT", "the demo: health, run and diagnose in one folder"),
    Case(
        "input_pil",
        "run --out OUT -- python pil_decode.py",
        "input-bound: PIL decode in the main process; the user's __getitem__ line named",
    ),
    Case(
        "input_workers2",
        "run --out OUT -- python slow_getitem.py --epochs 2 --workers 2",
        "input-bound with 2 workers, short epochs, 2 micro-batches a step (compare's B)",
    ),
    Case(
        "input_workers0",
        "run --out OUT -- python slow_getitem.py --epochs 2 --workers 0",
        "the same script with its loader in the main process (compare's A)",
    ),
    Case(
        "compute_adamw",
        "run --out OUT -- python mlp_adamw.py",
        "compute-bound: an MLP whose AdamW step is half the step (the fused-optimizer advice)",
    ),
    Case(
        "host_metrics",
        "run --out OUT -- python host_metrics.py",
        "host-bound: per-sample .item() metrics; the sampled line and the sync calls counted",
    ),
    Case(
        "hogwild",
        "run --out OUT -- python hogwild.py 2 fork",
        "Hogwild: 2 forked trainers merged as one run, the parent's evaluation apart",
    ),
    Case(
        "ddp_load_straggler",
        f"{TORCHRUN} --delay 0.0025",
        "torchrun, 2 gloo ranks; rank 1 loads slower: a straggler by its load (merge's source)",
    ),
    Case(
        "ddp_compute_straggler",
        f"{TORCHRUN} --delay 0 --compute-delay 0.02",
        "torchrun, 2 gloo ranks; rank 1 computes 20 ms longer: the straggler verdict",
    ),
    Case(
        "crash",
        "run --out OUT -- python crash_after.py 30",
        "a script that raises at batch 30: partial results, the script's exit code",
        exit_code=1,
    ),
    Case(
        "interrupted",
        "run --out OUT -- python ctrl_c.py",
        "Ctrl-C after 21 steps (a bare KeyboardInterrupt): the partial run, exit 130",
        exit_code=130,
    ),
    Case(
        "steps_limit",
        "run --steps 20 --out OUT -- python tiny_loop.py 1000",
        "--steps 20: recording stops after 20 measured steps and the loop is ended",
    ),
    Case(
        "warmup_only",
        "run --out OUT -- python tiny_loop.py 3",
        "a run that ended in warm-up (3 steps, warm-up 5): no measured step",
    ),
    Case(
        "steps_100k",
        "run --out OUT -- python tiny_loop.py 100000",
        "100k steps: steps.csv.gz, binned plots and charts",
    ),
    Case(
        "eval_passes",
        "run --out OUT -- python eval_every.py",
        "evaluation every 8 steps (model.eval(), no_grad), kept out of training",
    ),
    Case("gan", "run --out OUT -- python gan.py", "a GAN: two optimizers, one training step"),
    Case(
        "inference",
        "run --out OUT -- python infer.py",
        "batch inference (no optimizer): steps from the top-level forward",
    ),
    Case(
        "health",
        "health --steps 30 --out OUT workload_factories.py:slow_loader",
        "health of a factory workload",
    ),
    Case(
        "diagnose_script",
        "diagnose --steps 10 --warmup 2 --out OUT -- python train_meter.py --delay 0.003 --epochs 3",
        "diagnose of an unmodified script: its experiments run as `perfcore run`s",
        env={"OMP_NUM_THREADS": "1"},
    ),
    Case(
        "sweep",
        "sweep --batch-size 8,16 --num-workers 0,2 --pin-memory false --prefetch-factor 2 --steps 5 --warmup 1 "
        "--out OUT workload_factories.py:slow_loader",
        "a 2x2 sweep of a factory workload",
    ),
)
# (A, B) of `perfcore compare A B`, and the folder whose rank parts `perfcore merge` joins as two nodes' folders.
COMPARES = (("input_workers0", "input_workers2"), ("ddp_load_straggler", "ddp_compute_straggler"))
MERGE = "ddp_load_straggler"
# The scripts the commands run, copied into WORK (tests/ paths).
SCRIPTS = (
    "scripts/pil_decode.py",
    "realworld/slow_getitem.py",
    "scripts/mlp_adamw.py",
    "scripts/host_metrics.py",
    "scripts/hogwild.py",
    "scripts/ddp_train.py",
    "scripts/crash_after.py",
    "scripts/ctrl_c.py",
    "scripts/tiny_loop.py",
    "scripts/eval_every.py",
    "scripts/gan.py",
    "scripts/infer.py",
    "scripts/train_meter.py",
    "workload_factories.py",
)
# tests/report_docs' documents, each in a folder as a command writes it (the name it has there); a run.json
# without a steps table is not a folder `perfcore report` reads, so those two are not here.
DOC_FOLDERS = {
    "docs_health": {"health.json": "health.json"},
    "docs_diagnose": {"diagnose.json": "diagnose.json"},
    "docs_sweep": {"sweep.json": "sweep.json"},
}
# What a folder keeps: the files the renderers read back. The rest (trace.json, PNGs, report.html, monitor
# and worker files, parquet) is written when a command finishes and read by no renderer; `make` checks this
# by rendering each folder whole and pruned.
KEEP = (
    ".perfcore-folder.json",
    "run.json",
    "steps.csv",
    "steps.csv.gz",
    "demo.json",
    "health.json",
    "diagnose.json",
    "sweep.json",
    "summary.md",
)
KEEP_PARTS = ("run.json", "steps.csv", "steps.csv.gz")  # of parts/<key>/, where merge reads them


# ---- what varies between renders, and only that


def normalise(text: str, tmp: Path) -> str:
    """A render with what must vary replaced: the temporary folder renders run in (<TMP>), the time a page
    was written (<TIME>) and perfcore's version (<VERSION>)."""
    from perfcore import __version__

    text = text.replace(str(tmp), "<TMP>")
    text = re.sub(r"written by perfcore at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "written by perfcore at <TIME>", text)
    return text.replace(f"perfcore {__version__}", "perfcore <VERSION>") if __version__ else text


class _Visible(html.parser.HTMLParser):
    """A page's text as a reader sees it, in document order: no script, style or title (a tooltip's or the
    tab's); a block element ends a line; a table's cells are joined by ' | '; a span or a chip is a word."""

    HIDDEN = {"script", "style", "title", "template"}
    BLOCKS = {
        "p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "li", "ul", "ol", "table", "section",
        "details", "summary", "pre", "br", "hr", "figure", "figcaption", "header", "footer", "dl", "dt",
        "dd", "blockquote", "svg", "text", "caption",
    }  # fmt: skip
    # Inline boxes a page sets apart by their style (a figure and its caption, a legend's chips): a space.
    BOXES = {"span", "i"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self.line: list[str] = []
        self.hidden = 0
        self.pre = 0

    def _end_line(self) -> None:
        text = "".join(self.line)
        text = text if self.pre else " ".join(text.split())
        if text.strip():
            self.lines.append(text.rstrip())
        self.line = []

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in self.HIDDEN:
            self.hidden += 1
        elif tag in self.BLOCKS:
            self._end_line()
            self.pre += tag == "pre"
        elif tag in ("td", "th") and self.line and "".join(self.line).strip():
            self.line.append(" | ")
        elif tag in self.BOXES:
            self.line.append(" ")

    def handle_startendtag(self, tag: str, attrs) -> None:
        if tag in ("br", "hr"):
            self._end_line()

    def handle_endtag(self, tag: str) -> None:
        if tag in self.HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag in self.BLOCKS:
            self._end_line()
            self.pre -= tag == "pre" and self.pre > 0
        elif tag in self.BOXES:
            self.line.append(" ")

    def handle_data(self, data: str) -> None:
        if self.hidden:
            return
        if self.pre:
            for i, part in enumerate(data.split("\n")):
                if i:
                    self._end_line()
                self.line.append(part)
        else:
            self.line.append(data)


def visible_text(page: str) -> str:
    """report.html's visible text, a line per block."""
    p = _Visible()
    p.feed(page)
    p.close()
    p._end_line()
    title = re.search(r"<title>(.*?)</title>", page, re.S)
    head = [f"title: {html.unescape(title.group(1))}"] if title else []
    return "\n".join(head + p.lines) + "\n"


# ---- rendering a folder


@contextmanager
def _in_work() -> Iterator[None]:
    WORK.mkdir(parents=True, exist_ok=True)
    before = os.getcwd()
    os.chdir(WORK)
    try:
        yield
    finally:
        os.chdir(before)


def _invoke(*args: str) -> str:
    """A command's terminal output (stdout and stderr as they interleave) and its exit code, in-process."""
    from click.testing import CliRunner

    from perfcore.cli import cli

    # PERFCORE_DEBUG left in a shell would add tracebacks to a failing command's line.
    res = CliRunner().invoke(cli, list(args), prog_name="perfcore", env={"PERFCORE_DEBUG": None})
    text = res.output
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        text += f"[raised {type(res.exception).__name__}: {res.exception}]\n"
    return text + f"[exit {res.exit_code}]\n"


def _page(path: Path) -> str:
    return visible_text(path.read_text(encoding="utf-8")) if path.is_file() else "[no page written]\n"


def _summary(folder: Path) -> str:
    import perfcore

    try:
        return json.dumps(perfcore.summary(folder), indent=1) + "\n"
    except Exception as err:  # a folder summary() cannot read: what it says is the output
        return f"[raised {type(err).__name__}: {err}]\n"


def demo_markdown(folder: Path) -> str:
    """summary.md from a demo folder's documents, as `perfcore demo` writes it. The image count is the one
    fact of the workload line the folder does not hold: the built-in demo's."""
    import inspect

    from perfcore.analysis.command_results import DemoWorkload
    from perfcore.report.summary import demo_markdown as markdown
    from perfcore.analysis.reader import stage_document
    from perfcore.workloads.builtin import demo

    _, doc = stage_document(folder, ("demo.json",))
    run = doc.run
    loader = run.loaders[0]
    images = inspect.signature(demo).parameters["count"].default
    workload = DemoWorkload(
        run.workload or "demo", images, loader.decoder, loader.batch_size, loader.num_workers, run.device
    )
    return markdown(workload, doc.health, run, doc.diagnose)


def render_folder(folder: Path) -> dict[str, str]:
    """Every output a folder's readers make: the short report, --explain, report.html's text as `report
    --html` writes it, perfcore.summary() where it holds a run.json, and the demo's summary.md. Renders run
    on the folder given (`report` writes its plots and page into it): pass a copy."""
    out = {
        "report.txt": _invoke("report", str(folder)),
        "explain.txt": _invoke("report", str(folder), "--explain"),
    }
    (folder / "report.html").unlink(missing_ok=True)
    _invoke("report", str(folder), "--html")
    out["html.txt"] = _page(folder / "report.html")
    if (folder / "run.json").is_file():
        out["summary.json"] = _summary(folder)
    if (folder / "demo.json").is_file():
        out["summary.md"] = demo_markdown(folder)
    return out


def render_compare(a: Path, b: Path, tmp: Path) -> dict[str, str]:
    """`perfcore compare A B`, and the text of the page its --html writes."""
    page = tmp / "compare.html"
    out = {"compare.txt": _invoke("compare", str(a), str(b))}
    _invoke("compare", str(a), str(b), "--html", str(page))
    out["compare_html.txt"] = _page(page)
    return out


def render_merge(folder: Path, tmp: Path) -> dict[str, str]:
    """`perfcore merge` of a run's rank parts as two nodes wrote them (one node's folder per rank), then what
    the merged folder renders."""
    nodes = []
    for part in sorted((folder / "parts").glob("rank*")):
        node = tmp / f"node_{part.name}"
        shutil.copytree(part, node / "parts" / part.name)
        nodes.append(str(node))
    merged = tmp / "merged"
    out = {"merge.txt": _invoke("merge", *nodes, "--out", str(merged))}
    out.update({f"merged_{k}": v for k, v in render_folder(merged).items()})
    return out


def _sources() -> dict[str, Path]:
    """Each corpus folder by its name in expected/: the cases', then report_docs' folders."""
    found = {c.name: RUNS / c.name for c in CASES}
    found.update({name: REPORT_DOCS for name in DOC_FOLDERS})
    return found


def _copy(name: str, src: Path, tmp: Path) -> Path:
    dst = tmp / name
    if name in DOC_FOLDERS:
        dst.mkdir()
        (dst / ".perfcore-folder.json").write_text("{}")
        for file, as_name in DOC_FOLDERS[name].items():
            shutil.copyfile(src / file, dst / as_name)
    else:
        shutil.copytree(src, dst)
    return dst


def render_all(names: list[str] | None = None) -> dict[str, dict[str, str]]:
    """{case: {output file: normalised text}} for the corpus, or for the cases named (compare and merge
    renders are named compare_<A>__<B> and merge_<folder>)."""
    wanted = set(names or case_names())
    rendered: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="golden-") as t, _in_work():
        tmp = Path(t).resolve()
        for name, src in _sources().items():
            if name in wanted:
                rendered[name] = render_folder(_copy(name, src, _fresh(tmp / "folders")))
        for a, b in COMPARES:
            key = f"compare_{a}__{b}"
            if key in wanted:
                where = _fresh(tmp / key)
                rendered[key] = render_compare(_copy(a, RUNS / a, where), _copy(b, RUNS / b, where), where)
        key = f"merge_{MERGE}"
        if key in wanted:
            where = _fresh(tmp / key)
            rendered[key] = render_merge(_copy(MERGE, RUNS / MERGE, where), where)
        return {name: {k: normalise(v, tmp) for k, v in outs.items()} for name, outs in rendered.items()}


def _fresh(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    return folder


def case_names() -> list[str]:
    return [*_sources(), *(f"compare_{a}__{b}" for a, b in COMPARES), f"merge_{MERGE}"]


def locked(name: str) -> dict[str, str]:
    folder = EXPECTED / name
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.iterdir())} if folder.is_dir() else {}


def diffs(name: str, got: dict[str, str]) -> list[str]:
    """Unified diffs of one case's renders against its locked outputs (an output missing on either side too)."""
    want = locked(name)
    out = []
    for key in sorted(set(want) | set(got)):
        a, b = want.get(key), got.get(key)
        if a == b:
            continue
        out.append(
            "".join(
                difflib.unified_diff(
                    (a or "").splitlines(keepends=True),
                    (b or "").splitlines(keepends=True),
                    f"locked/{name}/{key}" if a is not None else "(not locked)",
                    f"rendered/{name}/{key}" if b is not None else "(not rendered)",
                )
            )
        )
    return out


def write_locked(rendered: dict[str, dict[str, str]]) -> None:
    for name, outs in rendered.items():
        folder = EXPECTED / name
        if folder.is_dir():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for key, text in outs.items():
            (folder / key).write_text(text, encoding="utf-8")


# ---- making the folders


def _argv(case: Case, out: Path) -> list[str]:
    words = {"OUT": str(out), "python": sys.executable}
    return [words.get(w, w) for w in shlex.split(case.command)]


def _prune(folder: Path, parts: bool) -> None:
    """Leave the files KEEP names, and with parts=True the ranks' parts (KEEP_PARTS of each) merge joins."""
    for p in sorted(folder.iterdir()):
        if p.is_dir() and p.name == "parts" and parts:
            for part in p.iterdir():
                if not part.name.startswith("rank"):  # the launcher's part (torchrun's own process)
                    shutil.rmtree(part)
                    continue
                for f in part.iterdir():
                    if f.name not in KEEP_PARTS:
                        f.unlink() if f.is_file() else shutil.rmtree(f)
        elif p.is_dir():
            shutil.rmtree(p)
        elif p.name not in KEEP:
            p.unlink()


def make(names: list[str] | None, log: Callable[[str], None] = print) -> None:
    """Run each case's command in WORK (copies of its scripts there), prune its folder to what the renderers
    read (checking that the renders do not change), and put it in tests/golden/runs/."""
    WORK.mkdir(parents=True, exist_ok=True)
    for rel in SCRIPTS:
        shutil.copyfile(REPO / "tests" / rel, WORK / Path(rel).name)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for case in CASES:
        if names and case.name not in names:
            continue
        out = WORK / "runs" / case.name
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(exist_ok=True)
        t0 = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-m", "perfcore", *_argv(case, out)],
            cwd=WORK,
            env={**env, **case.env},
            capture_output=True,
            text=True,
            timeout=900,
        )
        log(f"{case.name}: exit {p.returncode} in {time.perf_counter() - t0:.0f} s")
        if p.returncode != case.exit_code:
            raise SystemExit(f"{case.name}: exit {p.returncode}, expected {case.exit_code}\n{p.stderr[-3000:]}")
        whole = {k: normalise(v, out.parent) for k, v in _render_copy(case.name, out).items()}
        _prune(out, parts=case.name == MERGE)
        pruned = {k: normalise(v, out.parent) for k, v in _render_copy(case.name, out).items()}
        changed = [k for k in whole if _files_unsaid(whole[k]) != _files_unsaid(pruned.get(k, ""))]
        if changed:
            raise SystemExit(f"{case.name}: pruning changed {changed}: a renderer reads a file KEEP leaves out")
        if case.name == "demo" and (out / "summary.md").read_text() != pruned["summary.md"]:
            raise SystemExit("demo: summary.md rendered from the folder is not the one the demo wrote")
        dst = RUNS / case.name
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(out, dst)
    write_readme()


def _files_unsaid(text: str) -> str:
    # A triage folder's page links the files it finds beside its document: pruning changes that line alone.
    return re.sub(r"\nFiles\n[^\n]*", "\nFiles\n", text)


def _render_copy(name: str, folder: Path) -> dict[str, str]:
    # Rendered in a copy named as the folder is (the page and the terminal name it): renders write into it.
    with tempfile.TemporaryDirectory(prefix="golden-") as t, _in_work():
        dst = Path(t) / "x" / name
        shutil.copytree(folder, dst)
        return {k: v.replace(str(dst.parent), str(folder.parent)) for k, v in render_folder(dst).items()}


README_START = "<!-- cases: written by scripts/golden.py make from its CASES -->"
README_END = "<!-- end of cases -->"


def cases_table() -> str:
    rows = [f"| folder | command (run in {WORK}) | what it is for |", "|---|---|---|"]
    for c in CASES:
        env = "".join(f"{k}={v} " for k, v in c.env.items())
        code = f" (exit {c.exit_code})" if c.exit_code else ""
        rows.append(f"| `{c.name}` | `{env}perfcore {c.command}`{code} | {c.purpose} |")
    return "\n".join(rows)


def write_readme() -> None:
    text = README.read_text()
    start, end = text.index(README_START), text.index(README_END)
    README.write_text(text[: start + len(README_START)] + "\n\n" + cases_table() + "\n\n" + text[end:])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("check", "update", "make"))
    ap.add_argument("cases", nargs="*", help="only these cases (default: all)")
    args = ap.parse_args(argv)
    unknown = sorted(set(args.cases) - set(case_names()))
    if unknown:
        ap.error(f"no case {', '.join(unknown)}; the cases: {', '.join(case_names())}")
    names = args.cases or None
    if args.what == "make":
        make(names)
        if names:  # a compare or merge of a folder made again renders anew too
            names += [f"compare_{a}__{b}" for a, b in COMPARES if {a, b} & set(names)]
            names += [f"merge_{MERGE}"] if MERGE in names else []
    rendered = render_all(names)
    if args.what in ("update", "make"):
        write_locked(rendered)
        print(f"locked {sum(map(len, rendered.values()))} outputs of {len(rendered)} cases in {EXPECTED}")
        return 0
    failed = 0
    for name, got in rendered.items():
        for d in diffs(name, got):
            failed += 1
            print(d)
    print(f"{failed} output(s) differ" if failed else f"all {len(rendered)} cases render as locked")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
