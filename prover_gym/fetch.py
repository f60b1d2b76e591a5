"""``prover-gym-data``: the official data of the three benchmarks, fetched by one command and checked.

    prover-gym-data fetch alfworld|webshop|searchqa|all --to DIR    # DIR/<env>/..., then the export lines
    prover-gym-data check DIR [--env alfworld ...]                  # a folder fetched another way
    prover-gym-data model NAME | --list                              # a named pretrained model's HF folder

Sources are the ones the original projects' own setup scripts download from:

- ALFWorld: ``alfworld-download`` (alfworld 0.4.2, ``scripts/alfworld-download``): the json_2.1.1
  trajectory and PDDL zips and the json_2.1.2 tw-pddl games from the project's GitHub releases, unpacked
  into ``json_2.1.1/`` (the layout ``data=$ALFWORLD_DATA/json_2.1.1`` reads);
- WebShop: ``setup.sh -d all`` (princeton-nlp/WebShop): ``items_shuffle.json``, ``items_ins_v2.json`` and
  ``items_human_ins.json`` from the project's Google Drive files (the ids of its ``gdown`` lines);
- Search-QA: Search-R1's training data (``PeterJinGo/nq_hotpotqa_train``: ``train.parquet``,
  ``test.parquet``) and its wiki-18 corpus (``PeterJinGo/wiki-18-corpus``: ``wiki-18.jsonl.gz``), the
  Hugging Face datasets its README and ``scripts/download.py`` name.

Every file is downloaded to ``<name>.part`` and renamed only when whole; an interrupted download resumes
with an HTTP Range request. A file whose sha256 is pinned in the manifest is verified (a mismatch removes
the partial file and names both digests). The upstream files have no published digests, so the shipped
manifest pins none: the digest of each file fetched is recorded in ``DIR/<env>/fetched.json`` and
``check`` verifies against it later. ``$PROVER_GYM_DATA_MIRROR`` (or ``--mirror URL``) serves every file
from ``URL/<env>/<name>`` instead (a local mirror; the tests use a loopback server).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from prover_gym.cache import file_sha256

ENVS = ("alfworld", "webshop", "searchqa")
ENV_VARS = {"alfworld": "ALFWORLD_DATA", "webshop": "WEBSHOP_DATA", "searchqa": "SEARCHQA_DATA"}
_ALFWORLD = "https://github.com/alfworld/alfworld/releases/download"
_DRIVE = "https://drive.usercontent.google.com/download?export=download&confirm=t&id="
_HF = "https://huggingface.co/datasets"


@dataclass(frozen=True)
class Source:
    """One file of an official data set: its name under DIR/<env>/, its URL, its pinned sha256 (or None: recorded on
    fetch, checked afterwards), and whether it is a zip to unpack."""

    name: str  # the file's name in DIR/<env>/
    url: str
    sha256: str | None = None  # pinned digest, or None (recorded on fetch, checked afterwards)
    unzip: bool = False  # a zip unpacked into DIR/<env>/ (then removed)


SOURCES: dict[str, tuple[Source, ...]] = {
    "alfworld": (
        Source("json_2.1.1_json.zip", f"{_ALFWORLD}/0.2.2/json_2.1.1_json.zip", unzip=True),
        Source("json_2.1.1_pddl.zip", f"{_ALFWORLD}/0.2.2/json_2.1.1_pddl.zip", unzip=True),
        Source("json_2.1.2_tw-pddl.zip", f"{_ALFWORLD}/0.4.0/json_2.1.2_tw-pddl.zip", unzip=True),
    ),
    "webshop": (
        Source("items_shuffle.json", _DRIVE + "1A2whVgOO0euk5O13n2iYDM0bQRkkRduB"),
        Source("items_ins_v2.json", _DRIVE + "1s2j6NgHljiZzQNL3veZaAiyW_qDEgBNi"),
        Source("items_human_ins.json", _DRIVE + "14Kb5SPBk_jfdLZ_CDBNitW98QLDlKR5O"),
    ),
    "searchqa": (
        Source("train.parquet", f"{_HF}/PeterJinGo/nq_hotpotqa_train/resolve/main/train.parquet"),
        Source("test.parquet", f"{_HF}/PeterJinGo/nq_hotpotqa_train/resolve/main/test.parquet"),
        Source("wiki-18.jsonl.gz", f"{_HF}/PeterJinGo/wiki-18-corpus/resolve/main/wiki-18.jsonl.gz"),
    ),
}
# what `data=` of each env reads (relative to DIR/<env>/), as the presets pass it
DATA_PATH = {"alfworld": "json_2.1.1", "webshop": ".", "searchqa": "."}


class FetchError(RuntimeError):
    """A download or a fetched folder that is not what it should be; the message says which and why."""


def download(url: str, dest: Path, sha256: str | None = None, *, timeout: float = 60.0, progress: bool = True) -> str:
    """``url`` to ``dest`` through ``dest.part`` (resumed with a Range request when present); returns the
    sha256. A pinned ``sha256`` that does not match removes the partial file and raises FetchError."""
    import requests
    from tqdm import tqdm

    part = dest.with_name(dest.name + ".part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    have = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    try:
        resp = requests.get(url, stream=True, headers=headers, timeout=timeout)
    except requests.RequestException as exc:
        raise FetchError(f"{dest.name}: cannot reach {url} ({type(exc).__name__}); run the same command again") from exc
    with resp:
        if resp.status_code == 416 and have:  # the part is already whole
            pass
        elif resp.status_code in (200, 206):
            if resp.status_code == 200:
                have = 0  # the server ignored the Range: start over
            total = resp.headers.get("Content-Length")
            bar = tqdm(
                total=(have + int(total)) if total else None,
                initial=have,
                unit="B",
                unit_scale=True,
                desc=dest.name,
                disable=not progress or None,
                leave=False,
            )
            try:
                with open(part, "ab" if have else "wb") as fh:
                    for chunk in resp.iter_content(1 << 14):
                        fh.write(chunk)
                        bar.update(len(chunk))
            except requests.RequestException as exc:  # a cut connection: the part stays, a re-run resumes
                raise FetchError(
                    f"{dest.name}: the connection broke after {part.stat().st_size} bytes ({type(exc).__name__}); "
                    "run the same command again to resume"
                ) from exc
            finally:
                bar.close()
            if total is not None and part.stat().st_size < have + int(total):
                raise FetchError(
                    f"{dest.name}: got {part.stat().st_size} of {have + int(total)} bytes; run the same command "
                    "again to resume"
                )
        else:
            raise FetchError(f"{dest.name}: {url} answered HTTP {resp.status_code}; the file is missing there")
    digest = file_sha256(part)
    if sha256 is not None and digest != sha256:
        part.unlink()
        raise FetchError(
            f"{dest.name}: sha256 {digest} does not match the pinned {sha256}; the partial file was removed. "
            "Run again; if it persists, the source changed"
        )
    os.replace(part, dest)
    return digest


def _unzip(archive: Path, into: Path) -> None:
    root = into.resolve()
    with zipfile.ZipFile(archive) as zf:
        for member in zf.namelist():
            target = (into / member).resolve()
            if root not in target.parents and target != root:
                raise FetchError(f"{archive.name}: member {member!r} would be written outside {into}")
        zf.extractall(into)


def fetch(env: str, root: Path, *, mirror: str | None = None, progress: bool = True, log=print) -> Path:
    """Fetch ``env``'s files into ``root/env`` (files already there and recorded are kept); returns it."""
    if env not in SOURCES:
        raise FetchError(f"unknown data set {env!r}; use one of {', '.join(ENVS)} or all")
    folder = Path(root) / env
    folder.mkdir(parents=True, exist_ok=True)
    record_path = folder / "fetched.json"
    record = json.loads(record_path.read_text()) if record_path.is_file() else {}
    mirror = mirror or os.environ.get("PROVER_GYM_DATA_MIRROR")
    for src in SOURCES[env]:
        if src.name in record and record[src.name].get("done"):
            continue
        url = f"{mirror.rstrip('/')}/{env}/{src.name}" if mirror else src.url
        dest = folder / src.name
        log(f"{env}: {src.name} <- {url}")
        digest = download(url, dest, src.sha256, progress=progress)
        if src.unzip:
            _unzip(dest, folder)
            dest.unlink()
        record[src.name] = {"url": url, "sha256": digest, "done": True, "unzipped": src.unzip}
        record_path.write_text(json.dumps(record, indent=1) + "\n")
    return folder


