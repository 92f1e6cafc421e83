"""The glossary: every term of the field is defined (<dfn>term</dfn>) once, at its first use in reading order.

Reading order: lessons 00 -> 09, then labs 1 -> 6. README.md is read on its own (it is what a newcomer reads
first, before any lesson): every term of the glossary it uses is defined there too, at its first use. A use is a match of the term's `aliases` in a markdown
cell's prose: inline code, code blocks, link targets and HTML comments are left out (a name in backticks is
code, not vocabulary). A use in the same cell as the <dfn>, before it, is allowed: a cell is read as one.
"""
import json
import re
import sys
from pathlib import Path

import pytest

import course_utils as cu
from course_utils import glossary

ROOT = Path(__file__).resolve().parent.parent
READING_ORDER = sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb")) + \
    sorted((ROOT / "solutions" / "labs").glob("lab[0-9]_*.ipynb"))
DFN = re.compile(r"<dfn>(.*?)</dfn>", re.S)
NOT_PROSE = [re.compile(p, re.S) for p in (r"<!--.*?-->", r"```.*?```", r"`[^`\n]*`", r"\]\([^)]*\)")]


def _prose(source: str) -> str:
    for p in NOT_PROSE:
        source = p.sub(" ", source)
    return source


def _markdown(path: Path):
    """(cell index, source) of each markdown cell a student reads: not the generator's Colab badge."""
    nb = json.loads(path.read_text())
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown" and cell.get("id") != "colab-badge":
            yield i, "".join(cell["source"])


def _term_of(dfn_text: str):
    text = re.sub(r"[`*_]", "", dfn_text).strip()
    for t in glossary.TERMS:
        if t.term.lower() == text.lower() or t.pattern().fullmatch(text):
            return t
    return None


def _walk():
    """Every <dfn> and every first use, as positions (notebook number, cell, offset) in reading order."""
    dfns, first_use = {}, {}
    for n, path in enumerate(READING_ORDER):
        for i, source in _markdown(path):
            for m in DFN.finditer(source):
                dfns.setdefault(m.group(1), []).append((n, i, m.start()))
            prose = _prose(source)
            for t in glossary.TERMS:
                m = t.pattern().search(prose)
                if m and t.term not in first_use:
                    first_use[t.term] = (n, i, m.group(0))
    return dfns, first_use


DFNS, FIRST_USE = _walk()


def _where(pos) -> str:
    return f"{READING_ORDER[pos[0]].name}, cell {pos[1]}"


def test_every_dfn_names_a_glossary_term():
    unknown = [f"<dfn>{text}</dfn> in {_where(pos)}" for text, where in DFNS.items() for pos in where
               if _term_of(text) is None]
    assert not unknown, ("not in course_utils/glossary.py (add the term, its aliases, a definition and the "
                         "notebook that teaches it): " + "; ".join(unknown))


def _dfns_of(term):
    return sorted(pos for text, where in DFNS.items() for pos in where if _term_of(text) is term)


@pytest.mark.parametrize("term", glossary.TERMS, ids=lambda t: t.term)
def test_each_term_is_defined_once_where_the_glossary_says(term):
    where = _dfns_of(term)
    assert len(where) == 1, (f"{term.term!r} needs exactly one <dfn> in the notebooks, found "
                             f"{len(where)}: {[_where(p) for p in where] or 'none'}")
    assert READING_ORDER[where[0][0]].stem == term.taught, (
        f"{term.term!r} is defined in {_where(where[0])}, but the glossary says {term.taught}: "
        "change `taught` in course_utils/glossary.py")


def test_no_term_is_used_before_its_definition():
    early = []
    for t in glossary.TERMS:
        where = _dfns_of(t)
        use = FIRST_USE.get(t.term)
        if where and use and use[:2] < where[0][:2]:
            early.append(f"{_where(use)}: {use[2]!r} ({t.term}) is used before its <dfn> in {_where(where[0])}")
    assert not early, "define each term at its first use, or reword:\n" + "\n".join(early)


def test_the_glossary_lists_terms_in_reading_order():
    taught = [t.term for t in sorted(glossary.TERMS, key=lambda t: (_dfns_of(t) or [(99, 0, 0)])[0])]
    assert [t.term for t in glossary.TERMS] == taught, "reorder TERMS in course_utils/glossary.py to: " + \
        ", ".join(taught)


def _student_version(path: Path) -> Path:
    return ROOT / ("labs" if path.parent.name == "labs" else "notebooks") / path.name


@pytest.mark.parametrize("path", READING_ORDER, ids=lambda p: p.stem)
def test_student_notebooks_keep_the_definitions(path):
    mine = sorted(m for _, s in _markdown(path) for m in DFN.findall(s))
    theirs = sorted(m for _, s in _markdown(_student_version(path)) for m in DFN.findall(s))
    assert mine == theirs, (f"{_student_version(path).relative_to(ROOT)} has other <dfn> markers than its "
                            "solution (a <dfn> in a hints cell is lost: define the term in the lesson's prose); "
                            "run tools/generate.py")


