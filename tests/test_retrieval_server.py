"""A retrieval server the leaderboard starts and stops itself (an env block's ``retrieval_server``):
prover_gym.searchqa.serve.served, the preset checks of the block, and a run that uses it."""

from __future__ import annotations

import csv
import gzip
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import free_port

from prover_gym.searchqa.retrievers import HTTPRetriever
from prover_gym.searchqa.serve import ServerError, answers, loopback_port, served

ROOT = Path(__file__).resolve().parents[1]
CORPUS = [
    {"id": "0", "contents": '"Evan Morris"\nEvan L. Morris (1977 - 2015) was a lobbyist.'},
    {"id": "1", "contents": '"Citibank"\nCitibank was founded in 1812 as the City Bank of New York.'},
]


def _corpus(tmp_path: Path) -> Path:
    import json

    path = tmp_path / "wiki-18.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.writelines(json.dumps(row) + "\n" for row in CORPUS)
    return path


def test_served_starts_a_server_answers_and_stops_it(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    lines: list[str] = []
    with served(url, str(_corpus(tmp_path)), log=tmp_path / "server.log", echo=lines.append) as pid:
        assert pid is not None and answers(url)
        (hits,) = HTTPRetriever(url).search(["when was citibank founded"], 1)
        assert hits[0].id == "1"
        # a server already answering there is used as it is, not started twice
        with served(url, str(_corpus(tmp_path)), echo=lines.append) as again:
            assert again is None
    assert not answers(url)
    assert "started pid" in lines[0] and "already answers" in lines[1]


def test_served_names_a_missing_corpus_and_a_server_that_dies(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServerError, match="no such file.*prover-gym-data fetch searchqa"):
        with served(url, str(tmp_path / "missing.jsonl.gz")):
            pass
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    with pytest.raises(ServerError, match="exited with") as err:
        with served(url, str(bad), log=tmp_path / "server.log"):
            pass
    assert "its log" in str(err.value)  # the server's own error, from its log
    assert not answers(url)


def test_only_loopback_urls_with_a_port_are_served():
    assert loopback_port("http://127.0.0.1:8000") == ("127.0.0.1", 8000)
    for url in ("http://10.0.0.2:8000", "http://127.0.0.1", "ftp://127.0.0.1:21"):
        with pytest.raises(ValueError, match="loopback URL with a port"):
            loopback_port(url)


def _searchqa_preset(tmp_path: Path, url: str, server: dict) -> Path:
    kwargs = {"split": "test", "data_sources": ["single_hop"], "max_turns": 1, "retriever": "http", "search_url": url}
    preset = {
        "name": "served",
        "seeds": [0],
        "methods": ["random", "expert"],
        "eval": {"episodes": 3, "batch": 3},
        "envs": {
            "searchqa": {
                "env_id": "prover/SearchQA-v0",
                "train_kwargs": {**kwargs, "split": "train"},
                "eval_kwargs": kwargs,
                "group_by": "data_source",
                "retrieval_server": server,
            }
        },
    }
    path = tmp_path / "served.yaml"
    path.write_text(yaml.safe_dump(preset))
    return path


def _run(preset: Path, out: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "leaderboards/run.py"), "--preset", str(preset), "--out", str(out), "--jobs", "1"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=280, cwd=ROOT)


def test_a_leaderboard_run_starts_its_retrieval_server_and_stops_it(tmp_path):
    from prover_gym.searchqa.bundled import bundled_data_dir

    url = f"http://127.0.0.1:{free_port()}"
    corpus = str(bundled_data_dir() / "corpus.jsonl")
    proc = _run(_searchqa_preset(tmp_path, url, {"corpus": corpus}), tmp_path / "out")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "retrieval server: started pid" in proc.stdout
    assert not answers(url)
    rows = {r["method"]: float(r["success_mean"]) for r in csv.DictReader((tmp_path / "out/leaderboard.csv").open())}
    assert rows["expert"] == 1.0  # the expert's searches went through the server


@pytest.mark.parametrize(
    "server, url, expected",
    [
        ({"corpus": "missing.jsonl.gz"}, None, "retrieval_server.corpus = 'missing.jsonl.gz': no such file"),
        ({"corpus": "c", "retriever": "dense"}, None, "retriever dense needs encoder"),
        ({"corpus": "c", "retriver": "bm25"}, None, "did you mean 'retriever'"),
        ({"corpus": "c"}, "http://10.1.2.3:8000", "needs a loopback URL with a port"),
    ],
)
def test_the_preset_checks_name_a_bad_retrieval_server_block(tmp_path, server, url, expected):
    server = {**server, "corpus": str(tmp_path / server["corpus"]) if server["corpus"] == "c" else server["corpus"]}
    if server["corpus"].endswith("/c"):
        Path(server["corpus"]).write_text("")
    proc = _run(_searchqa_preset(tmp_path, url or f"http://127.0.0.1:{free_port()}", server), tmp_path / "out")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert expected in proc.stderr and "Traceback" not in proc.stderr
