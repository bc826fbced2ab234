"""Reading result files back, validated: run.json and steps.csv of a run folder, a rank's part, a sweep
folder. A missing, empty, truncated, corrupt, foreign or newer file raises BadResultFile, whose
message names the file and what is wrong with it (one line for the CLI), never a traceback."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfcore.analysis.attribution import LABELS
from perfcore.analysis.codec import BadDocument
from perfcore.analysis.migrate import CURRENT, migrate
from perfcore.errors import BadResultFile
from perfcore.shapes import ANY, INT, NUM, STR, Absent, Keys, Map, Opt, problem
from perfcore.untrusted import Refused, open_regular, read_file

if TYPE_CHECKING:
    from perfcore.analysis.command_results import SweepResult
    from perfcore.analysis.run_report import RunReport

__all__ = [
    "stage_document",
    "STAGE_DOCS",
    "read_json",
    "read_csv",
    "steps_file",
    "load_run",
    "load_part",
    "load_sweep",
    "parse_run",
]

# The most bytes a document perfcore writes holds (a 1M-step run.json is a few MB).
DOCUMENT_CAP = 256 << 20

STEP_COLUMNS = ("step", "wall_ms", "warmup", *(f"{lb}_ms" for lb in LABELS))


# A file a document names (run.json's `files`): a plain name inside its folder, never a path or a URL.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,199}")
# The fields of a part that name things: they become file names (steps_rank<N>.csv) and keys.
PART_NAMES = Keys(
    {
        "rank": Opt(INT),
        "pid": Opt(INT),
        "world_size": Opt(INT),
        "nested_in": Opt(INT),
        "host": Opt(STR),
        "started_by": Opt(STR),
    }
)


def is_plain_name(name: Any) -> bool:
    """A file name that stays in its folder and reads as a file, not a link elsewhere: no '/', no
    '..', no scheme ('javascript:'), no control character."""
    return isinstance(name, str) and bool(_PLAIN_NAME.fullmatch(name)) and ".." not in name


def _bad(path: Path, problem: str, exit_code: int, fix: str = "") -> BadResultFile:
    return BadResultFile(path, problem, fix, exit_code=exit_code)


def read_json(path: Path, kind: str, *, exit_code: int = 2) -> dict[str, Any]:
    """A perfcore document of `kind` (e.g. "perfcore.run"), checked for presence, syntax, kind and version."""
    path = Path(path)
    try:
        # Not through a link; a FIFO or a device would block the read, or never end it.
        raw = read_file(path, DOCUMENT_CAP, "perfcore document")
    except Refused as e:
        raise _bad(path, e.problem, exit_code) from None
    if not raw.strip():
        raise _bad(path, "is empty (the run was stopped while writing it?)", exit_code)
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise _bad(path, "is not text (corrupt or not a perfcore file)", exit_code)
    except json.JSONDecodeError as e:
        where = "truncated" if e.pos >= len(raw.rstrip()) - 1 else "corrupt"
        raise _bad(path, f"is {where}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})", exit_code)
    except RecursionError:
        raise _bad(path, "is corrupt: nested too deeply", exit_code)
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if not isinstance(schema, str):
        raise _bad(path, f"is not a perfcore document (no schema; expected {kind}/N)", exit_code)
    m = re.fullmatch(r"([\w.]+)/(\d+)", schema)
    if not m or m.group(1) != kind:
        raise _bad(path, f"is a {schema[:60]} document, not {kind}", exit_code)
    # The newest version of each document this perfcore reads (an older one goes through analysis.migrate).
    version, newest = int(m.group(2)), CURRENT.get(kind, 1)
    if version > newest:
        raise _bad(
            path,
            f"was written by a newer perfcore ({schema}; this one reads up to {kind}/{newest})",
            exit_code,
            "upgrade perfcore to read it",
        )
    return doc


def parse_run(doc: dict[str, Any], path: Path, *, exit_code: int = 2) -> "RunReport":
    """A run document (this version's, or an older one migrated) parsed into the typed run, every value
    checked on the way: a value of the wrong kind is one line naming it (exit_code)."""
    from perfcore.analysis.run_report import RunReport

    files = doc.get("files")
    if files is not None and (
        not isinstance(files, dict) or not all(is_plain_name(k) and is_plain_name(v) for k, v in files.items())
    ):
        raise _bad(path, "is corrupt: 'files' names something other than a plain file name in its folder", exit_code)
    return _parsed(RunReport, doc, path, exit_code)


def _parsed(cls: Any, doc: dict[str, Any], path: Path, exit_code: int) -> Any:
    """The result `cls` a document holds (this version's, or an older one migrated), every value checked;
    corrupt (exit_code) where it does not hold one."""
    try:
        return cls.from_dict(migrate(doc))
    except BadDocument as err:
        raise _bad(path, f"is corrupt: {err}", exit_code) from err
    except (TypeError, KeyError, ValueError, AttributeError) as err:  # an older document too damaged to migrate
        raise _bad(path, f"is corrupt: {type(err).__name__} while reading it", exit_code) from err


def read_csv(path: Path, columns: tuple[str, ...], *, exit_code: int = 2, limit_bytes: int | None = None):
    """A CSV with at least `columns`, every cell of them present and finite (a truncated last row is not).
    limit_bytes: read only that prefix (a file still being appended to when its writer died)."""
    import io

    import numpy as np
    import pandas as pd

    path = Path(path)
    try:
        fh = open_regular(path)
    except Refused as e:
        raise _bad(path, "missing" if e.missing else e.problem, exit_code) from None
    try:
        with fh:
            if limit_bytes is None:
                table = _read_in_chunks(fh, "gzip" if path.name.endswith(".gz") else None)
            else:
                # Never more than the file holds: read(n) sets aside n bytes first, and a damaged
                # checkpoint may claim any size.
                table = pd.read_csv(io.BytesIO(fh.read(min(limit_bytes, os.fstat(fh.fileno()).st_size))))
    except pd.errors.EmptyDataError:
        raise _bad(path, "is empty (the run was stopped while writing it?)", exit_code)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as e:
        raise _bad(path, f"is corrupt: {str(e).splitlines()[0][:120]}", exit_code)
    except OSError as e:
        raise _bad(path, f"cannot be read ({e.strerror or e})", exit_code)
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise _bad(path, f"has no column {missing[0]!r} (not a perfcore steps table?)", exit_code)
    for c in columns:
        col = table[c]
        if c == "warmup":
            if col.dtype != bool:
                words = col.astype(str).str.strip().str.lower()
                if not words.isin(["true", "false"]).all():
                    raise _bad(
                        path, f"is corrupt or truncated: column {c!r} holds values other than True/False", exit_code
                    )
                table[c] = words == "true"
            continue
        num = pd.to_numeric(col, errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(num)
        if bad.any():
            row = int(bad.nonzero()[0][0])
            raise _bad(path, f"is corrupt or truncated: row {row + 1} has no number in column {c!r}", exit_code)
        if c == "step":  # a step number stays an integer in what is written from the table
            if (num != np.round(num)).any():
                raise _bad(path, "is corrupt: column 'step' holds a non-integer", exit_code)
            num = num.astype(np.int64)
        table[c] = num
    return table


_READ_ROWS = 65536  # rows parsed at a time


def _read_in_chunks(fh, compression: str | None):
    """pd.read_csv(fh), parsed a slice of rows at a time and joined a column at a time: read whole,
    a 1M-row steps table (~100 MB) took ~300 MB while it was parsed."""
    import numpy as np
    import pandas as pd

    pieces: dict[str, list] = {}
    with pd.read_csv(fh, chunksize=_READ_ROWS, compression=compression) as reader:
        for chunk in reader:
            for c in chunk.columns:
                pieces.setdefault(c, []).append(chunk[c].to_numpy(copy=True))  # the chunk's blocks go with it
    cols = {}
    for c in list(pieces):
        parts = pieces.pop(c)
        cols[c] = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return pd.DataFrame(cols, copy=False)


def load_run(folder: Path, *, measured: bool = False, exit_code: int = 2):
    """(the run, typed; its steps table) of a run folder. measured=True: it must hold measured steps."""
    folder = Path(folder)
    if not folder.is_dir():
        raise BadResultFile(folder, "is not a folder", exit_code=exit_code)
    if not (folder / "run.json").exists():
        if (folder / "parts").is_dir():
            raise BadResultFile(
                folder,
                "holds a run that was not finished (no run.json, but the parts its processes wrote)",
                f"perfcore report {folder} finishes it",
                exit_code=exit_code,
            )
        raise BadResultFile(folder, "is not a perfcore run folder (no run.json)", exit_code=exit_code)
    doc = parse_run(
        read_json(folder / "run.json", "perfcore.run", exit_code=exit_code), folder / "run.json", exit_code=exit_code
    )
    if measured and (doc.steps == 0 or doc.step_time_ms.mean <= 0):
        raise BadResultFile(
            folder / "run.json",
            "holds no measured step (a run stopped during warm-up?)",
            "compare runs with at least one step after --warmup",
            exit_code=exit_code,
        )
    return doc, read_csv(steps_file(folder), STEP_COLUMNS, exit_code=exit_code)


def steps_file(folder: Path) -> Path:
    """A folder's steps table: steps.csv, or steps.csv.gz where a large run keeps it compressed."""
    plain = Path(folder) / "steps.csv"
    return plain if plain.exists() or not plain.with_name("steps.csv.gz").is_file() else plain.with_name("steps.csv.gz")


def summarize_checkpoint(doc: dict[str, Any], steps) -> dict[str, Any]:
    """A checkpoint's document completed from its rows (steps.csv, in ms): the step counts, step
    times, shares and verdict, as the finished process would have written them."""
    import numpy as np

    from perfcore.analysis.attribution import summarize

    full = steps.copy()  # read_csv has made warmup bool and the ms columns float
    for c in ("wall", *LABELS):
        full[f"{c}_ns"] = np.rint(full[f"{c}_ms"].to_numpy() * 1e6).astype(np.int64)
    device = str(doc.get("device", "cpu"))
    return {**doc, **summarize(full, on_gpu=device != "cpu", backend=str(doc.get("backend", "host")), device=device)}


def load_part(folder: Path, run_table: Path | None = None) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    """(document, steps table, raw trace arrays) of one process's part (parts/<key>/), written by the
    instrumented process. A part that saw no complete step has no steps.csv: its table is empty.
    run_table: where the run folder keeps its steps table, read when the part's run.json says finishing
    handed its table over to the run (a large table is kept once). The caller names that place, never
    the document. Problems here are perfcore's or the disk's, not the user's argument: exit code 1."""
    import numpy as np
    import pandas as pd

    folder = Path(folder)
    doc = migrate(read_json(folder / "run.json", "perfcore.run", exit_code=1))
    p = (
        problem(doc.get("steps", 0), INT, "steps")
        or problem(doc.get("warmup_steps", 0), INT, "warmup_steps")
        or problem(doc, PART_NAMES, "part")
    )
    if p:
        raise _bad(folder / "run.json", f"is corrupt: {p}", 1)
    # Integers from here on: a rank becomes part of a file name (steps_rank<N>.csv).
    doc.update({k: int(doc[k]) for k in ("rank", "pid", "world_size", "nested_in") if doc.get(k) is not None})
    table = steps_file(folder)
    if not table.exists() and doc.get("steps_table") == "run" and run_table is not None:
        table = run_table
    declared = doc.get("steps", 0) + doc.get("warmup_steps", 0)
    if declared == 0 and not table.exists():
        return doc, pd.DataFrame({c: pd.Series(dtype=bool if c == "warmup" else float) for c in STEP_COLUMNS}), {}
    checkpoint = doc["checkpoint"] if isinstance(doc.get("checkpoint"), dict) else None
    if checkpoint is None:
        parse_run(doc, folder / "run.json", exit_code=1)
    if checkpoint is not None and checkpoint.get("table") == CHECKPOINT_TABLE:
        steps = read_checkpoint_table(folder / CHECKPOINT_TABLE, checkpoint, declared)
    else:  # a part's steps.csv, or a checkpoint written as CSV by an earlier version
        vouched = (checkpoint or {}).get("csv_bytes")
        steps = read_csv(
            table,
            STEP_COLUMNS,
            exit_code=1,
            limit_bytes=vouched if isinstance(vouched, int) and vouched > 0 else None,
        )
    if checkpoint is not None:
        # A checkpoint's run.json says what its steps.csv holds; the figures come from the rows.
        doc = summarize_checkpoint(doc, steps)
        parse_run(doc, folder / "run.json", exit_code=1)
    raw: dict[str, Any] = {}
    trace = folder / "trace.npz"
    if trace.is_file():
        try:
            with open_regular(trace) as fh, np.load(fh, allow_pickle=False) as z:
                raw = {k: z[k] for k in z.files}
        except Refused as e:
            raise _bad(trace, e.problem, 1) from None
        except (OSError, ValueError, EOFError) as e:
            raise _bad(trace, f"is corrupt or truncated ({str(e).splitlines()[0][:80]})", 1)
        except Exception as e:  # zipfile.BadZipFile and kin: a half-written archive
            raise _bad(trace, f"is corrupt or truncated ({type(e).__name__})", 1)
    return doc, steps, raw


# A checkpoint's table of whole ns (run.child.progress writes it): its name, and the most columns it may claim.
CHECKPOINT_TABLE = "steps.i64"
_MAX_TABLE_COLUMNS = 4096


def read_checkpoint_table(path: Path, checkpoint: dict[str, Any], declared_rows: int):
    """A checkpoint's steps as steps.csv would read: int64 rows of the columns its run.json names, each
    "i" (an integer), "ms" (whole ns, as ms) or "b" (a 0/1 flag). The table is untrusted: opened without
    following a link, a regular file of one name (no hard link), and read only as far as its run.json
    vouches (table_bytes: whole rows, no more rows than the steps and warm-up steps it declares), never past
    the file's end (a row cut short by a kill is left out) nor across a hole (a sparse file is no table
    perfcore wrote).
    Exit 1 where the table or its description is damaged, in one line."""
    import numpy as np
    import pandas as pd

    doc_path = path.with_name("run.json")  # the document that describes the table
    cols, kinds = checkpoint.get("columns"), checkpoint.get("kinds")
    shape_ok = (
        isinstance(cols, list)
        and isinstance(kinds, list)
        and 0 < len(cols) == len(kinds) <= _MAX_TABLE_COLUMNS
        and all(isinstance(c, str) for c in cols)
        and len(set(cols)) == len(cols)
        and all(k in ("i", "ms", "b") for k in kinds)
    )
    if not shape_ok:
        raise _bad(doc_path, "is corrupt: its checkpoint does not describe its table", 1)
    missing = [c for c in STEP_COLUMNS if c not in cols]
    if missing:
        raise _bad(doc_path, f"is corrupt: its checkpoint's table has no column {missing[0]!r}", 1)
    width = 8 * len(cols)
    vouched = checkpoint.get("table_bytes")
    if vouched is None:
        raise _bad(doc_path, "is corrupt: its checkpoint does not say how much of its table is its", 1)
    if isinstance(vouched, bool) or not isinstance(vouched, int) or vouched < 0 or vouched % width:
        raise _bad(doc_path, "is corrupt: its checkpoint vouches for no whole rows of its table", 1)
    if vouched // width > declared_rows:
        raise _bad(
            doc_path,
            f"is corrupt: its checkpoint's table claims {vouched // width} rows for {declared_rows} steps",
            1,
        )
    try:
        fh = open_regular(path)
    except Refused as e:
        raise _bad(path, e.problem, 1) from None
    try:
        with fh:
            st = os.fstat(fh.fileno())
            if st.st_nlink != 1:
                # Another name for a file elsewhere (a hard link to a secret): its bytes would come back as
                # exact step values. perfcore's table has one name.
                raise _bad(path, f"has {st.st_nlink} names (a hard link, not a table perfcore wrote); not read", 1)
            nbytes = min(vouched, st.st_size) // width * width
            if _first_hole(fh.fileno()) < nbytes:
                raise _bad(path, "has holes (a sparse file, not a table perfcore wrote); not read", 1)
            cells = np.frombuffer(fh.read(nbytes), dtype="<i8").reshape(-1, len(cols))
    except OSError as e:
        raise _bad(path, f"cannot be read ({e.strerror or e})", 1) from None
    out = {}
    for j, (c, k) in enumerate(zip(cols, kinds)):
        v = cells[:, j]
        out[c] = v / 1e6 if k == "ms" else (v != 0) if k == "b" else v.astype(np.int64)
    return pd.DataFrame(out)


def _first_hole(fd: int) -> int:
    """Where the file's first hole begins (its size when it has none, or the system cannot say)."""
    try:
        return os.lseek(fd, 0, getattr(os, "SEEK_HOLE", 4))
    except OSError:
        return os.fstat(fd).st_size
    finally:
        os.lseek(fd, 0, os.SEEK_SET)


SWEEP_REQUIRED = {
    "workload": STR,
    "steps": INT,
    "grid": Map([ANY]),
    "configs": [
        {
            "batch_size": INT,
            "num_workers": INT,
            "pin_memory": ANY,
            "prefetch_factor": Opt(INT),
            "status": STR,
            "step_ms": Opt(NUM),
            "samples_per_s": Opt(NUM),
        }
    ],
    "best": Absent(Opt(Keys({"samples_per_s": Opt(NUM)}))),
}


def load_sweep(folder: Path) -> "SweepResult":
    """The result sweep.json of a sweep folder holds (to continue it): every configuration row checked."""
    path = Path(folder) / "sweep.json"
    return _typed(path, read_json(path, "perfcore.sweep"))


# The documents of the folders the triage commands write, and their kinds (a demo folder's run.json is read
# as a run).
STAGE_DOCS = (
    ("demo.json", "perfcore.experiments.demo"),
    ("health.json", "perfcore.health"),
    ("diagnose.json", "perfcore.diagnose"),
    ("sweep.json", "perfcore.sweep"),
)


def stage_document(folder: Path, names: tuple[str, ...] | None = None) -> tuple[str, Any] | None:
    """(file name, the command's result it holds) of the first stage document the folder holds (of `names`,
    by default every one in STAGE_DOCS), or None. Corrupt (exit 2) where it does not hold one."""
    for name, kind in STAGE_DOCS:
        if (names is None or name in names) and (Path(folder) / name).exists():
            return name, _typed(Path(folder) / name, read_json(Path(folder) / name, kind))
    return None


def _typed(path: Path, doc: dict[str, Any]) -> Any:
    """The command's result a document holds; a sweep's configuration rows checked first, each named where it
    breaks (exit 2)."""
    from perfcore.analysis.command_results import DemoResult, DiagnoseResult, HealthResult, SweepResult

    typed = {
        "perfcore.health": HealthResult,
        "perfcore.diagnose": DiagnoseResult,
        "perfcore.sweep": SweepResult,
        "perfcore.experiments.demo": DemoResult,
    }
    kind = str(doc.get("schema")).split("/")[0]
    for k, shape in SWEEP_REQUIRED.items() if kind == "perfcore.sweep" else ():
        p = problem(doc[k], shape, k) if k in doc else None if isinstance(shape, Absent) else f"{k} is missing"
        if p:
            raise _bad(path, f"is corrupt: {p}", 2)
    return _parsed(typed[kind], doc, path, 2)
