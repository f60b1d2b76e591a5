"""``prover-gym-inspect RUN_DIR``: where the credit went, as one static HTML page.

Reads ``RUN_DIR/credit.jsonl`` (trainers/credit_record.py) and writes ``RUN_DIR/inspect.html``: a
list of every judged segment (iteration, group, task, judge, A_seg with its standard error, credited
or not) with filters (credited, sign of A_seg, env, whether the judge hit the env's pivot step,
iteration), and for the selected group its trajectories side by side: the proposed segment
highlighted with the bonus its tokens received, the turn where each other trajectory departs from
the proposed one linked from the segment, and the verification as two bars (V(before), V(after))
with one mark per continuation (won / failed; hover for its actions). Summary figures: the A_seg
histogram, the judge's localisation against ``pivot_step`` where the env records one, and the share
of credited tokens by turn position. No server is needed (``--serve`` serves it on 127.0.0.1).

    prover-gym-inspect runs/my_run            # writes runs/my_run/inspect.html
    prover-gym-inspect runs/my_run --serve    # and serves it at http://127.0.0.1:8765/inspect.html
"""

from __future__ import annotations

import argparse
import html
import json
import math
import sys
from collections import Counter
from pathlib import Path

PAGE = "inspect.html"


def load_records(run_dir: Path) -> list[dict]:
    """The credit records of a run directory (an error naming the file when it has none)."""
    path = Path(run_dir) / "credit.jsonl"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: credit records are written by prover runs (method prover, prover_random, "
            "prover_unverified) from this version on; train one into this folder first"
        )
    records = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not a JSON record ({exc.msg}); the file is cut or edited") from None
    return records


def summary(records: list[dict]) -> dict:
    """The page's figures: A_seg histogram, localisation against pivot_step, credited tokens by turn."""
    a = [r["verification"]["a_seg"] for r in records if r.get("verification")]
    bins = [round(-1 + 0.25 * i, 2) for i in range(9)]  # -1.0 .. 1.0 in quarters
    hist = Counter(min(7, max(0, int((x + 1) / 0.25))) if x < 1 else 7 for x in a)
    from trainers.judge_eval import localisation

    known = [r for r in records if r.get("pivot_step") is not None]
    located = localisation(records)
    by_turn: Counter = Counter()
    for r in records:
        if r["credited"] and r["credited_tokens"]:
            p = r["proposal"]
            span = p["end"] - p["start"] + 1
            for k in range(p["start"], p["end"] + 1):
                by_turn[k] += r["credited_tokens"] / span
    total = sum(by_turn.values()) or 1.0
    checked = [r for r in known if r.get("verification")]  # verified, with a known pivot: hit or not
    at_pivot = [r["verification"]["a_seg"] for r in checked if r.get("hit_pivot")]
    off_pivot = [r["verification"]["a_seg"] for r in checked if not r.get("hit_pivot")]
    return {
        "records": len(records),
        "verified": len(a),
        "credited": sum(r["credited"] for r in records),
        "positive": sum(x > 0 for x in a),
        "a_seg_se": [round(r["verification"]["a_seg_se"], 4) for r in records if r.get("verification")],
        "pair_variance": pair_variance(records),
        "at_pivot": {"verified": len(at_pivot), "positive": sum(x > 0 for x in at_pivot)},
        "off_pivot": {"verified": len(off_pivot), "positive": sum(x > 0 for x in off_pivot)},
        "histogram": [{"low": bins[i], "high": bins[i + 1], "count": hist.get(i, 0)} for i in range(8)],
        "pivot_known": located["known"],
        "pivot_hits": located["hits"],
        "credited_tokens_by_turn": {str(k): v / total for k, v in sorted(by_turn.items())},
    }


def pair_variance(records: list[dict]) -> float | None:
    """The pooled variance of one continuation pair's outcome difference (before minus after), from the
    records' sampled sides (unbiased per side; a side measured by one outcome, such as a winner's own
    end, counts as exact): SE(A_seg) at M continuations a side is sqrt(this / M)."""
    per = []
    for r in records:
        v = r.get("verification")
        if not v:
            continue
        var = 0.0
        for side in (v["before"], v["after"]):
            o = side.get("outcomes") or []
            if len(o) >= 2:
                p = sum(o) / len(o)
                var += p * (1 - p) * len(o) / (len(o) - 1)
        per.append(var)
    return sum(per) / len(per) if per else None


