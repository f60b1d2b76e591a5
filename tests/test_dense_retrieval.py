"""Dense retrieval (E5 + FAISS flat index, Search-R1's layout) end to end on a tiny local encoder built
here: the index builder, the embedded retriever against a brute-force reference, the env and the server."""

import json
import re
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import requests

from prover_gym.searchqa.data import Corpus, DataError, load_corpus_jsonl

faiss = pytest.importorskip("faiss")  # in the dev extra, so CI runs these
torch = pytest.importorskip("torch")

N_PASSAGES = 60


@pytest.fixture(scope="module")
def dense_dir(tmp_path_factory, bundled_dir):
    """A corpus (the first passages of the bundled one), a tiny BERT encoder with a WordPiece vocabulary
    of its words (random weights, seeded) and e5_Flat.index built by the project's builder."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from prover_gym.searchqa.dense import build_index

    root = tmp_path_factory.mktemp("dense")
    lines = (bundled_dir / "corpus.jsonl").read_text().splitlines()[:N_PASSAGES]
    (root / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    words = sorted(
        {w for line in lines for w in re.findall(r"\w+|[^\w\s]", json.loads(line)["contents"].lower())}
        | {"query", "passage", ":"}
    )
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
    enc = root / "tiny-e5"
    enc.mkdir()
    tokenizer = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True)
    assert "[UNK]" not in tokenizer.tokenize(json.loads(lines[0])["contents"])
    tokenizer.save_pretrained(str(enc))
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=128,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=512,
    )
    model = BertModel(config)
    with torch.no_grad():  # a bag-of-words encoder, so that retrieval means something: no position signal
        model.embeddings.position_embeddings.weight.zero_()
        model.embeddings.token_type_embeddings.weight.zero_()
        model.embeddings.word_embeddings.weight.normal_(0.0, 1.0)
    model.save_pretrained(str(enc))
    build_index(load_corpus_jsonl(root / "corpus.jsonl"), enc, root / "e5_Flat.index")
    return root


def _reference(enc_dir, texts, prefix, max_length):
    """Search-R1's Encoder.encode, written out: mean over the attention mask, then L2-normalise."""
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(enc_dir))
    model = AutoModel.from_pretrained(str(enc_dir)).eval()
    inputs = tok([prefix + t for t in texts], max_length=max_length, padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**inputs).last_hidden_state.numpy()
    mask = inputs["attention_mask"].numpy()[..., None]
    pooled = (hidden * mask).sum(1) / mask.sum(1)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def test_dense_retriever_matches_a_brute_force_reference(dense_dir):
    from prover_gym.searchqa.dense import DenseRetriever

    corpus = load_corpus_jsonl(dense_dir / "corpus.jsonl")
    index = faiss.read_index(str(dense_dir / "e5_Flat.index"))
    assert index.ntotal == N_PASSAGES and index.metric_type == faiss.METRIC_INNER_PRODUCT
    retriever = DenseRetriever(corpus, dense_dir / "e5_Flat.index", dense_dir / "tiny-e5")
    queries = [corpus.title(3).strip('"'), "largest city parliament sea", "zzzz", corpus.text(10)]
    got = retriever.search(queries, 3)
    docs = _reference(dense_dir / "tiny-e5", corpus.contents, "passage: ", 180)
    qs = _reference(dense_dir / "tiny-e5", queries, "query: ", 256)
    scores = qs @ docs.T
    for row, hits in zip(scores, got):
        want = np.sort(row)[::-1][:3]
        assert np.allclose([h.score for h in hits], want, atol=1e-5)  # the top-3 scores (ties in any order)
        assert np.allclose([h.score for h in hits], row[[int(h.id) for h in hits]], atol=1e-5)  # of those passages
        assert all(h.contents == corpus.contents[int(h.id)] for h in hits)
    # row i of the index is passage i: a passage's own text finds it first
    own = retriever.search([corpus.contents[i] for i in range(0, N_PASSAGES, 6)], 1)
    assert sum(hits[0].id == corpus.ids[i] for hits, i in zip(own, range(0, N_PASSAGES, 6))) >= 8
    assert len(retriever.search(["x"], N_PASSAGES + 5)[0]) == N_PASSAGES  # FAISS pads with -1: dropped


