"""credit.jsonl: a record per judged segment, for every env, valid against its schema, and true to
what the trainer did (the bonus in the record is the bonus in the advantages)."""

import json

import pytest
from conftest import CHROMIUM, run_chromium

from trainers.config import load_config
from trainers.credit_record import SCHEMA, validate
from trainers.train import Trainer


def _setting(name: str) -> list[str]:
    from trainers.bases import base_dir, recipe

    spec = recipe(name)
    return [
        f"env_id={spec['env_id']}",
        f"env_kwargs={json.dumps(spec['train_kwargs'])}",
        f"policy_format={json.dumps(spec['format'])}",
        f"max_tokens={spec['sft']['max_tokens']}",
        f"model_path={base_dir(name)}",
        "tasks_per_iteration=4",
        "group_size=4",
        "continuations=2",
        "max_verified_groups=4",
        "progress=false",
        "torch_threads=1",
    ]


def _records(out) -> list[dict]:
    path = out / "credit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


BASES = ["searchqa", "webshop_hasty", "alfworld_hasty"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, bundled_dir):
    """A short prover run of each env: (out_dir, metrics rows) by base name."""
    out = {}
    for base in BASES:
        run_dir = tmp_path_factory.mktemp(base)
        trainer = Trainer(load_config(None, [*_setting(base), "iterations=2", "method=prover", f"out_dir={run_dir}"]))
        out[base] = (run_dir, trainer.run())
        trainer.close()
    return out


@pytest.mark.parametrize("base", BASES)
def test_a_short_prover_run_of_each_env_writes_valid_credit_records(runs, base):
    out, rows = runs[base]
    records = _records(out)
    assert len(records) == sum(r["prover/proposed_segments"] for r in rows) > 0
    for rec in records:
        validate(rec)
        traj = rec["trajectories"][rec["proposal"]["trajectory"]]
        assert 0 <= rec["proposal"]["start"] <= rec["proposal"]["end"] < len(traj["actions"])
        ver = rec["verification"]
        assert ver["a_seg"] == pytest.approx(ver["after"]["value"] - ver["before"]["value"])
        for side in ("before", "after"):
            s = ver[side]
            if s["source"] == "continuations":  # each continuation's result is the outcome recorded
                assert [c["won"] for c in s["continuations"]] == s["outcomes"] and len(s["outcomes"]) == 2
        assert rec["credited"] == (ver["a_seg"] > 0) and (rec["bonus"] > 0) == rec["credited"]
        assert rec["credited_tokens"] > 0 if rec["credited"] else rec["credited_tokens"] == 0
        assert all(len(o) <= rec["obs_chars"] for t in rec["trajectories"] for o in t["observations"])
        assert any(t["won"] for t in rec["trajectories"]) and not all(t["won"] for t in rec["trajectories"])
    # the counts in metrics.jsonl are those of the records
    by_iteration = {r["iteration"]: r for r in rows}
    for it, row in by_iteration.items():
        mine = [r for r in records if r["iteration"] == it]
        assert sum(r["credited"] for r in mine) == row["prover/credited_segments"]
        assert sum(r["credited_tokens"] for r in mine) == row["prover/credited_tokens"]
        assert sum(r["cost"]["generated_tokens"] for r in mine) == row["cost/credit_tokens"]


def test_records_of_the_ablations_and_the_cap(tmp_path, bundled_dir):
    runs = {
        "unverified": ["method=prover_unverified"],
        "random": ["method=prover_random", "credit_records=1"],
        "exhaustive": ["method=prover", "judge={kind: exhaustive}"],
    }
    recs = {}
    for name, extra in runs.items():
        out = tmp_path / name
        Trainer(load_config(None, [*_setting("searchqa"), "iterations=1", *extra, f"out_dir={out}"])).run()
        recs[name] = _records(out)
        assert recs[name], name
        for r in recs[name]:
            validate(r)
    assert all(r["verification"] is None and r["credited"] for r in recs["unverified"])
    assert len(recs["random"]) == 1 and recs["random"][0]["proposal"]["judge"] == "random"
    assert all(r["proposal"]["judge"] == "exhaustive" for r in recs["exhaustive"])


def test_the_schema_refuses_a_broken_record():
    import jsonschema

    with pytest.raises(jsonschema.ValidationError):
        validate({"version": 1})
    assert "verification" in SCHEMA["required"]


def test_the_inspector_page_holds_every_record_and_the_cli_says_what_is_missing(runs, tmp_path):
    from leaderboards.credit_view import load_records, main, summary

    out, _ = runs["webshop_hasty"]
    assert main([str(out)]) == 0
    page = (out / "inspect.html").read_text()
    records = load_records(out)
    assert page.count('"iteration"') == len(records) and "A_seg histogram" in page
    s = summary(records)
    assert s["records"] == len(records) and sum(b["count"] for b in s["histogram"]) == s["verified"]
    if s["credited"]:
        assert sum(s["credited_tokens_by_turn"].values()) == pytest.approx(1.0)
    # WebShop's item setting records the buy as the pivot: every verified record is either at it or off it
    checked = [r for r in records if r["verification"] and r["pivot_step"] is not None]
    assert checked and s["at_pivot"]["verified"] + s["off_pivot"]["verified"] == len(checked)
    assert s["at_pivot"]["verified"] == sum(r["hit_pivot"] for r in checked) and len(s["a_seg_se"]) == s["verified"]
    assert main([str(tmp_path)]) == 2  # no credit.jsonl: exit 2 with the reason
    (tmp_path / "credit.jsonl").write_text("{not json\n")
    with pytest.raises(ValueError, match="credit.jsonl:1"):
        load_records(tmp_path)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it when apt works)")