def problems(env: str, folder: Path, *, load: bool = True) -> list[str]:
    """What is missing or wrong in ``folder`` (DIR/<env>) for ``env``; with ``load``, gym.make must load it."""
    folder = Path(folder)
    if not folder.is_dir():
        return [f"{env}: {folder} does not exist; fetch it with `prover-gym-data fetch {env} --to {folder.parent}`"]
    out = []
    if env == "alfworld":
        base = folder / "json_2.1.1"
        for split in ("train", "valid_seen", "valid_unseen"):
            games = list((base / split).glob("*/*/game.tw-pddl")) if (base / split).is_dir() else []
            if not games:
                out.append(f"alfworld: {base / split} has no */*/game.tw-pddl (the tw-pddl zip unpacked?)")
            elif not list((base / split).glob("*/*/traj_data.json")):
                out.append(f"alfworld: {base / split} has games but no traj_data.json (the json zip unpacked?)")
    elif env == "webshop":
        for pattern, what in (("items_shuffle*.json", "products"), ("items_ins_v2*.json", "attributes")):
            if not list(folder.glob(pattern)):
                out.append(f"webshop: {folder} has no {pattern} (the {what} file)")
        if not (folder / "items_human_ins.json").is_file():
            out.append(f"webshop: {folder} has no items_human_ins.json (the human goals)")
    elif env == "searchqa":
        for split in ("train", "test"):
            if not any((folder / f"{split}{ext}").is_file() for ext in (".parquet", ".jsonl")):
                out.append(f"searchqa: {folder} has no {split}.parquet (or {split}.jsonl)")
        corpora = ("wiki-18.jsonl.gz", "wiki-18.jsonl", "corpus.jsonl.gz", "corpus.jsonl")
        if not any((folder / c).is_file() for c in corpora):
            out.append(f"searchqa: {folder} has no corpus ({' / '.join(corpora)})")
    record_path = folder / "fetched.json"
    if record_path.is_file():  # files kept as fetched: their recorded digests
        for name, entry in json.loads(record_path.read_text()).items():
            if entry.get("unzipped") or not (folder / name).is_file():
                continue
            if file_sha256(folder / name) != entry.get("sha256"):
                out.append(f"{env}: {folder / name} differs from the file fetched (sha256); fetch it again")
    if load and not out:
        out += _load_problems(env, folder)
    return out


