"""``prover/SearchQA-v0``: the Search-R1 setting as a gymnasium env.

Actions: ``search[query]`` returns the top-k passages; ``answer[text]`` ends the episode with
reward = exact match (or F1 / cover-EM with ``reward=``) against the gold answers. As in
Search-R1 there are ``max_turns`` search rounds plus one final round in which only an answer is
accepted; a search there is not executed and the episode ends truncated with reward 0.

Observations (``obs_format="searchr1"``, the default) are byte-compatible with Search-R1's
transcript: ``"\\n\\n<information>Doc 1(Title: ...) text\\nDoc 2(...) ...</information>\\n\\n"``,
cut to ``max_obs_tokens`` tokens (whitespace tokens unless ``tokenizer`` names a local
Hugging Face tokenizer). ``obs_format="plain"`` gives the passage lines alone.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from prover_gym._shared import shared
from prover_gym.cache import file_sha256
from prover_gym.core import Outcome, TextEnv
from prover_gym.searchqa.data import Corpus, DataError, QAExample, load_corpus_jsonl, load_questions, resolve_data_dir
from prover_gym.searchqa.metrics import METRICS, cover_exact_match, exact_match, f1_score
from prover_gym.searchqa.retrievers import BM25Retriever, HTTPRetriever, Passage

INVALID_SEARCHR1 = (
    "\nMy previous action is invalid. If I want to search, I should put the query between <search> and </search>. "
    "If I want to give the final answer, I should put the answer between <answer> and </answer>. Let me try again.\n"
)
_ACTION = re.compile(r"^\s*(search|answer)\s*\[(.*)\]\s*$", re.S | re.I)
MAX_QUERY_CHARS = 1000


def format_passages(passages: list[Passage]) -> str:
    """Search-R1's ``_passages2string``: ``Doc {i}(Title: {title line}) {text}\\n`` per passage."""
    return "".join(f"Doc {i}(Title: {p.title}) {p.text}\n" for i, p in enumerate(passages, 1))


