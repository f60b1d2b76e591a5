"""prover-gym-data against a loopback mirror serving small official-format fixture archives (no network):
the happy path with the export lines and the load check, resume after a cut connection, a checksum
mismatch (clear error, no partial file left), a missing file, and `check` naming what is missing."""

import gzip
import hashlib
import io
import json
import shutil
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from prover_gym import fetch as F

ROOT = Path(__file__).resolve().parents[1]
ALFWORLD_FIXTURE = ROOT / "tests" / "fixtures" / "alfworld_json_2.1.1" / "valid_unseen"


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _files(tmp_path) -> dict[str, bytes]:
    """{"<env>/<name>": bytes} in the upstream files' formats and names."""
    from test_searchqa_data import write_official_dir
    from test_webshop_data import write_official

    out = {}
    json_part, tw_part = {}, {}
    for split in ("train", "valid_seen", "valid_unseen"):  # the one fixture game stands in for each split
        for path in ALFWORLD_FIXTURE.rglob("*"):
            if path.is_file():
                name = f"json_2.1.1/{split}/{path.relative_to(ALFWORLD_FIXTURE).as_posix()}"
                (tw_part if path.name == "game.tw-pddl" else json_part)[name] = path.read_bytes()
    out["alfworld/json_2.1.1_json.zip"] = _zip(json_part)
    out["alfworld/json_2.1.1_pddl.zip"] = _zip({"json_2.1.1/README": b"pddl files"})
    out["alfworld/json_2.1.2_tw-pddl.zip"] = _zip(tw_part)
    (tmp_path / "shop_src").mkdir()
    (tmp_path / "qa_src").mkdir()
    shop = write_official(tmp_path / "shop_src")
    out["webshop/items_shuffle.json"] = (shop / "items_shuffle_1000.json").read_bytes()
    out["webshop/items_ins_v2.json"] = (shop / "items_ins_v2_1000.json").read_bytes()
    out["webshop/items_human_ins.json"] = (shop / "items_human_ins.json").read_bytes()
    qa = write_official_dir(tmp_path / "qa_src")
    out["searchqa/train.parquet"] = (qa / "train.parquet").read_bytes()
    out["searchqa/test.parquet"] = (qa / "train.parquet").read_bytes()
    filler = "".join(  # rows enough for a connection to break in the middle of the file
        json.dumps({"id": str(100 + i), "contents": f'"Filler {i}"\n{hashlib.sha256(str(i).encode()).hexdigest() * 4}'})
        + "\n"
        for i in range(3000)
    )
    out["searchqa/wiki-18.jsonl.gz"] = gzip.compress(
        gzip.decompress((qa / "corpus.jsonl.gz").read_bytes()) + filler.encode()
    )
    return out


class Mirror(BaseHTTPRequestHandler):
    files: dict = {}
    cut_once: set = set()  # names whose first answer stops half-way (the connection breaks)
    requests: list = []

    def do_GET(self):
        name = self.path.lstrip("/")
        type(self).requests.append((name, self.headers.get("Range")))
        data = self.files.get(name)
        if data is None:
            self.send_response(404)
            self.end_headers()
            return
        start = 0
        if self.headers.get("Range"):
            start = int(self.headers["Range"].split("=")[1].split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if name in self.cut_once:
            self.cut_once.discard(name)
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def mirror(tmp_path):
    Mirror.files = _files(tmp_path)
    Mirror.cut_once = set()
    Mirror.requests = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Mirror)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_fetch_all_then_export_lines_and_every_env_loads(mirror, tmp_path, capsys):
    root = tmp_path / "data"
    assert F.main(["fetch", "all", "--to", str(root), "--mirror", mirror]) == 0
    out = capsys.readouterr().out
    for env, var in F.ENV_VARS.items():
        assert f"export {var}={root.resolve() / env}" in out
    assert (root / "alfworld" / "json_2.1.1" / "train").is_dir() and not list(root.rglob("*.zip"))
    record = json.loads((root / "webshop" / "fetched.json").read_text())
    assert (
        record["items_shuffle.json"]["sha256"] == hashlib.sha256(Mirror.files["webshop/items_shuffle.json"]).hexdigest()
    )
    assert F.main(["check", str(root)]) == 0  # the same folder checks out, gym.make included
    n = len(Mirror.requests)
    assert F.main(["fetch", "all", "--to", str(root), "--mirror", mirror]) == 0
    assert len(Mirror.requests) == n  # a second fetch downloads nothing