def continuations_for(variance: float, a_seg: float, *, power: float = 0.9) -> int:
    """The M (continuations a side) at which a segment whose true advantage is ``a_seg`` verifies
    positive with probability ``power`` (normal approximation): SE(M) = sqrt(variance / M) <= a_seg / z."""
    from statistics import NormalDist

    if a_seg <= 0:
        raise ValueError(f"a_seg={a_seg!r}: the advantage to detect must be > 0")
    z = NormalDist().inv_cdf(power)
    return max(1, math.ceil(variance * (z / a_seg) ** 2))


def _bars_svg(values: list[tuple[str, float]], *, width: int = 360, height: int = 120, unit: str = "") -> str:
    """A small bar chart as inline SVG (labels under the bars, value over them)."""
    if not values:
        return "<p class='none'>no data</p>"
    top = max(v for _, v in values) or 1.0
    w = width / len(values)
    parts = [f"<svg class='chart' width='{width}' height='{height + 30}' role='img'>"]
    for i, (label, v) in enumerate(values):
        h = height * v / top
        x = i * w
        parts.append(
            f"<rect x='{x + 2:.1f}' y='{height - h + 12:.1f}' width='{w - 4:.1f}' height='{h:.1f}' fill='#4a78c2'/>"
            f"<text x='{x + w / 2:.1f}' y='{height - h + 9:.1f}' font-size='10' text-anchor='middle'>"
            f"{v:.2g}{unit}</text><text x='{x + w / 2:.1f}' y='{height + 26}' font-size='10' "
            f"text-anchor='middle'>{html.escape(label)}</text>"
        )
    return "".join(parts) + "</svg>"


_CSS = """
body{font-family:sans-serif;margin:1.5em;color:#222}h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.4em}
table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:3px 7px;font-size:13px;text-align:left}
#list tr{cursor:pointer}#list tr.sel{background:#dde8ff}#list tr:hover{background:#f0f4ff}
.filters label{margin-right:1em;font-size:13px}.figs{display:flex;gap:2em;flex-wrap:wrap}
.trajs{display:flex;gap:10px;overflow-x:auto;align-items:flex-start}
.traj{border:2px solid #bbb;border-radius:6px;min-width:220px;max-width:300px;padding:4px}
.traj.won{border-color:#3a3}.traj.failed{border-color:#c44}.traj.proposed{box-shadow:0 0 0 3px #e0b000}
.traj h3{font-size:13px;margin:2px 0 6px}.turn{border:1px solid #ddd;border-radius:4px;margin:4px 0;padding:3px;
font-size:12px}.turn .act{font-family:monospace;font-weight:bold}.turn .obs{color:#666;white-space:pre-wrap;
max-height:5.5em;overflow:hidden}.turn.segment{background:#fff3b0;border:2px solid #e0b000}
.turn.diverge{border-left:5px solid #c44}.bonus{background:#e0b000;color:#000;border-radius:3px;padding:0 4px;
font-size:11px;margin-left:4px}.ver{margin:10px 0}.barrow{display:flex;align-items:center;gap:8px;margin:4px 0}
.barlabel{width:190px;font-size:13px}.bartrack{width:300px;height:16px;background:#eee;border-radius:3px}
.bar{height:16px;background:#4a78c2;border-radius:3px}.marks{display:flex;gap:3px}
.mark{width:12px;height:12px;border-radius:2px}.mark.won{background:#3a3}.mark.failed{background:#c44}
.mark.exact{outline:2px solid #222}#errors{color:#c00}.links a{margin-right:1em}.none{color:#888}
"""

