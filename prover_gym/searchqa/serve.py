"""A retrieval server speaking the Search-R1 API, so many env workers share one index.

    python -m prover_gym.searchqa.serve --port 8000                 # the bundled corpus
    python -m prover_gym.searchqa.serve --corpus wiki-18.jsonl --port 8000
    python -m prover_gym.searchqa.serve --corpus wiki-18.jsonl --retriever dense --encoder ./e5-base-v2

``POST /retrieve`` takes ``{"queries": [...], "topk": k, "return_scores": true}`` (or verl-agent's
``{"query": "..."}``) and answers ``{"result": [[{"document": {"id", "contents"}, "score": s}, ...], ...]}``
(without ``return_scores``: lists of documents). ``GET /health`` reports the index. The server
binds 127.0.0.1 by default and refuses a non-loopback address unless ``--allow-remote`` is given.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import logging
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel

from prover_gym.searchqa.retrievers import BM25Retriever, Retriever

MAX_QUERIES_PER_REQUEST = 4096
MAX_TOPK = 1000


class RetrieveRequest(BaseModel):
    """The body of Search-R1's ``/retrieve``: ``queries`` (or one ``query``), ``topk``, ``return_scores``."""

    queries: list[str] | None = None
    query: str | None = None
    topk: int | None = None
    return_scores: bool = False


def create_app(retriever: Retriever, *, default_topk: int = 3, n_docs: int | None = None):
    """The FastAPI app over any retriever."""
    from fastapi import FastAPI, HTTPException

    app = FastAPI(title="prover-gym retrieval server", version="1")

    @app.get("/health")
    def health():
        return {"status": "ok", "retriever": retriever.identity, "n_docs": n_docs}

    @app.post("/retrieve")
    def retrieve(req: RetrieveRequest):  # sync: FastAPI runs it in its thread pool
        queries = req.queries if req.queries is not None else ([req.query] if req.query is not None else None)
        if queries is None:
            raise HTTPException(422, "send {'queries': [...]} (or {'query': '...'})")
        if len(queries) > MAX_QUERIES_PER_REQUEST:
            raise HTTPException(413, f"at most {MAX_QUERIES_PER_REQUEST} queries per request; split the batch")
        k = req.topk or default_topk
        if not 1 <= k <= MAX_TOPK:
            raise HTTPException(422, f"topk must be in 1..{MAX_TOPK}")
        results = retriever.search(queries, k)
        if req.return_scores:
            return {
                "result": [
                    [{"document": {"id": p.id, "contents": p.contents}, "score": p.score} for p in ps] for ps in results
                ]
            }
        return {"result": [[{"id": p.id, "contents": p.contents} for p in ps] for ps in results]}

    return app


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ServerError(RuntimeError):
    """A retrieval server this process started did not come up (its log's tail is in the message)."""


SERVER_OPTIONS = ("corpus", "retriever", "encoder", "index", "topk", "startup_timeout")


def answers(url: str, timeout: float = 2.0) -> bool:
    """Whether a retrieval server answers ``GET /health`` at ``url`` (its base URL, or .../retrieve)."""
    import requests

    base = url.rstrip("/").removesuffix("/retrieve")
    try:
        return requests.get(base + "/health", timeout=timeout).ok
    except requests.RequestException:
        return False


def loopback_port(url: str) -> tuple[str, int]:
    """(host, port) of a loopback ``search_url``; ValueError naming the URL otherwise."""
    parts = urlsplit(str(url))
    if parts.scheme != "http" or not parts.hostname or not _is_loopback(parts.hostname) or parts.port is None:
        raise ValueError(
            f"search_url {url!r}: a server started by the run needs a loopback URL with a port, "
            "e.g. http://127.0.0.1:8000"
        )
    return parts.hostname, parts.port


