"""Official-format data for the toy twin of the paper preset (leaderboards/presets/paper-toy.yaml),
in the layout `prover-gym-data fetch all` leaves, from the tests' official-format fixtures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WEBSHOP_TRAIN_FROM = 1500  # WebShop's human-goal split: test [0, 500), dev [500, 1500), train the rest


def write_toy_data(root: Path) -> dict[str, str]:
    """Write ALFWorld, WebShop and Search-QA data under ``root``; returns the env vars to export."""
    from test_webshop_data import write_official

    alfworld = root / "alfworld"
    for split in ("train", "valid_unseen"):  # the one official fixture game in both splits
        shutil.copytree(ROOT / "tests/fixtures/alfworld_json_2.1.1/valid_unseen", alfworld / "json_2.1.1" / split)
    webshop = root / "webshop"
    webshop.mkdir(parents=True)
    write_official(webshop)
    # enough human goals that WebShop's own split leaves a train split (goals 1500+): the fixture's
    # goals repeated under new assignment ids
    human = json.loads((webshop / "items_human_ins.json").read_text())
    goals = [(asin, g) for asin, gs in human.items() for g in gs if g["instruction_attributes"]]  # kept ones
    extended: dict[str, list] = {}
    for i in range(WEBSHOP_TRAIN_FROM + 4):
        asin, goal = goals[i % len(goals)]
        extended.setdefault(asin, []).append({**goal, "assignment_id": f"toy{i}"})
    (webshop / "items_human_ins.json").write_text(json.dumps(extended))
    searchqa = root / "searchqa"
    write_searchqa(searchqa)
    return {"ALFWORLD_DATA": str(alfworld), "WEBSHOP_DATA": str(webshop), "SEARCHQA_DATA": str(searchqa)}


def write_searchqa(folder: Path, train: int = 64, test: int = 8) -> None:
    """Bundled single-hop Search-QA questions (which the shipped base answers now and then, so groups
    are mixed and ProVer's path runs) in Search-R1's layout: train.parquet (its prompt template), a
    FlashRAG-style test.jsonl and the corpus as wiki-18.jsonl.gz."""
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq
    from test_searchqa_data import TEMPLATE

    from prover_gym.searchqa.bundled import bundled_data_dir

    bundled = bundled_data_dir()
    folder.mkdir(parents=True)
    with gzip.open(folder / "wiki-18.jsonl.gz", "wb") as fh:
        fh.write((bundled / "corpus.jsonl").read_bytes())

    def single_hop(split: str, n: int) -> list[dict]:  # the kind of question the shipped base was trained on
        rows = [json.loads(line) for line in (bundled / f"{split}.jsonl").read_text().splitlines()]
        return [r for r in rows if (r.get("metadata") or {}).get("data_source") == "single_hop"][:n]

    (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in single_hop("test", test)))
    rows = single_hop("train", train)
    table = pa.Table.from_pylist(
        [
            {
                "data_source": (r.get("metadata") or {}).get("data_source", "nq"),
                "prompt": [{"role": "user", "content": TEMPLATE.format(q=r["question"])}],
                "ability": "fact-reasoning",
                "reward_model": {"style": "rule", "ground_truth": {"target": r["golden_answers"]}},
                "extra_info": {"split": "train", "index": i},
            }
            for i, r in enumerate(rows)
        ]
    )
    pq.write_table(table, folder / "train.parquet")