_JS = r"""
window.addEventListener('error', function (e) {
  document.getElementById('errors').textContent += 'script error: ' + e.message + '\n';
});
var R = JSON.parse(document.getElementById('data').textContent);
function esc(s) { var d = document.createElement('div'); d.textContent = String(s); return d.innerHTML; }
function envName(id) { return id.replace('prover/', '').replace('-v0', ''); }
function aseg(r) { return r.verification ? r.verification.a_seg : null; }
function passes(r) {
  var f = function (id) { return document.getElementById(id).value; };
  var a = aseg(r);
  if (f('f-credited') !== 'all' && String(r.credited) !== f('f-credited')) return false;
  if (f('f-sign') === 'pos' && !(a !== null && a > 0)) return false;
  if (f('f-sign') === 'neg' && !(a !== null && a < 0)) return false;
  if (f('f-sign') === 'zero' && !(a !== null && a === 0)) return false;
  if (f('f-env') !== 'all' && r.env_id !== f('f-env')) return false;
  var hit = r.hit_pivot === undefined ? null : r.hit_pivot;
  if (f('f-pivot') === 'hit' && hit !== true) return false;
  if (f('f-pivot') === 'miss' && hit !== false) return false;
  if (f('f-pivot') === 'unknown' && hit !== null) return false;
  if (f('f-iter') !== 'all' && String(r.iteration) !== f('f-iter')) return false;
  return true;
}
function renderList() {
  var body = document.querySelector('#list tbody'), rows = [];
  R.forEach(function (r, i) {
    if (!passes(r)) return;
    var a = aseg(r), p = r.proposal;
    rows.push('<tr data-i="' + i + '"' + (i === current ? ' class="sel"' : '') + '><td>' + r.iteration + '</td><td>' +
      r.group + '</td><td>' + esc(r.task_id) + '</td><td>' + esc(envName(r.env_id)) + '</td><td>' + esc(p.judge) +
      ' (' + esc(p.side) + ')</td><td>traj ' + p.trajectory + ', turns ' + p.start + '..' + p.end + '</td><td>' +
      (a === null ? 'not verified' : (a >= 0 ? '+' : '') + a.toFixed(2) + ' &plusmn; ' +
      r.verification.a_seg_se.toFixed(2)) + '</td><td>' + (r.credited ? 'yes' : 'no') + '</td><td>' +
      (r.hit_pivot === null || r.hit_pivot === undefined ? '?' : (r.hit_pivot ? 'hit' : 'miss')) + '</td></tr>');
  });
  body.innerHTML = rows.join('') || '<tr><td colspan="9" class="none">no record passes the filters</td></tr>';
  document.getElementById('shown').textContent = rows.length + ' of ' + R.length + ' records';
  body.querySelectorAll('tr[data-i]').forEach(function (tr) {
    tr.addEventListener('click', function () { show(+tr.dataset.i); });
  });
}
function side(name, s, exact) {
  var marks = s.continuations.length ? s.continuations.map(function (c) {
    return '<span class="mark ' + (c.won ? 'won' : 'failed') + '" title="' + esc(c.actions.join(' > ')) + '"></span>';
  }) : s.outcomes.map(function (o) {
    var cls = 'mark ' + (o ? 'won' : 'failed') + (exact ? ' exact' : '');
    return '<span class="' + cls + '" title="' + esc(s.source) + '"></span>';
  });
  return '<div class="barrow"><span class="barlabel">' + name + ' (state before turn ' + s.boundary + ', ' +
    esc(s.source) + ')</span><span class="bartrack"><div class="bar" style="width:' + (100 * s.value).toFixed(1) +
    '%"></div></span><span>' + s.value.toFixed(2) + '</span><span class="marks">' + marks.join('') + '</span></div>';
}
function show(i) {
  current = i;
  location.hash = 'r=' + i;
  var r = R[i], p = r.proposal, mine = r.trajectories[p.trajectory];
  var html = '<h2>Iteration ' + r.iteration + ', group ' + r.group + ': task ' + esc(r.task_id) + ' (' +
    esc(envName(r.env_id)) + ', ' + esc(r.method) + ')</h2>';
  html += '<p>Judge <b>' + esc(p.judge) + '</b> proposed turns ' + p.start + '..' + p.end + ' of trajectory ' +
    p.trajectory + (p.reason ? ': <i>' + esc(p.reason) + '</i>' : '') + '. Pivot step: ' +
    (r.pivot_step === null ? 'not recorded' : r.pivot_step + (r.hit_pivot ? ' (hit)' : ' (missed)')) + '.</p>';
  var links = [];
  var div = {};
  r.trajectories.forEach(function (t) {
    if (t.index === p.trajectory) return;
    for (var k = 0; k < Math.min(t.actions.length, mine.actions.length); k++) {
      if (t.actions[k] !== mine.actions[k]) { div[t.index] = k; break; }
    }
    if (div[t.index] !== undefined) {
      links.push('<a href="#t' + t.index + '-' + div[t.index] + '">trajectory ' + t.index + ' (' +
        (t.won ? 'won' : 'failed') + ') departs at turn ' + div[t.index] + '</a>');
    }
  });
  html += '<p class="links">' + (links.join('') || 'no other trajectory departs from it') + '</p>';
  if (r.verification) {
    var v = r.verification;
    html += '<div class="ver"><b>Verification</b>: A_seg = ' + v.a_seg.toFixed(2) + ' &plusmn; ' +
      v.a_seg_se.toFixed(2) + ' (p = ' + v.p_value.toFixed(3) + '), ' + (r.credited ? 'credited: +' +
      r.bonus.toFixed(3) + ' on ' + r.credited_tokens + ' tokens' : 'not credited') + '; ' +
      r.cost.generated_tokens + ' tokens generated' + side('V(before)', v.before, v.before.source === 'terminal') +
      side('V(after)', v.after, v.after.source === 'terminal') + '</div>';
  } else {
    html += '<div class="ver"><b>Not verified</b> (the judge is trusted): ' + (r.credited ? 'credited +' +
      r.bonus.toFixed(3) + ' on ' + r.credited_tokens + ' tokens' : 'not credited') + '</div>';
  }
  html += '<div class="trajs">' + r.trajectories.map(function (t) {
    var cls = 'traj ' + (t.won ? 'won' : 'failed') + (t.index === p.trajectory ? ' proposed' : '');
    var link = VIEW && r.env_id === 'prover/WebShop-v0' ? ' <a class="view" href="' + VIEW + '/task/' +
      encodeURIComponent(r.task_id) + '?actions=' + encodeURIComponent(JSON.stringify(t.actions)) +
      '">pages</a>' : '';
    return '<div class="' + cls + '"><h3>trajectory ' + t.index + ': ' + (t.won ? 'won' : 'failed') +
      ' (reward ' + t.reward.toFixed(2) + ')' + link + '</h3>' + t.actions.map(function (a, k) {
        var seg = t.index === p.trajectory && k >= p.start && k <= p.end;
        var c = 'turn' + (seg ? ' segment' : '') + (div[t.index] === k ? ' diverge' : '');
        return '<div class="' + c + '" id="t' + t.index + '-' + k + '"><span class="act">' + k + ': ' + esc(a) +
          '</span>' + (seg && r.credited ? '<span class="bonus">+' + r.bonus.toFixed(2) + '</span>' : '') +
          (t.pivot_step === k ? ' <b>[pivot]</b>' : '') + (t.valid[k] ? '' : ' <i>(invalid)</i>') +
          '<div class="obs">' + esc(t.observations[k] || '') + '</div></div>';
      }).join('') + '</div>';
  }).join('') + '</div>';
  document.getElementById('detail').innerHTML = html;
  renderList();
}
var current = -1;
document.querySelectorAll('.filters select').forEach(function (s) { s.addEventListener('change', renderList); });
var m = /r=(\d+)/.exec(location.hash);
if (R.length) { show(m && +m[1] < R.length ? +m[1] : 0); } else { renderList(); }
"""