@contextlib.contextmanager
def served(
    url: str,
    corpus: str,
    *,
    retriever: str = "bm25",
    encoder: str | None = None,
    index: str | None = None,
    topk: int = 3,
    startup_timeout: float = 3600.0,
    log: Path | None = None,
    echo=print,
):
    """Serve ``corpus`` at the loopback ``url`` for the duration of the block, as a child process
    (``python -m prover_gym.searchqa.serve``), and stop it after; a server that already answers there
    is used as it is. The first start over a large corpus builds its BM25 index (cached, so later
    starts are fast): ``startup_timeout`` allows for that. Yields the server's pid, or None when one
    was already running."""
    host, port = loopback_port(url)
    if answers(url):
        echo(f"retrieval server: {url} already answers; using it as it is")
        yield None
        return
    if not Path(corpus).is_file():
        raise ServerError(
            f"retrieval_server.corpus = {corpus!r}: no such file; fetch it with `prover-gym-data fetch searchqa`"
        )
    cmd = [sys.executable, "-m", "prover_gym.searchqa.serve", "--host", host, "--port", str(port)]
    cmd += ["--corpus", str(corpus), "--retriever", retriever, "--topk", str(topk)]
    cmd += ["--encoder", encoder] if encoder else []
    cmd += ["--index", index] if index else []
    log_file = open(log, "ab") if log is not None else None  # noqa: SIM115  (closed below)
    out = log_file if log_file is not None else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + startup_timeout
        while not answers(url, timeout=1.0):
            if proc.poll() is not None or time.time() > deadline:
                why = (
                    f"exited with {proc.returncode}"
                    if proc.poll() is not None
                    else f"did not answer in {startup_timeout:.0f} s"
                )
                tail = Path(log).read_text(errors="replace")[-2000:] if log is not None else ""
                raise ServerError(
                    f"the retrieval server for {url} ({' '.join(cmd)}) {why}"
                    + (f"; its log ({log}) ends:\n{tail}" if tail else "")
                )
            time.sleep(0.5)
        echo(
            f"retrieval server: started pid {proc.pid} on {url} ({retriever} over {corpus})"
            + (f"; log {log}" if log else "")
        )
        yield proc.pid
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if log_file is not None:
            log_file.close()


def main(argv: list[str] | None = None) -> int:
    """``prover-gym-serve-retriever``: serve a corpus over HTTP with Search-R1's retrieval protocol."""
    parser = argparse.ArgumentParser(prog="python -m prover_gym.searchqa.serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="bind address (loopback unless --allow-remote)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--corpus", help="wiki-18-style jsonl(.gz); default: the bundled generated corpus")
    parser.add_argument("--topk", type=int, default=3, help="k when a request sends none")
    parser.add_argument(
        "--retriever",
        choices=("bm25", "dense"),
        default="bm25",
        help="bm25 (embedded) or dense (E5 + FAISS flat index, as Search-R1's server)",
    )
    parser.add_argument("--index", help="FAISS index for --retriever dense (default: e5_Flat.index next to the corpus)")
    parser.add_argument("--encoder", help="local encoder directory for --retriever dense (e.g. e5-base-v2)")
    parser.add_argument("--allow-remote", action="store_true", help="permit binding a non-loopback address")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    if not _is_loopback(args.host) and not args.allow_remote:
        print(
            f"refusing to bind {args.host}: not a loopback address; pass --allow-remote to serve other machines",
            file=sys.stderr,
        )
        return 2
    from prover_gym.searchqa.data import load_corpus_jsonl

    if args.corpus:
        corpus_path = Path(args.corpus)
    else:
        from prover_gym.searchqa.bundled import bundled_data_dir

        corpus_path = bundled_data_dir() / "corpus.jsonl"
    corpus = load_corpus_jsonl(corpus_path)
    retriever: Retriever
    if args.retriever == "dense":
        from prover_gym.searchqa.dense import INDEX_NAME, DenseRetriever

        if not args.encoder:
            parser.error("--retriever dense needs --encoder DIR (a local encoder, e.g. e5-base-v2)")
        retriever = DenseRetriever(
            corpus, Path(args.index) if args.index else corpus_path.parent / INDEX_NAME, args.encoder
        )
    else:
        retriever = BM25Retriever(corpus)
    import uvicorn

    logging.basicConfig(level=args.log_level.upper())
    print(f"serving {len(corpus)} passages on http://{args.host}:{args.port}/retrieve", flush=True)
    uvicorn.run(
        create_app(retriever, default_topk=args.topk, n_docs=len(corpus)),
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=False,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
