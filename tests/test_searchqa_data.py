"""Loaders on fixtures written in the official formats, and the env on official-format data."""

import gzip
import json

import gymnasium as gym
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from prover_gym.searchqa.data import (
    DataError,
    load_corpus_jsonl,
    load_flashrag_jsonl,
    load_questions,
    load_searchr1_parquet,
)

TEMPLATE = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get new "
    "information. After reasoning, if you find you lack some knowledge, you can call a search engine by <search> query "
    "</search> and it will return the top searched results between <information> and </information>. You can search as "
    "many times as your want. If you find no further external knowledge needed, you can directly provide the answer "
    "inside <answer> and </answer>, without detailed illustrations. For example, <answer> Beijing </answer>. Question: {q}\n"
)

CORPUS = [
    {
        "id": "0",
        "contents": '"Evan Morris"\nEvan Morris Evan L. Morris (January 26, 1977 – July 9, 2015) was a lobbyist.',
    },
    {"id": "1", "contents": '"Citibank"\nCitibank is the consumer division of Citigroup, founded in 1812 in New York.'},
    {"id": "2", "contents": '"The Tale of ""Quotes"""\nA novel whose title has embedded quotes.'},
    {"id": "3", "contents": '"Hudson River"\nThe Hudson River flows through New York into the Atlantic.'},
]