class SearchQAEnv(TextEnv):
    """Search a corpus, then answer. See the module docstring for the protocol.

    Args:
        split: ``"train"`` or ``"test"`` (or any ``{split}.jsonl``/``.parquet`` name under ``data``).
        data: None for the bundled generated data; a directory with ``{split}.jsonl`` (FlashRAG),
            ``{split}.parquet`` (Search-R1) and ``corpus.jsonl``; or a single questions file.
        corpus: wiki-18-style jsonl to search (overrides the one in ``data``).
        retriever: ``"bm25"`` (embedded), ``"dense"`` (embedded E5 + FAISS, as Search-R1; needs
            ``encoder`` and ``faiss-cpu``) or ``"http"`` (a Search-R1 retrieval server at ``search_url``).
        index: the FAISS index for ``retriever="dense"`` (default: ``e5_Flat.index`` next to the corpus).
        encoder: a local Hugging Face encoder directory for ``retriever="dense"`` (e.g. e5-base-v2).
        search_url: base URL(s) of the retrieval server for ``retriever="http"``.
        retriever_timeout, retriever_retries: seconds per HTTP request and attempts before a step
            raises ``RetrieverUnavailable`` (which leaves the env as before the step; retry it).
        topk: passages per search (3, as Search-R1).
        max_turns: search rounds before the final answer-only round (4, as Search-R1).
        max_steps: total steps; defaults to ``max_turns + 1``; if given, ``max_turns = max_steps - 1``.
        obs_format: ``"searchr1"`` or ``"plain"``.
        max_obs_tokens: cut of a search observation, in tokens (500, as Search-R1; 0 = no cut).
        tokenizer: path of a local Hugging Face tokenizer for the cut (None: whitespace tokens).
        reward: ``"em"`` (default), ``"f1"`` or ``"subem"``.
        data_sources: keep only these families/datasets (e.g. ``["single_hop"]``: an easy split for
            small models); None keeps all.

    The pivot: a multi-hop question (its gold search path has two or more searches, e.g. the bundled
    ``bridge`` family) with ``max_turns`` equal to its hops has no spare round, so the first search
    decides: it must surface the bridge entity, which the second hop searches for. The final step's info
    of such a question carries ``pivot_step``: the 0-based index of the first search, or None when there
    was none; other questions omit the key (DESIGN's contract).
    """

    env_id = "prover/SearchQA-v0"

    def __init__(
        self,
        split: str = "train",
        data: str | None = None,
        *,
        corpus: str | None = None,
        retriever: str = "bm25",
        search_url: str | list[str] | None = None,
        topk: int = 3,
        retriever_timeout: float = 30.0,
        retriever_retries: int = 3,
        max_turns: int = 4,
        max_steps: int | None = None,
        obs_format: str = "searchr1",
        max_obs_tokens: int = 500,
        tokenizer: str | None = None,
        reward: str = "em",
        data_sources: list[str] | None = None,
        index: str | None = None,
        encoder: str | None = None,
        render_mode: str | None = None,
    ):
        make_kwargs = {
            k: v
            for k, v in dict(
                split=split,
                data=data,
                corpus=corpus,
                retriever=retriever,
                search_url=search_url,
                topk=topk,
                retriever_timeout=retriever_timeout,
                retriever_retries=retriever_retries,
                max_turns=max_turns,
                max_steps=max_steps,
                obs_format=obs_format,
                max_obs_tokens=max_obs_tokens,
                tokenizer=tokenizer,
                reward=reward,
                data_sources=data_sources,
                index=index,
                encoder=encoder,
            ).items()
            if k not in ("index", "encoder") or v is not None
        }
        if max_steps is None:
            max_steps = max_turns + 1
        super().__init__(max_steps=max_steps, render_mode=render_mode, make_kwargs=make_kwargs)
        self.max_turns = max_steps - 1
        if obs_format not in ("searchr1", "plain"):
            raise ValueError(f"obs_format={obs_format!r}; use 'searchr1' or 'plain'")
        if reward not in METRICS:
            raise ValueError(f"reward={reward!r}; use one of {sorted(METRICS)}")
        if not isinstance(topk, int) or topk < 1:
            raise ValueError(f"topk must be a positive int, got {topk!r}")
        self.split, self.topk, self.obs_format, self.reward_name = split, topk, obs_format, reward
        self.max_obs_tokens = max_obs_tokens
        self._tokenizer = shared(("tokenizer", tokenizer), lambda: _load_tokenizer(tokenizer)) if tokenizer else None

        questions_path, corpus_path, data_id = self._locate(split, data, corpus)
        self.examples: list[QAExample] = shared(
            ("questions", str(questions_path)), lambda: load_questions(questions_path)
        )
        self._by_id = shared(("index", str(questions_path)), lambda: {e.id: i for i, e in enumerate(self.examples)})
        if len(self._by_id) != len(self.examples):
            raise DataError(f"{questions_path}: question ids are not unique")
        if (index is not None or encoder is not None) and retriever != "dense":
            raise ValueError(f"index= and encoder= are for retriever='dense' (got retriever={retriever!r})")
        if retriever in ("bm25", "dense"):
            if corpus_path is None:
                raise DataError(
                    f"data={data!r} has no corpus.jsonl; pass corpus=PATH, or retriever='http' with search_url"
                )
            loaded: Corpus = shared(("corpus", str(corpus_path)), lambda: load_corpus_jsonl(corpus_path))
            self.corpus: Corpus | None = loaded
        if retriever == "bm25":
            self.retriever = shared(("bm25", str(corpus_path)), lambda: BM25Retriever(loaded))
        elif retriever == "dense":
            from prover_gym.searchqa.dense import INDEX_NAME, DenseRetriever

            if encoder is None:
                raise ValueError(
                    "retriever='dense' needs encoder= a local encoder directory (Search-R1 uses e5-base-v2)"
                )
            assert corpus_path is not None  # checked above
            index_path = Path(index).expanduser() if index else corpus_path.parent / INDEX_NAME
            self.retriever = shared(
                ("dense", str(corpus_path), str(index_path), str(encoder)),
                lambda: DenseRetriever(loaded, index_path, encoder),
            )
        elif retriever == "http":
            if not search_url:
                raise ValueError(
                    "retriever='http' needs search_url='http://127.0.0.1:PORT' "
                    "(see python -m prover_gym.searchqa.serve)"
                )
            self.corpus = None
            urls = tuple([search_url] if isinstance(search_url, str) else search_url)
            if not retriever_timeout > 0 or not isinstance(retriever_retries, int) or retriever_retries < 1:
                raise ValueError(
                    f"retriever_timeout={retriever_timeout!r} must be > 0 and retriever_retries="
                    f"{retriever_retries!r} an int >= 1"
                )
            self.retriever = shared(
                ("http", urls, retriever_timeout, retriever_retries),
                lambda: HTTPRetriever(list(urls), timeout=retriever_timeout, retries=retriever_retries),
            )
        else:
            raise ValueError(f"retriever={retriever!r}; use 'bm25', 'dense' or 'http'")
        settings = [
            self.env_id,
            data_id,
            self.retriever.identity,
            split,
            topk,
            max_steps,
            obs_format,
            max_obs_tokens,
            tokenizer,
            reward,
        ]
        if data_sources is not None:
            settings.append(sorted(data_sources))
        self._fingerprint = hashlib.sha256(json.dumps(settings, default=str).encode()).hexdigest()
        self._ids = [e.id for e in self.examples if data_sources is None or e.data_source in data_sources]
        if data_sources is not None and not self._ids:
            known = sorted({e.data_source for e in self.examples})
            raise ValueError(
                f"data_sources={data_sources!r} selects no question of split {split!r}; sources there: {known}"
            )
        self._example: QAExample | None = None
        self._n_searches = 0
        self._retrieved: tuple[tuple[str, ...], ...] = ()
        self._answer: str | None = None
        self._first_query: str | None = None  # the first search's query and its step (1-based): the pivot
        self._first_at: int | None = None
        self._decoys: dict[str, QAExample | None] = {}  # task id -> its look-alike (see _decoy)

    @staticmethod
    def _locate(split: str, data, corpus) -> tuple[Path, Path | None, str]:
        if data is None:
            from prover_gym.searchqa.bundled import DEFAULT, bundled_data_dir

            directory = bundled_data_dir()
            questions = directory / f"{split}.jsonl"
            if not questions.is_file():
                raise ValueError(f"split={split!r} is not in the bundled Search-QA data; use 'train' or 'test'")
            bundled_corpus = Path(corpus) if corpus else directory / "corpus.jsonl"
            return questions, bundled_corpus, DEFAULT.key + (f"+{file_sha256(bundled_corpus)}" if corpus else "")
        questions, found_corpus = resolve_data_dir(data, split)
        corpus_path = Path(corpus).expanduser() if corpus else found_corpus
        if corpus_path is not None and not corpus_path.is_file():
            raise DataError(f"corpus={str(corpus_path)!r}: no such file")
        data_id = shared(("digest", str(questions)), lambda: file_sha256(questions))
        return questions, corpus_path, data_id

    # ---- TextEnv hooks ----------------------------------------------------------------------
    def task_ids(self) -> list[str]:
        """The split's question ids."""
        return self._ids

    def task(self) -> str:
        """The current question."""
        return self._example.question if self._example else ""

    def fingerprint(self) -> str:
        """A digest of the data, retriever and settings; snapshots restore only into an env with the same one."""
        return self._fingerprint

    def _load_task(self, task_id: str) -> str:
        self._example = self.examples[self._by_id[task_id]]
        self._n_searches = 0
        self._retrieved = ()
        self._answer = None
        self._first_query, self._first_at = None, None
        question = self._example.question.strip()
        return question if question.endswith("?") else question + "?"

    def _invalid(self, action: str, reason: str) -> Outcome:
        obs = INVALID_SEARCHR1 if self.obs_format == "searchr1" else f"Invalid action: {reason}"
        return Outcome(observation=obs, info={"error": reason})

    def _apply(self, action: str) -> Outcome:
        match = _ACTION.match(action)
        if not match:
            shown = action if len(action) <= 60 else action[:57] + "..."
            return self._invalid(action, f"{shown!r} is not search[query] or answer[text]")
        verb, arg = match.group(1).lower(), match.group(2).strip()
        if verb == "answer":
            return self._score(arg)
        if not arg:
            return self._invalid(action, "empty search query; write search[your query]")
        if len(arg) > MAX_QUERY_CHARS:
            return self._invalid(
                action, f"search query of {len(arg)} characters is over the limit of {MAX_QUERY_CHARS}"
            )
        if self._step > self.max_turns:
            return Outcome(
                observation="", info={"error": "no searches left in the final round; answer[...] is the only action"}
            )
        passages = self.retriever.search([arg], self.topk)[0]
        if self._first_at is None:
            self._first_query, self._first_at = arg, self._step
        self._n_searches += 1
        self._retrieved = self._retrieved + (tuple(p.id for p in passages),)
        return Outcome(observation=self._render(passages), info={"query": arg})

    def _score(self, answer: str) -> Outcome:
        assert self._example is not None  # reset() loads it
        gold = self._example.golden_answers
        self._answer = answer
        scores = {
            "em": exact_match(answer, gold),
            "f1": f1_score(answer, gold),
            "subem": cover_exact_match(answer, gold),
        }
        won = scores["em"] == 1.0
        return Outcome(
            observation="", reward=scores[self.reward_name], terminated=True, won=won, info={"answer": answer, **scores}
        )

    def _render(self, passages: list[Passage]) -> str:
        docs = format_passages(passages)
        if self.obs_format == "searchr1":
            docs = "\n\n<information>" + docs.strip() + "</information>\n\n"
        return self._cut(docs)

    def _cut(self, text: str) -> str:
        n = self.max_obs_tokens
        if not n:
            return text
        if self._tokenizer is not None:
            ids = self._tokenizer.encode(text, add_special_tokens=False)
            return text if len(ids) <= n else self._tokenizer.decode(ids[:n])
        spans = list(re.finditer(r"\S+", text))
        return text if len(spans) <= n else text[: spans[n - 1].end()]

    def _get_state(self) -> Any:
        return (self._n_searches, self._retrieved, self._answer, self._first_query, self._first_at)

    def _set_state(self, state: Any) -> None:
        self._n_searches, self._retrieved, self._answer, self._first_query, self._first_at = state
        self._example = self.examples[self._by_id[self._task_id]]

    def _extra_info(self) -> dict:
        ex = self._example
        return {
            "gold_answers": list(ex.golden_answers) if ex else [],
            "data_source": ex.data_source if ex else "",
            "n_searches": self._n_searches,
            "retrieved_ids": [list(r) for r in self._retrieved],
            **(
                {"pivot_step": None if self._first_at is None else self._first_at - 1}
                if (self._terminated or self._truncated) and self._in_pivot_task()
                else {}
            ),
        }

    # ---- the early decision (multi-hop questions without a spare round) ------------------------
    def _in_pivot_task(self) -> bool:
        ex = self._example
        return ex is not None and len(ex.gold_queries) >= 2 and len(ex.gold_queries) == self.max_turns

    def at_pivot(self) -> bool:
        """Whether the next action is the pivot: the first search of a multi-hop question whose hops use
        every search round."""
        ended = self._terminated or self._truncated
        return self._in_pivot_task() and self._first_at is None and not ended

    def decoy_action(self) -> str | None:
        """What a misled demonstrator does here (``agents.baselines.DecoyExpert``), or None where it does
        as the expert. At the pivot: search a look-alike of the question's first entity (another
        question of the same form whose first entity shares the most words with it, e.g. a building of a
        similar name). On that branch: follow the look-alike's own path (its second hop, found in what
        the first search showed) and give its answer, competent turns on the wrong entity."""
        decoy = self._decoy() if self._in_pivot_task() and not (self._terminated or self._truncated) else None
        if decoy is None:
            return None
        if self.at_pivot():
            return f"search[{decoy.gold_queries[0]}]"
        if self._first_query != decoy.gold_queries[0]:
            return None
        if self._n_searches < len(decoy.gold_queries) and self._step < self.max_turns:
            return f"search[{decoy.gold_queries[self._n_searches]}]"
        return f"answer[{decoy.golden_answers[0]}]"

    def _decoy(self) -> QAExample | None:
        """The current question's look-alike: among the split's questions of the same form (the question
        with its first entity blanked) and the same number of hops, with another first entity and
        another answer, the one whose first entity shares the most words with this one's (ties: the
        first in the split). None when the form has no other question."""
        ex = self._example
        assert ex is not None and self._task_id is not None
        if self._task_id not in self._decoys:
            self._decoys[self._task_id] = None
            form = ex.question.replace(ex.gold_queries[0], "{}")
            words = set(ex.gold_queries[0].lower().split())
            best = -1
            for other in self.examples:
                if (
                    len(other.gold_queries) != len(ex.gold_queries)
                    or other.gold_queries[0] == ex.gold_queries[0]
                    or set(other.golden_answers) & set(ex.golden_answers)
                    or other.question.replace(other.gold_queries[0], "{}") != form
                ):
                    continue
                shared = len(words & set(other.gold_queries[0].lower().split()))
                if shared > best:
                    best, self._decoys[self._task_id] = shared, other
        return self._decoys[self._task_id]

    def expert_action(self) -> str | None:
        """Follow the gold search path, then answer the first gold answer."""
        ex = self._example
        if ex is None or self._terminated or self._truncated:
            return None
        path = ex.gold_queries or (ex.question,)
        if self._n_searches < len(path) and self._step < self.max_turns:
            return f"search[{path[self._n_searches]}]"
        return f"answer[{ex.golden_answers[0]}]"


def _load_tokenizer(path: str):
    try:
        from transformers import AutoTokenizer
    except ImportError:  # pragma: no cover
        raise ImportError("tokenizer=... needs the transformers package (pip install transformers)") from None
    if not Path(path).expanduser().exists():
        raise DataError(f"tokenizer={path!r}: no such local directory (tokenizers are never downloaded)")
    return AutoTokenizer.from_pretrained(str(Path(path).expanduser()))