@pytest.mark.parametrize("path", READING_ORDER, ids=lambda p: p.stem)
def test_every_notebook_points_to_the_glossary(path):
    _, title = next(iter(_markdown(path)))
    assert "cu.glossary(" in title, f"{path.name}: its first markdown cell should name `cu.glossary()`"


def test_glossary_prints_one_term_by_any_of_its_names(capsys):
    cu.glossary("SRAM")
    out = capsys.readouterr().out
    assert out.startswith("shared memory:") and "taught in notebooks/00_setup.ipynb" in out
    cu.glossary("SMs")
    assert capsys.readouterr().out.startswith("SM:")


def test_glossary_prints_all_in_reading_order(capsys):
    cu.glossary()
    out = capsys.readouterr().out
    positions = [out.index(f"\n{t.term}:") if i else out.index(f"{t.term}:") for i, t in enumerate(glossary.TERMS)]
    assert positions == sorted(positions)


def test_glossary_stops_at_the_notebook_asked_for(capsys):
    cu.glossary(upto="01")
    out = capsys.readouterr().out
    assert out.startswith("== taught in notebooks/00_setup.ipynb ==\n\nkernel:")
    assert "== taught in notebooks/01_count_the_trips.ipynb ==" in out and "\nthread:" in out
    assert "02_launch_tax" not in out and "\nwarp:" not in out
    with pytest.raises(ValueError, match="a lesson.s number"):
        cu.glossary(upto="twelve")


def test_an_unknown_term_says_what_to_do():
    with pytest.raises(KeyError, match="not in the course's glossary: cu.glossary.. lists every term") as e:
        cu.glossary("flux capacitor")
    assert str(e.value).startswith("'flux capacitor' is not"), "the message prints as a sentence, not in quotes"
    with pytest.raises(KeyError, match="did you mean 'tensor cores'\\? Ask for one of them, as in "
                                       "cu.glossary\\('tensor cores'\\)"):
        cu.glossary("tensor")
    with pytest.raises(KeyError, match="did you mean 'HBM'"):     # a misspelling gets the term spelt alike
        cu.glossary("HMB")
    with pytest.raises(TypeError, match="cu.glossary\\('HBM'\\)"):
        cu.glossary(3)


# --- README.md: read on its own, before any lesson -------------------------------------------------------
README = ROOT / "README.md"


def _readme_blocks():
    """README's prose as blocks, each read as one (as a notebook's cell is): paragraphs, and each table row and
    list item on its own."""
    blocks = []
    for para in re.split(r"\n\s*\n", README.read_text(encoding="utf-8")):
        item = []
        for line in para.splitlines():
            if re.match(r"\s{0,3}(\||[-*] |\d+\. )", line) and item:
                blocks.append("\n".join(item))
                item = []
            item.append(line)
        blocks.append("\n".join(item))
    return blocks


def _readme_walk():
    """(the block of each term's first <dfn> in README, the block and words of each term's first use)."""
    dfns, uses, unknown = {}, {}, []
    for i, block in enumerate(_readme_blocks()):
        for m in DFN.finditer(block):
            t = _term_of(m.group(1))
            if t is None:
                unknown.append(m.group(1))
            else:
                dfns.setdefault(t.term, []).append(i)
        prose = _prose(block)
        for t in glossary.TERMS:
            m = t.pattern().search(prose)
            if m and t.term not in uses:
                uses[t.term] = (i, m.group(0), " ".join(block.split())[:90])
    return dfns, uses, unknown


def test_readme_defines_each_term_where_it_first_uses_it():
    dfns, uses, unknown = _readme_walk()
    assert not unknown, ("README.md: <dfn> of a word the glossary lacks (add it to course_utils/glossary.py, "
                         f"with the notebook that teaches it): {unknown}")
    twice = [f"{term} ({len(where)} times)" for term, where in dfns.items() if len(where) > 1]
    assert not twice, f"README.md defines a term more than once: {twice}"
    early = [f"{word!r} ({term}) in \"{text}\"" + (" before its <dfn>" if term in dfns else ", and README never "
                                                     "defines it")
             for term, (i, word, text) in uses.items() if term not in dfns or i < dfns[term][0]]
    assert not early, ("README.md uses terms of the field before it says what they are: define each at its first "
                       "use, <dfn>term</dfn> with a few plain words, or reword:\n" + "\n".join(early))


def test_readme_check_catches_an_undefined_term(monkeypatch, tmp_path):
    """The README test fails where it must: a term used without a word, and one defined after its use."""
    fake = tmp_path / "README.md"
    monkeypatch.setattr(sys.modules[__name__], "README", fake)
    fake.write_text("Fusion keeps bytes on chip.\n\nA <dfn>kernel</dfn> runs on the GPU; <dfn>fusion</dfn> "
                    "merges kernels.\n\nThe data lives in HBM.\n")
    dfns, uses, _ = _readme_walk()
    assert uses["kernel fusion"][0] < dfns["kernel fusion"][0] and "HBM" not in dfns