def write_jsonl(path, rows, gz=False):
    opener = gzip.open if gz else open
    with opener(path, "wt", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")


@pytest.fixture
def official_dir(tmp_path):
    return write_official_dir(tmp_path)


def write_official_dir(tmp_path):
    """Official-format Search-QA files (FlashRAG test.jsonl, Search-R1 train.parquet, a corpus) in ``tmp_path``."""
    write_jsonl(tmp_path / "corpus.jsonl.gz", CORPUS, gz=True)
    write_jsonl(
        tmp_path / "test.jsonl",
        [
            {"id": "test_0", "question": "when was citibank founded", "golden_answers": ["1812"], "metadata": {}},
            {"id": "test_1", "question": "who was Evan Morris?", "golden_answers": ["lobbyist", "a lobbyist"]},
            {
                "id": "test_2",
                "question": "Where does the river of the city of Citibank's founding flow into",
                "golden_answers": ["Atlantic", "Atlantic Ocean"],
                "metadata": {
                    "question_decomposition": [
                        {
                            "id": 1,
                            "question": "where was Citibank founded",
                            "answer": "New York",
                            "paragraph_support_idx": 1,
                        },
                        {
                            "id": 2,
                            "question": "which river flows through #1",
                            "answer": "Hudson River",
                            "paragraph_support_idx": 3,
                        },
                        {
                            "id": 3,
                            "question": "where does #2 flow into",
                            "answer": "Atlantic",
                            "paragraph_support_idx": 3,
                        },
                    ]
                },
            },
        ],
    )
    table = pa.Table.from_pylist(
        [
            {
                "data_source": "nq",
                "prompt": [{"role": "user", "content": TEMPLATE.format(q="when was citibank founded?")}],
                "ability": "fact-reasoning",
                "reward_model": {"style": "rule", "ground_truth": {"target": ["1812"]}},
                "extra_info": {"split": "train", "index": 0},
            },
            {
                "data_source": "hotpotqa",
                "prompt": [{"role": "user", "content": TEMPLATE.format(q="where does the hudson flow?")}],
                "ability": "fact-reasoning",
                "reward_model": {"style": "rule", "ground_truth": {"target": ["Atlantic", "the Atlantic Ocean"]}},
                "extra_info": {"split": "train", "index": 1},
            },
        ]
    )
    pq.write_table(table, tmp_path / "train.parquet")
    return tmp_path


def test_flashrag_loader_and_musique_decomposition(official_dir):
    qs = load_flashrag_jsonl(official_dir / "test.jsonl", data_source="musique")
    assert [q.id for q in qs] == ["test_0", "test_1", "test_2"]
    assert qs[1].golden_answers == ("lobbyist", "a lobbyist") and qs[1].data_source == "musique"
    assert qs[2].gold_queries == (
        "where was Citibank founded",
        "which river flows through New York",
        "where does Hudson River flow into",
    )


def test_searchr1_parquet_loader(official_dir):
    qs = load_searchr1_parquet(official_dir / "train.parquet")
    assert [q.question for q in qs] == ["when was citibank founded?", "where does the hudson flow?"]
    assert qs[1].golden_answers == ("Atlantic", "the Atlantic Ocean")
    assert [q.data_source for q in qs] == ["nq", "hotpotqa"] and qs[0].id == "nq_train_0"


def test_verl_agent_parquet_variant(tmp_path):
    table = pa.Table.from_pylist(
        [
            {
                "data_source": "nq",
                "prompt": [
                    {"role": "system", "content": "You are a helpful and harmless assistant."},
                    {"role": "user", "content": "who wrote x"},
                ],
                "env_kwargs": {"question": "who wrote x", "ground_truth": {"target": ["y"]}, "data_source": "nq"},
                "extra_info": {"split": "test", "index": 7},
            }
        ]
    )
    pq.write_table(table, tmp_path / "test.parquet")
    (q,) = load_questions(tmp_path / "test.parquet")
    assert q.question == "who wrote x" and q.golden_answers == ("y",) and q.id == "nq_test_7"


def test_corpus_loader_gz_and_titles(official_dir):
    corpus = load_corpus_jsonl(official_dir / "corpus.jsonl.gz")
    assert (
        len(corpus) == 4 and corpus.title(2) == '"The Tale of ""Quotes"""' and corpus.text(1).startswith("Citibank is")
    )


@pytest.mark.parametrize(
    "content, match",
    [
        ('{"id": 1, "question": "q"}\n', "missing 'golden_answers'"),
        ('{"id": 1, "question": "q", "golden_answers": []}\n', "golden answers must be a non-empty list"),
        ('{"id": 1, "question": "q", "golden_answers": ["a"]}\n{broken\n', r"test.jsonl:2: not valid JSON"),
        ("[1, 2]\n", "expected a JSON object"),
    ],
)
def test_malformed_questions_name_the_file_and_line(tmp_path, content, match):
    (tmp_path / "test.jsonl").write_text(content)
    with pytest.raises(DataError, match=match):
        load_flashrag_jsonl(tmp_path / "test.jsonl")


def test_corrupt_files_give_clear_errors(tmp_path):
    (tmp_path / "c.jsonl.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(DataError, match="c.jsonl.gz"):
        load_corpus_jsonl(tmp_path / "c.jsonl.gz")
    (tmp_path / "x.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(DataError, match="x.parquet"):
        load_searchr1_parquet(tmp_path / "x.parquet")
    with pytest.raises(DataError, match="unknown question format"):
        load_questions(tmp_path / "q.csv")
    (tmp_path / "corpus.jsonl").write_text('{"id": "0", "text": "no contents"}\n')
    with pytest.raises(DataError, match="need 'contents'"):
        load_corpus_jsonl(tmp_path / "corpus.jsonl")


def test_env_on_official_format_data(official_dir):
    env = gym.make("prover/SearchQA-v0", split="test", data=str(official_dir))
    assert env.unwrapped.task_ids() == ["test_0", "test_1", "test_2"]
    obs, info = env.reset(options={"task_id": "test_0"})
    assert obs == "when was citibank founded?" and info["data_source"] == official_dir.name
    obs, *_ = env.step("search[citibank founded]")
    assert obs.startswith('\n\n<information>Doc 1(Title: "Citibank") Citibank is the consumer division')
    _, reward, term, _, info = env.step("answer[1812]")
    assert reward == 1.0 and term and info["won"]
    # expert on the MuSiQue-style question follows the decomposition
    env.reset(options={"task_id": "test_2"})
    assert env.unwrapped.expert_action() == "search[where was Citibank founded]"
    # parquet split from the same directory
    train = gym.make("prover/SearchQA-v0", split="train", data=str(official_dir))
    assert train.reset(seed=1)[0] == "where does the hudson flow?"


def test_missing_data_is_named(tmp_path):
    with pytest.raises(DataError, match="no such file or directory"):
        gym.make("prover/SearchQA-v0", data=str(tmp_path / "nope"))
    with pytest.raises(DataError, match="no questions file for split 'dev'"):
        gym.make("prover/SearchQA-v0", split="dev", data=str(tmp_path))
    write_jsonl(tmp_path / "test.jsonl", [{"id": "a", "question": "q", "golden_answers": ["x"]}])
    with pytest.raises(DataError, match="no corpus.jsonl"):
        gym.make("prover/SearchQA-v0", split="test", data=str(tmp_path))