@pytest.mark.parametrize("base", BASES)
def test_the_inspector_renders_in_headless_chromium(runs, base, tmp_path):
    from PIL import Image

    from leaderboards.credit_view import write_page

    out, _ = runs[base]
    page = write_page(out, webshop_view="http://127.0.0.1:3000")
    records = _records(out)
    pick = next((i for i, r in enumerate(records) if r["credited"]), 0)
    url = f"{page.as_uri()}#r={pick}"
    dom = run_chromium("--dump-dom", "--virtual-time-budget=3000", url, profile=tmp_path / "p1").stdout
    dom = dom.split("<script")[0]  # the rendered page, not the script's own text
    # the script ran: the list and the chosen group are rendered, with no script error recorded
    assert '<pre id="errors"></pre>' in dom, dom[-2000:]
    assert dom.count('<tr data-i="') == len(records)
    assert 'class="turn segment' in dom  # the proposed segment is highlighted
    assert dom.count('class="bar"') == 2 and 'class="mark ' in dom  # V(before), V(after) and each outcome
    if records[pick]["credited"]:
        assert 'class="bonus"' in dom
    # WebShop trajectories link to their pages in the WebShop view, the others do not
    assert ('class="view" href="http://127.0.0.1:3000/task/' in dom) == (base == "webshop_hasty")
    shot = tmp_path / f"{base}.png"
    run_chromium(f"--screenshot={shot}", "--window-size=1300,1400", url, profile=tmp_path / "p2")
    img = Image.open(shot).convert("RGB")
    assert img.size == (1300, 1400)
    colours = img.getcolors(maxcolors=100_000)
    assert colours is not None and len(colours) > 50  # text, bars and boxes, not a blank page
    assert any(abs(r - 0xFF) < 8 and abs(g - 0xF3) < 8 and abs(b - 0xB0) < 8 for _, (r, g, b) in colours)  # segment


def test_credit_options_faithful_to_the_premise(tmp_path, bundled_dir):
    """Every mixed group judged; V(before) from its own continuations; the exhaustive judge's pick
    verified again on fresh continuations; the placebo on the won side."""
    out = tmp_path / "all"
    extra = ["max_verified_groups=null", "value_before=continuations", "iterations=1", "method=prover"]
    rows = Trainer(load_config(None, [*_setting("searchqa"), *extra, f"out_dir={out}"])).run()
    recs = _records(out)
    assert len(recs) == rows[0]["groups/mixed"] == rows[0]["prover/proposed_segments"] > 0
    assert all(r["verification"]["before"]["source"] in ("continuations", "terminal") for r in recs)
    out = tmp_path / "reverify"
    exhaustive = ["judge={kind: exhaustive}", "reverify=true", "iterations=1", "method=prover"]
    Trainer(load_config(None, [*_setting("searchqa"), *exhaustive, f"out_dir={out}"])).run()
    recs = _records(out)
    assert recs and all(r["proposal"]["judge"] == "exhaustive" for r in recs)
    for r in recs:  # the credited estimate comes from fresh continuations, not the judge's own maximum
        sides = [r["verification"][s] for s in ("before", "after")]
        assert any(s["source"] == "continuations" and s["continuations"] for s in sides)
    out = tmp_path / "placebo"
    Trainer(load_config(None, [*_setting("searchqa"), "iterations=1", "method=prover_random", f"out_dir={out}"])).run()
    recs = _records(out)
    assert recs and all(r["trajectories"][r["proposal"]["trajectory"]]["won"] for r in recs)
    assert all(r["proposal"]["side"] == "won" for r in recs)
    with pytest.raises(ValueError, match="value_before"):
        load_config(None, ["value_before=own"])


def test_the_pivot_judge_proposes_the_recorded_pivot():
    import judges
    from agents.trajectory import Trajectory, Turn

    def traj(won, pivot):
        turns = [Turn("o", "t", f"a{k}", 0.0, None) for k in range(4)]
        turns[-1].info = {"pivot_step": pivot} if pivot is not None else {}
        return Trajectory("prover/ALFWorld-v0", "t", "task", turns, won=won)

    judge = judges.make({"kind": "pivot"})
    p = judge.propose([traj(False, 1), traj(True, None), traj(True, 2)])
    assert (p.trajectory, p.start, p.end) == (2, 2, 2)
    p = judges.make({"kind": "pivot", "side": "failed"}).propose([traj(False, 1), traj(True, 2)])
    assert (p.trajectory, p.start) == (0, 1)
    assert judge.propose([traj(False, 1), traj(True, None)]) is None  # no recorded pivot: no proposal
    assert judge.propose([traj(True, 1), traj(True, 2)]) is None  # not a mixed group


def test_the_pair_variance_gives_the_continuations_a_stated_power_needs():
    from leaderboards.credit_view import continuations_for, pair_variance

    def rec(before, after):
        return {"verification": {"before": {"outcomes": before}, "after": {"outcomes": after}}}

    # before: p = 1/2 of 4 (unbiased variance 1/3); after: a winner's own end (one outcome, exact)
    records = [rec([True, False, True, False], [True]), rec([True] * 4, [False] * 4), {"verification": None}]
    assert pair_variance(records) == pytest.approx((1 / 3 + 0.0) / 2)
    assert pair_variance([{"verification": None}]) is None
    # SE(M) = sqrt(0.32 / M) <= 0.22 / z(0.9) = 0.1717 needs M >= 10.9: 11
    assert continuations_for(0.32, 0.22, power=0.9) == 11
    assert continuations_for(0.32, 0.22, power=0.5) == 1  # z = 0: any M gets the sign right half the time
    with pytest.raises(ValueError, match="a_seg"):
        continuations_for(0.32, 0.0)