def render(records: list[dict], run_dir: Path | str = "", webshop_view: str | None = None) -> str:
    """The inspector page for ``records`` (self-contained HTML). ``webshop_view``: the base URL of a
    running ``prover-gym-webshop-view`` (started with the run's env kwargs): each WebShop trajectory
    then links to its pages there, beside the text."""
    s = summary(records)
    envs = sorted({r["env_id"] for r in records})
    iterations = sorted({r["iteration"] for r in records})
    hist = _bars_svg([(f"{b['low']:+.2f}", float(b["count"])) for b in s["histogram"]])
    turns = _bars_svg([(f"turn {k}", v) for k, v in s["credited_tokens_by_turn"].items()])
    local = (
        f"{s['pivot_hits']} of {s['pivot_known']} proposals contain the env's pivot step "
        f"({100 * s['pivot_hits'] / s['pivot_known']:.0f}%)"
        if s["pivot_known"]
        else "the env records no pivot step (info['pivot_step']) in this run"
    )

    def select(ident: str, label: str, options: list[tuple[str, str]]) -> str:
        opts = "".join(f"<option value='{html.escape(v)}'>{html.escape(t)}</option>" for v, t in options)
        return f"<label>{label} <select id='{ident}'><option value='all'>all</option>{opts}</select></label>"

    filters = "".join(
        [
            select("f-credited", "credited", [("true", "yes"), ("false", "no")]),
            select("f-sign", "A_seg", [("pos", "> 0"), ("neg", "< 0"), ("zero", "= 0")]),
            select("f-env", "env", [(e, e) for e in envs]),
            select("f-pivot", "judge vs pivot", [("hit", "hit"), ("miss", "missed"), ("unknown", "unknown")]),
            select("f-iter", "iteration", [(str(i), str(i)) for i in iterations]),
        ]
    )
    data = json.dumps(records).replace("</", "<\\/")
    view = json.dumps(webshop_view.rstrip("/") if webshop_view else None)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>prover-gym credit inspector</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<h1>Where the credit went: {html.escape(str(run_dir))}</h1>"
        f"<p>{s['records']} judged segments, {s['verified']} verified ({s['positive']} with A_seg &gt; 0), "
        f"{s['credited']} credited. Judge localisation: {local}.</p>"
        "<div class='figs'><div><h2>A_seg histogram (bins of 0.25 by lower edge)</h2>"
        f"{hist}</div><div><h2>Credited tokens by turn position</h2>{turns}</div></div>"
        f"<h2>Judged segments</h2><div class='filters'>{filters} <span id='shown'></span></div>"
        "<table id='list'><thead><tr><th>iteration</th><th>group</th><th>task</th><th>env</th><th>judge</th>"
        "<th>proposal</th><th>A_seg &plusmn; SE</th><th>credited</th><th>pivot</th></tr></thead><tbody></tbody></table>"
        "<div id='detail'></div><pre id='errors'></pre>"
        f"<script type='application/json' id='data'>{data}</script><script>var VIEW = {view};{_JS}</script>"
        "</body></html>"
    )


