"""The README's and docs' Python snippets run as written, in order, in one namespace per file (as a reader
pastes them), and their asserts hold: the rewards, tasks and sizes the text claims. A block preceded by
``<!-- snippet: not run (why) -->`` is skipped (official data, a GPU). No document may point at a file
outside the repository."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(<!-- snippet: not run[^>]*-->\n)?```python\n(.*?)```", re.S)


def snippets(path: Path) -> list[tuple[int, str, bool]]:
    """(line, code, runs) of each Python block of ``path``."""
    text = path.read_text()
    return [(text[: m.start()].count("\n") + 1, m.group(2), not m.group(1)) for m in BLOCK.finditer(text)]


def test_the_readme_and_docs_have_snippets_that_check_their_claims():
    readme = snippets(ROOT / "README.md")
    assert sum(runs for _, _, runs in readme) >= 2 and "assert" in "".join(code for _, code, runs in readme if runs)
    blocks = [b for doc in DOCS for b in snippets(doc)]
    assert sum(runs for _, _, runs in blocks) >= 10
    assert "assert" in "".join(code for _, code, runs in blocks if runs)  # the claims are checked


@pytest.mark.parametrize("doc", [d for d in DOCS if snippets(d)], ids=lambda p: p.name)
def test_snippets_run_and_their_claims_hold(doc, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # as a reader would: not from the repository
    namespace: dict = {"__name__": "__snippet__"}
    for line, code, runs in snippets(doc):
        if runs:
            try:
                exec(compile(code, f"{doc.name}:{line}", "exec"), namespace)
            except Exception as exc:
                raise AssertionError(f"{doc.name}, the snippet at line {line} failed: {exc!r}") from exc
    for value in namespace.values():  # close the envs the snippets made
        close = getattr(value, "close", None)
        if callable(close) and type(value).__module__.startswith("gymnasium"):
            close()


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_document_points_outside_the_repository(doc):
    text = doc.read_text()
    assert "../shared" not in text and "../../" not in text
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):  # relative markdown links resolve
        assert (doc.parent / target).exists(), f"{doc.name} links to {target}, which is not in the repository"
