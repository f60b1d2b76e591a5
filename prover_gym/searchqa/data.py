"""Search-QA data: questions and corpora in the published formats.

- Questions, FlashRAG jsonl: one ``{"id", "question", "golden_answers", "metadata"?}`` per line.
- Questions, Search-R1 parquet: columns ``data_source``, ``prompt`` (chat messages holding the
  template and the question), ``reward_model.ground_truth.target`` and ``extra_info``; the
  verl-agent variant adds ``env_kwargs.question``.
- Corpus, wiki-18 jsonl (optionally gzipped): ``{"id", "contents"}`` with ``contents`` =
  title line, newline, text.

The bundled data is written by ``generator.py`` in these same formats and read back through these
loaders. ``metadata.gold_queries`` (the expert's search path) and ``metadata.support_ids``
(passages each gold search must surface) are ours; MuSiQue's ``question_decomposition`` is
turned into a search path as well.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "Corpus",
    "DataError",
    "QAExample",
    "load_corpus_jsonl",
    "load_flashrag_jsonl",
    "load_questions",
    "load_searchr1_parquet",
    "resolve_data_dir",
]


class DataError(ValueError):
    """A data file is missing, malformed or in an unknown format. The message names the file."""


@dataclass(frozen=True)
class QAExample:
    """One question in Search-R1's format: id, question, golden answers, data source, and for generated questions the
    gold queries and supporting passage ids."""

    id: str
    question: str
    golden_answers: tuple[str, ...]
    data_source: str = "unknown"
    gold_queries: tuple[str, ...] = ()
    support_ids: tuple[tuple[str, ...], ...] = ()
    metadata: dict = field(default_factory=dict, compare=False, repr=False)


@dataclass
class Corpus:
    """Passages in wiki-18 form: ``contents[i]`` is ``title line + "\\n" + text``."""

    ids: list[str]
    contents: list[str]
    _fingerprint: str | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    def title(self, i: int) -> str:
        """Passage ``i``'s title (its first line)."""
        return self.contents[i].split("\n", 1)[0]

    def text(self, i: int) -> str:
        """Passage ``i``'s text (after the title line)."""
        parts = self.contents[i].split("\n", 1)
        return parts[1] if len(parts) > 1 else ""

    @property
    def fingerprint(self) -> str:
        """sha256 over ids and contents: keys the on-disk index cache."""
        if self._fingerprint is None:
            from prover_gym.bm25 import fingerprint_texts

            self._fingerprint = fingerprint_texts(self.contents, self.ids)
        return self._fingerprint


def _open_text(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def _json_lines(path: Path):
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        with _open_text(path) as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(
                        f"{path}:{lineno}: not valid JSON ({exc.msg}); each line must be one JSON object"
                    ) from None
                if not isinstance(row, dict):
                    raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
                yield lineno, row
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot be read ({exc}); the file is truncated or not UTF-8 jsonl") from None


def load_corpus_jsonl(path: str | Path) -> Corpus:
    """Load a wiki-18-style corpus (``.jsonl`` or ``.jsonl.gz``)."""
    path = Path(path)
    ids: list[str] = []
    contents: list[str] = []
    for lineno, row in _json_lines(path):
        if "contents" not in row:
            if "title" in row and "text" in row:  # DPR/psgs_w100-style rows
                row = {"id": row.get("id", len(ids)), "contents": f'"{row["title"]}"\n{row["text"]}'}
            else:
                raise DataError(
                    f"{path}:{lineno}: corpus rows need 'contents' (title line, newline, text); got keys {sorted(row)}"
                )
        ids.append(str(row.get("id", len(ids))))
        contents.append(str(row["contents"]))
    if not ids:
        raise DataError(f"{path}: the corpus is empty")
    return Corpus(ids, contents)


def _gold_list(value, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (str, int, float)) for v in value):
        return tuple(str(v) for v in value)
    raise DataError(f"{where}: golden answers must be a non-empty list of strings, got {value!r}")


def _path_from_metadata(meta: dict) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    queries = tuple(str(q) for q in meta.get("gold_queries") or ())
    support = tuple(tuple(str(s) for s in group) for group in meta.get("support_ids") or ())
    decomposition = meta.get("question_decomposition")
    if not queries and isinstance(decomposition, list) and decomposition:
        # MuSiQue: "Who founded #1?" -> substitute the earlier hops' answers
        answers: list[str] = []
        out = []
        for hop in decomposition:
            q = str(hop.get("question", ""))
            q = re.sub(
                r"#(\d+)", lambda m: answers[int(m.group(1)) - 1] if int(m.group(1)) <= len(answers) else m.group(0), q
            )
            out.append(q)
            answers.append(str(hop.get("answer", "")))
        queries = tuple(out)
    return queries, support


