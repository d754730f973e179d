"""Build cqlcdc's wheel, install it into a fresh virtual environment and use it from there
(``make wheel-check``, part of ``make test``).

Why: the test suite imports cqlcdc from ``src/`` (an editable install), so it cannot see what a
normal ``pip install`` leaves out: a subpackage without ``__init__.py`` (``cqlcdc.remote``,
which ``--connect`` imports) ships only while setuptools' discovery takes namespace packages,
a module or data file a packaging rule misses is never imported by the tests, and a build
warning today is a failed build later. This check:

1. builds the wheel with pip from a fresh copy of what the build reads (``pyproject.toml``,
   the readme and license files it names, ``src/``), so no ``build/`` left by an earlier
   build can put back a file setuptools no longer finds, and fails if the build backend warns;
2. installs it with ``--no-deps`` into a new venv that sees the project venv's installed
   dependencies through a ``.pth`` file (fast and offline; the project venv's own cqlcdc is
   an editable install whose ``.pth`` hooks a ``.pth`` line does not run, and each module's
   file is checked to be the wheel's);
3. checks every file of ``src/cqlcdc`` is in the installed package, that every directory
   holding modules is a regular package (``__init__.py``), and that the wheel's metadata
   carries the license ``pyproject.toml`` declares, with its files;
4. imports every module of the INSTALLED package (``pkgutil.walk_packages``) and runs the
   installed ``cqlcdc --help``.

Usage: ``python tests/wheel_check.py`` (exit status 0 when the wheel is whole).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "cqlcdc"
# lines of the build's output that mean setuptools (or another backend) warned
WARNING_MARKERS = ("Warning:", "!!")
# run inside the fresh venv: import every installed module, say where each came from
WALK = """
import importlib, json, pkgutil, sys
import cqlcdc
found = {"cqlcdc": cqlcdc.__file__}
for info in pkgutil.walk_packages(cqlcdc.__path__, "cqlcdc."):
    found[info.name] = importlib.import_module(info.name).__file__
print(json.dumps(found))
"""


class WheelCheckError(Exception):
    """The wheel is not whole (or could not be built): the message says what is wrong."""


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run ``command``; its combined output, or a WheelCheckError with it."""
    done = subprocess.run(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if done.returncode != 0:
        raise WheelCheckError(
            f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-4000:]}"
        )
    return done.stdout


def source_modules(src: Path) -> tuple[set[str], list[str]]:
    """The module names of the package's source tree, and its directories that hold modules
    but are not regular packages (pkgutil does not walk them, and setuptools' discovery
    without namespaces leaves them out of the wheel)."""
    names: set[str] = set()
    not_packages: list[str] = []
    for path in sorted((src / PACKAGE).rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = path.relative_to(src).with_suffix("").parts
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
        if not (path.parent / "__init__.py").exists():
            not_packages.append(str(path.parent.relative_to(ROOT)))
    return names, sorted(set(not_packages))


def source_files(src: Path) -> set[Path]:
    """Every file of the package's source tree (modules and data such as ``py.typed``),
    relative to ``src``."""
    return {
        p.relative_to(src)
        for p in (src / PACKAGE).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def build_wheel(work: Path) -> Path:
    """The wheel built by pip from a fresh copy of the build's inputs."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    tree = work / "tree"
    tree.mkdir()
    for name in ["pyproject.toml", project["readme"], *project["license-files"]]:
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(
        ROOT / "src",
        tree / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"),
    )
    out = work / "dist"
    log = run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(out), str(tree)],
        cwd=work,
    )
    warned = [line.strip() for line in log.splitlines() if any(m in line for m in WARNING_MARKERS)]
    if warned:
        raise WheelCheckError("the wheel's build warned:\n" + "\n".join(warned[:20]))
    wheels = list(out.glob(f"{PACKAGE}-*.whl"))
    if len(wheels) != 1:
        raise WheelCheckError(f"expected one {PACKAGE} wheel in {out}, found {wheels}")
    return wheels[0]


def fresh_venv(work: Path) -> tuple[Path, Path]:
    """A new venv (no pip of its own) whose ``.pth`` adds the project venv's site-packages
    after its own: the interpreter and its site-packages."""
    venv = work / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=work)
    python = venv / "bin" / "python"
    site = Path(
        run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], work)
        .strip()
        .splitlines()[-1]
    )
    deps = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (site / "_project_dependencies.pth").write_text("".join(f"{d}\n" for d in sorted(deps)))
    return python, site


def check_license(site: Path) -> None:
    """The installed wheel's metadata names pyproject's license (an SPDX expression) and
    carries each of its ``license-files``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    infos = list(site.glob(f"{PACKAGE}-*.dist-info"))
    if len(infos) != 1:
        raise WheelCheckError(f"expected one {PACKAGE} .dist-info in {site}, found {infos}")
    metadata = Parser().parsestr((infos[0] / "METADATA").read_text())
    if metadata["License-Expression"] != project["license"]:
        raise WheelCheckError(
            f"the wheel's License-Expression is {metadata['License-Expression']!r}, "
            f"pyproject declares {project['license']!r}"
        )
    for name in project["license-files"]:
        if not (infos[0] / "licenses" / name).is_file():
            raise WheelCheckError(f"the wheel does not carry the license file {name}")


def check(work: Path) -> list[str]:
    """Build, install and use the wheel; the report's lines (raises WheelCheckError)."""
    src = ROOT / "src"
    expected, not_packages = source_modules(src)
    if not_packages:
        raise WheelCheckError(
            "directories with modules but no __init__.py (not packaged): " + ", ".join(not_packages)
        )
    wheel = build_wheel(work)
    python, site = fresh_venv(work)
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    run([*pip, "install", "-q", "--no-deps", "--no-index", str(wheel)], cwd=work)
    installed = site / PACKAGE
    missing_files = sorted(str(f) for f in source_files(src) if not (site / f).is_file())
    if missing_files:
        raise WheelCheckError(
            "files of src/ missing from the installed wheel: " + ", ".join(missing_files)
        )
    check_license(site)
    # a clean environment: no PYTHONPATH, no user site, and a working directory that holds
    # no package, so every import resolves through the venv's site-packages
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    found: dict[str, str] = json.loads(
        run([str(python), "-I", "-c", WALK], cwd=work, env=env).strip().splitlines()[-1]
    )
    missing = sorted(expected - found.keys())
    if missing:
        raise WheelCheckError("modules of src/ not in the installed package: " + ", ".join(missing))
    elsewhere = sorted(n for n, f in found.items() if not Path(f).is_relative_to(installed))
    if elsewhere:
        raise WheelCheckError(f"modules imported from outside {installed}: " + ", ".join(elsewhere))
    usage = run([str(python.parent / PACKAGE), "--help"], cwd=work, env=env)
    if not usage.startswith("usage: cqlcdc"):
        raise WheelCheckError(f"cqlcdc --help printed no usage:\n{usage[:2000]}")
    return [
        f"built {wheel.name}",
        f"imported {len(found)} modules from {installed}",
        "cqlcdc --help: ok",
    ]


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="cqlcdc-wheel-check-") as tmp:
        try:
            lines = check(Path(tmp))
        except WheelCheckError as error:
            print(f"wheel check FAILED: {error}", file=sys.stderr)
            return 1
    for line in lines:
        print(f"wheel check: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