def test_a_cut_connection_resumes_where_it_stopped(mirror, tmp_path):
    name = "searchqa/wiki-18.jsonl.gz"
    Mirror.cut_once = {name}
    root = tmp_path / "data"
    with pytest.raises(F.FetchError, match="run the same command again"):
        F.fetch("searchqa", root, mirror=mirror, progress=False)
    part = root / "searchqa" / "wiki-18.jsonl.gz.part"
    kept = part.stat().st_size
    assert 0 < kept < len(Mirror.files[name]) and not (root / "searchqa" / "wiki-18.jsonl.gz").exists()
    F.fetch("searchqa", root, mirror=mirror, progress=False)
    assert (root / "searchqa" / "wiki-18.jsonl.gz").read_bytes() == Mirror.files[name] and not part.exists()
    ranges = [r for n, r in Mirror.requests if n == name]
    assert ranges[0] is None and ranges[-1] == f"bytes={kept}-"  # resumed from what was kept, not restarted


def test_a_checksum_mismatch_is_named_and_leaves_no_partial_file(mirror, tmp_path, monkeypatch):
    bad = F.Source("items_shuffle.json", "unused", sha256="0" * 64)
    monkeypatch.setitem(F.SOURCES, "webshop", (bad,))
    with pytest.raises(F.FetchError, match=r"items_shuffle.json: sha256 [0-9a-f]{64} does not match the pinned 0{64}"):
        F.fetch("webshop", tmp_path / "data", mirror=mirror, progress=False)
    assert not list((tmp_path / "data" / "webshop").glob("items_shuffle.json*"))


def test_a_file_missing_upstream_is_named(mirror, tmp_path, capsys):
    del Mirror.files["webshop/items_human_ins.json"]
    assert F.main(["fetch", "webshop", "--to", str(tmp_path / "data"), "--mirror", mirror]) == 1
    err = capsys.readouterr().err
    assert "items_human_ins.json" in err and "HTTP 404" in err


def test_check_names_what_is_missing_and_what_changed(mirror, tmp_path, capsys):
    root = tmp_path / "data"
    for env in F.ENVS:
        F.fetch(env, root, mirror=mirror, progress=False)
    shutil.rmtree(root / "alfworld" / "json_2.1.1" / "valid_seen")
    (root / "searchqa" / "test.parquet").unlink()
    (root / "webshop" / "items_ins_v2.json").write_text("{}")
    assert F.main(["check", str(root), "--no-load"]) == 1
    err = capsys.readouterr().err
    assert "valid_seen has no */*/game.tw-pddl" in err
    assert "has no test.parquet" in err
    assert "items_ins_v2.json differs from the file fetched" in err
    assert F.main(["check", str(tmp_path / "empty")]) == 1
    assert "fetch all --to" in capsys.readouterr().err


def test_a_load_failure_is_reported_by_check(mirror, tmp_path, capsys):
    root = tmp_path / "data"
    F.fetch("searchqa", root, mirror=mirror, progress=False)
    (root / "searchqa" / "wiki-18.jsonl.gz").write_bytes(gzip.compress(b'{"id": "1", "text": "no contents"}\n'))
    (root / "searchqa" / "fetched.json").unlink()  # as if fetched another way
    assert F.main(["check", str(root)]) == 1
    assert "a corpus row needs 'contents'" in capsys.readouterr().err