def load_flashrag_jsonl(path: str | Path, data_source: str | None = None) -> list[QAExample]:
    """Load FlashRAG jsonl questions. ``data_source`` defaults to the row's ``data_source``
    field, then ``metadata.data_source``, then the parent directory name (FlashRAG keeps one
    dataset per directory, e.g. ``nq/test.jsonl``)."""
    path = Path(path)
    default_source = data_source or path.parent.name or path.stem
    examples = []
    for lineno, row in _json_lines(path):
        where = f"{path}:{lineno}"
        for key in ("question", "golden_answers"):
            if key not in row:
                raise DataError(
                    f"{where}: missing '{key}'; FlashRAG rows are {{id, question, golden_answers, metadata}}"
                )
        meta = row.get("metadata") or {}
        if not isinstance(meta, dict):
            raise DataError(f"{where}: 'metadata' must be an object")
        queries, support = _path_from_metadata(meta)
        examples.append(
            QAExample(
                id=str(row.get("id", f"{default_source}-{lineno - 1}")),
                question=str(row["question"]),
                golden_answers=_gold_list(row["golden_answers"], where),
                data_source=str(row.get("data_source") or meta.get("data_source") or default_source),
                gold_queries=queries,
                support_ids=support,
                metadata=meta,
            )
        )
    return examples


_QUESTION_IN_PROMPT = re.compile(r"Question:\s*(.*?)\s*$", re.S)


def load_searchr1_parquet(path: str | Path) -> list[QAExample]:
    """Load Search-R1 (or verl-agent) parquet rows."""
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise DataError(f"{path}: not a readable parquet file ({exc})") from None
    examples = []
    for i, row in enumerate(rows):
        where = f"{path}: row {i}"
        env_kwargs = row.get("env_kwargs") or {}
        question = row.get("question") or env_kwargs.get("question")
        if not question:
            prompt = row.get("prompt") or []
            content = prompt[-1].get("content", "") if prompt and isinstance(prompt[-1], dict) else ""
            match = _QUESTION_IN_PROMPT.search(content)
            question = match.group(1) if match else content.strip()
        if not question:
            raise DataError(f"{where}: no question found (looked at 'question', 'env_kwargs.question', 'prompt')")
        gold = row.get("golden_answers")
        if gold is None:
            gt = (row.get("reward_model") or {}).get("ground_truth") or env_kwargs.get("ground_truth") or {}
            gold = gt.get("target") if isinstance(gt, dict) else gt
        if gold is None:
            raise DataError(
                f"{where}: no gold answers (looked at 'golden_answers', 'reward_model.ground_truth.target')"
            )
        extra = row.get("extra_info") or {}
        source = str(row.get("data_source") or env_kwargs.get("data_source") or "unknown")
        rid = row.get("id") or f"{source}_{extra.get('split', 'split')}_{extra.get('index', i)}"
        examples.append(
            QAExample(
                id=str(rid),
                question=str(question),
                golden_answers=_gold_list(gold, where),
                data_source=source,
                metadata={"extra_info": extra},
            )
        )
    return examples


def load_questions(path: str | Path) -> list[QAExample]:
    """Dispatch on the file name: ``.jsonl``/``.jsonl.gz`` (FlashRAG) or ``.parquet`` (Search-R1)."""
    path = Path(path)
    name = path.name
    if name.endswith(".parquet"):
        return load_searchr1_parquet(path)
    if name.endswith(".jsonl") or name.endswith(".jsonl.gz"):
        return load_flashrag_jsonl(path)
    raise DataError(f"{path}: unknown question format; use FlashRAG .jsonl(.gz) or Search-R1 .parquet")


_CORPUS_NAMES = ("corpus.jsonl", "corpus.jsonl.gz", "wiki-18.jsonl", "wiki-18.jsonl.gz")


def resolve_data_dir(data: str | Path, split: str) -> tuple[Path, Path | None]:
    """Find (questions file, corpus file or None) for ``split`` under ``data``.

    ``data`` is a directory holding ``{split}.jsonl``/``{split}.jsonl.gz``/``{split}.parquet``
    and optionally ``corpus.jsonl(.gz)`` or ``wiki-18.jsonl(.gz)``; or a single questions file.
    """
    data = Path(data).expanduser()
    if data.is_file():
        return data, None
    if not data.is_dir():
        raise DataError(f"data={str(data)!r}: no such file or directory")
    for name in (f"{split}.jsonl", f"{split}.jsonl.gz", f"{split}.parquet"):
        if (data / name).is_file():
            questions = data / name
            break
    else:
        found = sorted(p.name for p in data.iterdir())[:20]
        raise DataError(
            f"data={str(data)!r}: no questions file for split {split!r}; expected {split}.jsonl, "
            f"{split}.jsonl.gz or {split}.parquet (found: {found})"
        )
    corpus = next((data / n for n in _CORPUS_NAMES if (data / n).is_file()), None)
    return questions, corpus
