"""Dense retrieval as Search-R1 does it: an E5 encoder over a FAISS flat inner-product index.

Search-R1 (and verl-agent, which uses its server) retrieve with ``intfloat/e5-base-v2`` over
``e5_Flat.index``, a FAISS ``IndexFlatIP`` of wiki-18 built by ``search_r1/search/index_builder.py``,
next to the corpus jsonl (row ``i`` of the index is line ``i`` of the corpus). This module reads that
layout and reproduces its encoder exactly:

* queries are prefixed ``"query: "``, passages ``"passage: "`` (E5's convention; other encoders
  can set the prefixes, e.g. ``""`` for one trained without them);
* the encoder is a local Hugging Face directory (``AutoModel`` + ``AutoTokenizer``, nothing is
  downloaded), inputs cut at ``max_length`` tokens (256 for queries in Search-R1's server, 180 for
  passages in its index builder);
* embeddings are the attention-masked mean of the last hidden states, L2-normalised, float32; the
  score is the inner product (cosine).

``faiss-cpu`` is an optional dependency (``pip install 'prover-gym[dense]'``).

    python -m prover_gym.searchqa.dense build --corpus corpus.jsonl --encoder ./e5-base-v2 --out e5_Flat.index
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from prover_gym.searchqa.data import Corpus, DataError

QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
QUERY_MAX_LENGTH = 256  # retrieval_server.py: retrieval_query_max_length
PASSAGE_MAX_LENGTH = 180  # index_builder.py: --max_length default
INDEX_NAME = "e5_Flat.index"  # index_builder.py: f"{retrieval_method}_{faiss_type}.index"


def import_faiss():
    """The faiss module, or an ImportError saying how to install it (or to use bm25)."""
    try:
        import faiss
    except ImportError as exc:
        raise ImportError(
            "dense retrieval needs FAISS: pip install 'prover-gym[dense]' (faiss-cpu), or use retriever='bm25'"
        ) from exc
    return faiss


class Encoder:
    """A local Hugging Face text encoder with Search-R1's mean pooling and normalisation."""

    def __init__(self, path: str | Path, *, device: str | None = None, fp16: bool = False):
        import torch
        from transformers import AutoModel, AutoTokenizer

        path = Path(path).expanduser()
        if not (path / "config.json").is_file():
            raise DataError(
                f"encoder={str(path)!r}: not a Hugging Face model directory (no config.json); download "
                "e5-base-v2 once (e.g. `huggingface-cli download intfloat/e5-base-v2 --local-dir DIR`) and "
                "pass that directory"
            )
        self.path = path
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        model = AutoModel.from_pretrained(str(path), local_files_only=True)
        self.model = (model.half() if fp16 else model).to(self.device).eval()
        self.dim = int(self.model.config.hidden_size)

    def encode(self, texts: list[str], *, prefix: str, max_length: int, batch_size: int = 64) -> np.ndarray:
        """L2-normalised mean-pooled embeddings [N, dim] of ``prefix + text`` (E5's query: / passage: prefixes), in
        batches."""
        import torch

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                batch = [prefix + t for t in texts[start : start + batch_size]]
                inputs = self.tokenizer(
                    batch, max_length=max_length, padding=True, truncation=True, return_tensors="pt"
                ).to(self.device)
                hidden = self.model(**inputs, return_dict=True).last_hidden_state
                mask = inputs["attention_mask"]
                pooled = hidden.masked_fill(~mask[..., None].bool(), 0.0).sum(dim=1) / mask.sum(dim=1)[..., None]
                pooled = torch.nn.functional.normalize(pooled.float(), dim=-1)
                out[start : start + len(batch)] = pooled.cpu().numpy()
        return out


def build_index(
    corpus: Corpus,
    encoder: Encoder | str | Path,
    out: str | Path,
    *,
    passage_prefix: str = PASSAGE_PREFIX,
    max_length: int = PASSAGE_MAX_LENGTH,
    batch_size: int = 64,
) -> Path:
    """Write a FAISS ``IndexFlatIP`` of ``corpus`` (row i = passage i) as Search-R1's builder does."""
    faiss = import_faiss()
    encoder = encoder if isinstance(encoder, Encoder) else Encoder(encoder)
    embeddings = encoder.encode(corpus.contents, prefix=passage_prefix, max_length=max_length, batch_size=batch_size)
    index = faiss.index_factory(encoder.dim, "Flat", faiss.METRIC_INNER_PRODUCT)
    index.add(embeddings)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    faiss.write_index(index, str(tmp))
    tmp.replace(out)
    return out


