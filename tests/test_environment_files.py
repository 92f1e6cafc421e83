"""environment.yml (conda/mamba) and pyproject.toml name the same dependencies with the same bounds."""
import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11")  # 3.10: skipped

ROOT = Path(__file__).resolve().parent.parent
REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*?)\s*$")


def split(req: str) -> tuple[str, str]:
    """'pytest-xdist >= 3.3' -> ('pytest-xdist', '>=3.3'), the name normalised as pip does (PEP 503)."""
    m = REQ.match(req.split(";")[0])
    assert m, f"cannot read requirement {req!r}"
    return re.sub(r"[-_.]+", "-", m[1]).lower(), re.sub(r"\s+", "", m[3])


def pyproject() -> dict:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = data["dependencies"] + [r for extra in data.get("optional-dependencies", {}).values() for r in extra]
    return {"python": data["requires-python"], "deps": dict(split(r) for r in reqs)}


def environment() -> dict:
    """The list items of environment.yml's `dependencies`, conda's and pip's, read without a YAML library."""
    conda, pip, section, pip_indent = [], [], None, None
    for raw in (ROOT / "environment.yml").read_text(encoding="utf-8").splitlines():
        line = "" if raw.lstrip().startswith("#") else raw.split(" #")[0].rstrip()
        if not line.strip():
            continue
        if not line.startswith((" ", "-")):
            section = line.split(":")[0].strip()
            continue
        item = re.match(r"^(\s*)-\s+(.*)$", line)
        if section != "dependencies" or not item:
            continue
        indent, value = len(item[1]), item[2].strip().strip("'\"")
        if pip_indent is not None and indent <= pip_indent:
            pip_indent = None
        if value == "pip:":
            pip_indent = indent
        else:
            (conda if pip_indent is None else pip).append(value)
    return {"conda": conda, "pip": pip}


def test_environment_yml_lists_pyproject_dependencies():
    want, env = pyproject(), environment()
    names = [r for r in env["pip"] if not r.startswith("-")]
    got = dict(split(r) for r in names)
    assert len(got) == len(names), f"a name appears twice in environment.yml: {names}"
    missing, extra = sorted(set(want["deps"]) - set(got)), sorted(set(got) - set(want["deps"]))
    assert not missing, f"in pyproject.toml but not in environment.yml: {missing}"
    assert not extra, f"in environment.yml but not in pyproject.toml: {extra}"
    differ = {n: (want["deps"][n], got[n]) for n in got if got[n] != want["deps"][n]}
    assert not differ, f"bounds differ (pyproject, environment.yml): {differ}"


def test_environment_yml_installs_the_course_and_its_python():
    want, env = pyproject(), environment()
    assert "-e ." in env["pip"], "environment.yml must install the course itself: `- -e .` under pip"
    assert "pip" in env["conda"]
    pythons = [c for c in env["conda"] if split(c)[0] == "python"]
    assert pythons and split(pythons[0])[1] == re.sub(r"\s+", "", want["python"]), \
        f"python in environment.yml ({pythons}) differs from requires-python ({want['python']})"


def test_a_plain_install_carries_every_subpackage_and_the_hints():
    """Colab installs the course from git without -e: setuptools then ships only the packages listed in
    pyproject.toml (course_utils.check and course_utils.grade were once missing) and the data files named."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    found = sorted(".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "course_utils").rglob("__init__.py"))
    assert sorted(setuptools["packages"]) == found
    assert "exercise_hints.json" in setuptools["package-data"]["course_utils"]


def citation() -> dict:
    """CITATION.cff's top-level `key: value` lines (a scalar each), read without a YAML library."""
    found = {}
    for line in (ROOT / "CITATION.cff").read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([a-z][a-z-]*):\s*(\S.*)?$", line)
        if m and m[2]:
            found[m[1]] = m[2].strip().strip("'\"")
    return found


def test_citation_cff_names_pyproject_version_repository_and_license():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    cff = citation()
    assert cff.get("cff-version") == "1.2.0"
    assert cff.get("version") == project["version"], \
        f"CITATION.cff says version {cff.get('version')}, pyproject.toml {project['version']}: bump both"
    assert cff.get("repository-code") == project["urls"]["Repository"], \
        f"CITATION.cff's repository-code {cff.get('repository-code')} is not pyproject.toml's Repository"
    assert cff.get("license") == project["license"]["text"] == "MIT"
    assert "MIT License" in (ROOT / "LICENSE").read_text(encoding="utf-8")