def _load_problems(env: str, folder: Path) -> list[str]:
    if env == "searchqa":  # the questions of both splits and the corpus's first rows (the corpus is served
        # to the paper preset over HTTP: an in-process index of wiki-18 here would take hours)
        from prover_gym.searchqa.data import DataError, _json_lines, load_questions, resolve_data_dir

        try:
            for split in ("train", "test"):
                questions, corpus = resolve_data_dir(folder, split)
                if not load_questions(questions):
                    return [f"searchqa: {questions} holds no questions"]
            for lineno, row in _json_lines(corpus):  # type: ignore[arg-type]
                if "contents" not in row:
                    return [f"searchqa: {corpus}:{lineno}: a corpus row needs 'contents'"]
                if lineno >= 100:
                    break
        except DataError as exc:
            return [f"searchqa: {exc}"]
        return []
    import gymnasium as gym

    import prover_gym  # noqa: F401

    env_id = {"alfworld": "prover/ALFWorld-v0", "webshop": "prover/WebShop-v0", "searchqa": "prover/SearchQA-v0"}
    split = {"alfworld": "valid_unseen", "webshop": "all"}[env]
    data = folder / DATA_PATH[env]
    try:
        e = gym.make(env_id[env], split=split, data=str(data))
        e.reset(seed=0)
        e.close()
    except Exception as exc:  # noqa: BLE001  (whatever the loader says is the problem to report)
        return [f"{env}: gym.make({env_id[env]!r}, split={split!r}, data={str(data)!r}) failed: {exc}"]
    return []


def exports(root: Path, envs) -> list[str]:
    """The ``export VAR=...`` lines that point the envs at the fetched data under ``root``."""
    return [f"export {ENV_VARS[e]}={Path(root).resolve() / e}" for e in envs]


def main(argv: list[str] | None = None) -> int:
    """``prover-gym-data``: fetch the official data sets, check them, print their exports."""
    ap = argparse.ArgumentParser(prog="prover-gym-data", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download and unpack a data set into DIR/<env>/, then check it")
    f.add_argument("what", choices=[*ENVS, "all"])
    f.add_argument("--to", required=True, help="the folder to fetch into (each data set in its own sub-folder)")
    f.add_argument("--mirror", help="a base URL serving <env>/<name> instead of the upstream sources")
    f.add_argument("--no-load", action="store_true", help="skip the gym.make check at the end")
    c = sub.add_parser("check", help="check a folder (DIR/<env>/ per data set) and name what is missing")
    c.add_argument("dir")
    c.add_argument("--env", nargs="+", choices=ENVS, help="which data sets (default: those DIR has)")
    c.add_argument("--no-load", action="store_true", help="skip the gym.make check")
    m = sub.add_parser("model", help="prepare a named pretrained model (prover_gym/models.py); prints its folder last")
    m.add_argument("name", nargs="?", help="a named model (see --list); model_path: pretrained:NAME uses it")
    m.add_argument("--list", action="store_true", help="list the named models and whether each is installed")
    args = ap.parse_args(argv)
    if args.cmd == "model":
        return _model(args, ap)
    if args.cmd == "fetch":
        envs = list(ENVS) if args.what == "all" else [args.what]
        root = Path(args.to).expanduser()
        try:
            for env in envs:
                fetch(env, root, mirror=args.mirror)
        except FetchError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    else:
        root = Path(args.dir).expanduser()
        envs = args.env or [e for e in ENVS if (root / e).is_dir()]
        if not envs:
            print(
                f"error: {root} holds none of {', '.join(ENVS)}/; fetch with `prover-gym-data fetch all --to {root}`",
                file=sys.stderr,
            )
            return 1
    found = [p for env in envs for p in problems(env, root / env, load=not args.no_load)]
    if found:
        print("\n".join(f"missing or wrong: {p}" for p in found), file=sys.stderr)
        return 1
    print("ok: " + ", ".join(envs) + " load. For the paper preset:")
    print("\n".join(exports(root, envs)))
    return 0


def _model(args, ap) -> int:
    """``prover-gym-data model``: list the named models, or prepare one and print its folder."""
    from prover_gym import models

    if args.list or not args.name:
        if not args.list:
            ap.error("model: name a model or give --list")
        for name in models.names():
            found = models.problem(models.PREFIX + name)
            state = "installed" if found is None else f"not installed ({models.entry(name)['install']})"
            print(f"{name}\t{models.entry(name)['description']}\t{state}")
        return 0
    try:
        folder = models.model_dir(args.name)
    except models.ModelUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