def load_index(path: str | Path, n_passages: int, dim: int):
    """Read a FAISS index and check it fits the corpus and the encoder."""
    faiss = import_faiss()
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(
            f"index={str(path)!r}: no such file; Search-R1 ships it as {INDEX_NAME} next to the corpus, "
            "or build one with `python -m prover_gym.searchqa.dense build`"
        )
    try:
        index = faiss.read_index(str(path))
    except RuntimeError as exc:
        raise DataError(f"index={str(path)!r}: not a FAISS index ({str(exc).splitlines()[0]})") from None
    if index.ntotal != n_passages:
        raise DataError(
            f"index={str(path)!r} holds {index.ntotal} vectors but the corpus has {n_passages} passages; "
            "the index must be built from this very corpus (row i = line i)"
        )
    if index.d != dim:
        raise DataError(
            f"index={str(path)!r} has dimension {index.d} but the encoder gives {dim}; use the encoder "
            "the index was built with"
        )
    return index


class DenseRetriever:
    """Search-R1's ``DenseRetriever`` in-process: encode the queries, search the FAISS index, return
    the corpus rows. Scores are inner products of normalised embeddings."""

    def __init__(
        self,
        corpus: Corpus,
        index: str | Path,
        encoder: str | Path | Encoder,
        *,
        query_prefix: str = QUERY_PREFIX,
        max_length: int = QUERY_MAX_LENGTH,
        batch_size: int = 128,
    ):
        self.corpus = corpus
        self.encoder = encoder if isinstance(encoder, Encoder) else Encoder(encoder)
        self.index_path = Path(index).expanduser()
        self.index = load_index(self.index_path, len(corpus), self.encoder.dim)
        self.query_prefix, self.max_length, self.batch_size = query_prefix, max_length, batch_size
        self.identity = (
            f"dense:{corpus.fingerprint[:16]}:{self.encoder.path.name}:{self.index_path.name}:"
            f"{self.index.ntotal}:{query_prefix!r}"
        )

    def search(self, queries: list[str], k: int):
        """The top ``k`` passages for each query by inner product of E5 embeddings over the FAISS index, best first."""
        from prover_gym.searchqa.retrievers import Passage

        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if not queries:
            return []
        emb = self.encoder.encode(
            list(queries), prefix=self.query_prefix, max_length=self.max_length, batch_size=self.batch_size
        )
        scores, idxs = self.index.search(emb, k)
        ids, contents = self.corpus.ids, self.corpus.contents
        return [
            [Passage(ids[j], contents[j], float(s)) for j, s in zip(row_i, row_s) if j >= 0]
            for row_i, row_s in zip(idxs.tolist(), scores.tolist())
        ]


def main(argv: list[str] | None = None) -> int:
    """``prover-gym-dense-index``: build (or check) the dense index of a corpus."""
    parser = argparse.ArgumentParser(prog="python -m prover_gym.searchqa.dense", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="encode a corpus and write a FAISS flat index (Search-R1's layout)")
    b.add_argument("--corpus", required=True, help="wiki-18-style jsonl(.gz)")
    b.add_argument("--encoder", required=True, help="local Hugging Face encoder directory (e.g. e5-base-v2)")
    b.add_argument("--out", help=f"index file (default: {INDEX_NAME} next to the corpus)")
    b.add_argument("--passage-prefix", default=PASSAGE_PREFIX)
    b.add_argument("--max-length", type=int, default=PASSAGE_MAX_LENGTH)
    b.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args(argv)
    from prover_gym.searchqa.data import load_corpus_jsonl

    corpus = load_corpus_jsonl(Path(args.corpus))
    out = Path(args.out) if args.out else Path(args.corpus).parent / INDEX_NAME
    build_index(
        corpus,
        args.encoder,
        out,
        passage_prefix=args.passage_prefix,
        max_length=args.max_length,
        batch_size=args.batch_size,
    )
    print(f"wrote {out} ({len(corpus)} passages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