def write_page(run_dir: Path | str, webshop_view: str | None = None) -> Path:
    """Render ``run_dir``'s credit records into ``run_dir/inspect.html`` (written atomically)."""
    from prover_gym.cache import atomic_write

    run_dir = Path(run_dir)
    return atomic_write(run_dir / PAGE, render(load_records(run_dir), run_dir, webshop_view))


def main(argv: list[str] | None = None) -> int:
    """``prover-gym-inspect``: write a run's credit record as a static HTML page."""
    ap = argparse.ArgumentParser(prog="prover-gym-inspect", description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", help="a training run's out_dir (holds credit.jsonl)")
    ap.add_argument("--serve", action="store_true", help="serve the page on 127.0.0.1 after writing it")
    ap.add_argument("--port", type=int, default=8765, help="port for --serve (default 8765)")
    ap.add_argument(
        "--webshop-view",
        help="base URL of a prover-gym-webshop-view started with the run's env kwargs (e.g. "
        "http://127.0.0.1:3000): WebShop trajectories link to their pages there",
    )
    args = ap.parse_args(argv)
    try:
        page = write_page(args.run_dir, args.webshop_view)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(page)
    if args.serve:
        import functools
        import http.server

        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(page.parent))
        with http.server.ThreadingHTTPServer(("127.0.0.1", args.port), handler) as server:
            print(f"http://127.0.0.1:{args.port}/{PAGE} (Ctrl-C stops)", flush=True)
            try:
                server.serve_forever()
            except KeyboardInterrupt:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
