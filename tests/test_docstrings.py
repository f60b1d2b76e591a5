"""Every public function, method and class of the five packages says what it does (issue: docs a newcomer
can follow). Public = not underscore-prefixed, at module level or in a public class."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("prover_gym", "agents", "judges", "trainers", "leaderboards")


def _undocumented(path: Path, root: Path = ROOT) -> list[str]:
    missing = []

    def visit(node, owner: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if child.name.startswith("_"):
                    continue
                name = f"{owner}{child.name}"
                if not ast.get_docstring(child):
                    missing.append(f"{path.relative_to(root)}:{child.lineno} {name}")
                if isinstance(child, ast.ClassDef):
                    visit(child, f"{name}.")

    visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return missing


def test_every_public_function_and_class_has_a_docstring():
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    assert len(files) > 50
    missing = [m for p in files for m in _undocumented(p)]
    assert not missing, "public names without a docstring:\n" + "\n".join(missing)


def test_the_check_finds_a_missing_docstring(tmp_path):
    f = tmp_path / "probe.py"
    f.write_text('class A:\n    """Doc."""\n\n    def b(self):\n        return 1\n\n    def _c(self):\n        pass\n')
    assert _undocumented(f, tmp_path) == ["probe.py:4 A.b"]