def test_env_with_dense_retrieval(dense_dir, bundled_dir):
    env = gym.make(
        "prover/SearchQA-v0",
        split="test",
        data=str(bundled_dir),
        corpus=str(dense_dir / "corpus.jsonl"),
        retriever="dense",
        encoder=str(dense_dir / "tiny-e5"),
    )  # index: e5_Flat.index beside the corpus
    env.reset(seed=0)
    obs, reward, term, trunc, info = env.step("search[largest city parliament sea]")
    assert obs.startswith("\n\n<information>Doc 1(Title: ") and obs.count("Doc ") == 3
    want = env.unwrapped.retriever.search(["largest city parliament sea"], 3)[0]
    assert f"Doc 1(Title: {want[0].title}) {want[0].text}" in obs
    env.close()
    with pytest.raises(ValueError, match="needs encoder="):
        gym.make(
            "prover/SearchQA-v0",
            split="test",
            data=str(bundled_dir),
            corpus=str(dense_dir / "corpus.jsonl"),
            retriever="dense",
        )
    with pytest.raises(ValueError, match="for retriever='dense'"):
        gym.make("prover/SearchQA-v0", split="test", data=str(bundled_dir), encoder=str(dense_dir / "tiny-e5"))


def test_dense_errors_name_the_fix(dense_dir, tmp_path, monkeypatch):
    from prover_gym.searchqa.dense import DenseRetriever, import_faiss

    small = Corpus(["0"], ['"A"\nalpha'])
    with pytest.raises(DataError, match=r"holds 60 vectors but the corpus has 1 passages"):
        DenseRetriever(small, dense_dir / "e5_Flat.index", dense_dir / "tiny-e5")
    with pytest.raises(DataError, match="no such file"):
        DenseRetriever(small, tmp_path / "e5_Flat.index", dense_dir / "tiny-e5")
    with pytest.raises(DataError, match="no config.json"):
        DenseRetriever(small, dense_dir / "e5_Flat.index", tmp_path)
    (tmp_path / "bad.index").write_bytes(b"not an index")
    with pytest.raises(DataError, match="not a FAISS index"):
        DenseRetriever(load_corpus_jsonl(dense_dir / "corpus.jsonl"), tmp_path / "bad.index", dense_dir / "tiny-e5")
    monkeypatch.setitem(sys.modules, "faiss", None)
    with pytest.raises(ImportError, match=r"prover-gym\[dense\]"):
        import_faiss()


def test_server_with_dense_retrieval(dense_dir):
    from conftest import free_port, wait_for_http

    from prover_gym.searchqa.dense import DenseRetriever
    from prover_gym.searchqa.retrievers import HTTPRetriever

    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "prover_gym.searchqa.serve",
            "--port",
            str(port),
            "--retriever",
            "dense",
            "--corpus",
            str(dense_dir / "corpus.jsonl"),
            "--encoder",
            str(dense_dir / "tiny-e5"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(proc, url + "/health")
        assert requests.get(url + "/health", timeout=5).json()["retriever"].startswith("dense:")
        queries = ["largest city parliament sea", "sovereign state"]
        remote = HTTPRetriever(url).search(queries, 3)
        local = DenseRetriever(
            load_corpus_jsonl(dense_dir / "corpus.jsonl"), dense_dir / "e5_Flat.index", dense_dir / "tiny-e5"
        ).search(queries, 3)
        assert [[p.id for p in ps] for ps in remote] == [[p.id for p in ps] for ps in local]
        assert np.allclose([p.score for ps in remote for p in ps], [p.score for ps in local for p in ps], atol=1e-5)
    finally:
        proc.terminate()
        proc.wait(10)


def test_build_cli_writes_the_search_r1_layout(dense_dir, tmp_path):
    import shutil

    shutil.copy(dense_dir / "corpus.jsonl", tmp_path / "corpus.jsonl")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "prover_gym.searchqa.dense",
            "build",
            "--corpus",
            str(tmp_path / "corpus.jsonl"),
            "--encoder",
            str(dense_dir / "tiny-e5"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    a = faiss.read_index(str(tmp_path / "e5_Flat.index"))
    b = faiss.read_index(str(dense_dir / "e5_Flat.index"))
    assert a.ntotal == b.ntotal == N_PASSAGES
    assert np.allclose(a.reconstruct_n(0, a.ntotal), b.reconstruct_n(0, b.ntotal), atol=1e-6)
