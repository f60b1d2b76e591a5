"""Tables and plots from the results database: Markdown, CSV, JSON, a self-contained HTML page
(sortable tables, plots inlined) and PNG plots. Every file is written atomically."""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
import statistics
import time
from pathlib import Path

from leaderboards.stats import paired_difference_ci, seed_paired_difference, seed_verdict, standard_error
from prover_gym.cache import atomic_write
from trainers import methods as registry

SCORE_ENVS = {"webshop"}  # envs whose score (mean reward) is reported next to success, as in the paper


def success_se(rs: list[dict]) -> float:
    """Standard error of a cell's success: binomial over its episodes, or over seeds' means when several
    seeds vary more than that (whichever is larger)."""
    episodes = [v for r in rs for v in (r["extra"].get("outcomes") or {}).values()]
    binomial = standard_error(episodes) if episodes else 0.0
    if len(rs) < 2:
        return binomial
    _, sd = _mean_std([r["success"] for r in rs])
    return max(binomial, sd / math.sqrt(len(rs)))


def _outcomes(rows: list[dict], env: str, method: str) -> dict[int, dict[str, float]]:
    """seed -> {eval task: 0/1} of one method in one env."""
    out: dict[int, dict[str, float]] = {}
    for r in rows:
        if r["method"] == method and r["env"] == env:
            out[r["seed"]] = {t: float(v) for t, v in (r["extra"].get("outcomes") or {}).items()}
    return out


def _per_seed(rows: list[dict], env: str, a: str, b: str) -> tuple[dict, dict, list[float], list[float]]:
    """(seed -> success of a, seed -> success of b, a's and b's paired episode outcomes), each seed's
    success over the eval tasks both methods played in it (the same tasks: paired)."""
    oa, ob = _outcomes(rows, env, a), _outcomes(rows, env, b)
    sa, sb, xa, xb = {}, {}, [], []
    for seed in sorted(set(oa) & set(ob)):
        tasks = sorted(set(oa[seed]) & set(ob[seed]))
        if not tasks:
            continue
        sa[seed] = sum(oa[seed][t] for t in tasks) / len(tasks)
        sb[seed] = sum(ob[seed][t] for t in tasks) / len(tasks)
        xa += [oa[seed][t] for t in tasks]
        xb += [ob[seed][t] for t in tasks]
    return sa, sb, xa, xb


def comparisons(rows: list[dict], envs: list[str]) -> list[dict]:
    """Each pair of the method registry's comparisons (trainers/methods.py) per env and over all envs: the
    difference a - b paired by training seed, with a paired-t 95% interval over the seeds (None with one
    seed: no claim) and a verdict from it; beside it, labelled as such, the eval-task bootstrap
    interval, which is one checkpoint pair's eval noise only. Over all envs, a seed's difference is the
    mean of its envs' differences (seeds that ran in every env)."""
    out = []
    pairs = registry.comparisons()
    named = {m for pair in pairs for m in pair}
    extra = sorted({r["method"] for r in rows} - named - set(registry.names()), key=_order)  # preset variants
    variant_pairs = [(m, b) for m in extra for b in ("grpo", "grpo_matched", "prover")]  # the credit arms
    for a, b in pairs + variant_pairs:
        by_env = {}
        for env in envs:
            sa, sb, xa, xb = _per_seed(rows, env, a, b)
            if sa:
                by_env[env] = (sa, sb, xa, xb)
        units: list[tuple[str | None, tuple]] = list(by_env.items())
        if len(by_env) >= 2:
            common = sorted(set.intersection(*(set(v[0]) for v in by_env.values())))
            if common:
                mean = {s: sum(v[0][s] for v in by_env.values()) / len(by_env) for s in common}
                base = {s: sum(v[1][s] for v in by_env.values()) / len(by_env) for s in common}
                units.append(
                    (
                        None,
                        (
                            mean,
                            base,
                            [x for v in by_env.values() for x in v[2]],
                            [x for v in by_env.values() for x in v[3]],
                        ),
                    )
                )
        for where, (sa, sb, xa, xb) in units:
            seed_diff = seed_paired_difference(sa, sb)
            eval_diff = paired_difference_ci(xa, xb)
            out.append(
                {
                    "env": where or "all envs",
                    "a": a,
                    "b": b,
                    "seeds": len(seed_diff["seeds"]),
                    "pairs": len(xa),
                    "per_seed": seed_diff["per_seed"],
                    "diff": seed_diff["diff"],
                    "sd": seed_diff["sd"],
                    "low": seed_diff["low"],
                    "high": seed_diff["high"],
                    "eval_low": eval_diff[1],
                    "eval_high": eval_diff[2],
                    "verdict": seed_verdict(seed_diff),
                }
            )
    return out


def _comparison_table(comps: list[dict]) -> tuple[list[str], list[list[str]]]:
    header = [
        "comparison",
        "env",
        "paired seeds",
        "difference (points)",
        "95% CI over seeds",
        "verdict",
        "eval noise only: 95% CI over tasks",
    ]
    body = [
        [
            f"{c['a']} - {c['b']}",
            c["env"],
            str(c["seeds"]),
            f"{100 * c['diff']:+.1f}",
            f"{100 * c['low']:+.1f} to {100 * c['high']:+.1f}" if c["low"] is not None else "none (1 seed)",
            c["verdict"].split(":")[0],
            f"{100 * c['eval_low']:+.1f} to {100 * c['eval_high']:+.1f} ({c['pairs']} episodes)",
        ]
        for c in comps
    ]
    return header, body


def credited_share(credits: list[dict]) -> dict[int, float]:
    """Turn position -> share of the credited tokens, averaged over cells' credit summaries."""
    share: dict[int, float] = {}
    for c in credits:
        for turn, v in c["credited_tokens_by_turn"].items():
            share[int(turn)] = share.get(int(turn), 0.0) + v / len(credits)
    return share


def credit_table(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Per (env, method) over its seeds: judged / verified / A_seg > 0 / credited segments, the mean
    A_seg, the judge's localisation against the env's pivot step, and the credited tokens' share by
    turn position (from each cell's credit record)."""
    header = ["env", "method", "seeds", "judged", "verified", "A_seg > 0", "credited", "mean A_seg", "hit pivot"]
    header += ["A_seg > 0: pivot in / not in segment", "median SE(A_seg)", "bonus share of advantage mass"]
    header.append("credited tokens by turn (0 / 1 / 2 / 3+)")
    cells: dict[tuple[str, str], list[dict]] = {}
    bonus: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if r["extra"].get("credit"):
            cells.setdefault((r["env"], r["method"]), []).append(r["extra"]["credit"])
            if "prover/bonus_share" in r["extra"]:
                bonus.setdefault((r["env"], r["method"]), []).append(r["extra"]["prover/bonus_share"])
    body = []
    for (env, method), cs in sorted(cells.items(), key=lambda x: (x[0][0], _order(x[0][1]))):
        a = [x for c in cs for x in c.get("a_seg", [])]
        se = [x for c in cs for x in c.get("a_seg_se", [])]
        known, hits = sum(c["pivot_known"] for c in cs), sum(c["pivot_hits"] for c in cs)
        split = []
        for where in ("at_pivot", "off_pivot"):
            n = sum(c.get(where, {}).get("verified", 0) for c in cs)
            k = sum(c.get(where, {}).get("positive", 0) for c in cs)
            split.append(f"{k}/{n} ({100 * k / n:.0f}%)" if n else "-")
        shares = bonus.get((env, method), [])
        share = [0.0] * 4
        for turn, v in credited_share(cs).items():
            share[min(3, turn)] += v
        body.append(
            [
                env,
                method,
                str(len(cs)),
                str(sum(c["records"] for c in cs)),
                str(sum(c["verified"] for c in cs)),
                str(sum(c["positive"] for c in cs)),
                str(sum(c["credited"] for c in cs)),
                f"{sum(a) / len(a):+.2f}" if a else "-",
                f"{hits} / {known} ({100 * hits / known:.0f}%)" if known else "not recorded",
                " / ".join(split) if known else "-",
                f"{statistics.median(se):.2f}" if se else "-",
                f"{100 * sum(shares) / len(shares):.1f}%" if shares else "-",
                " / ".join(f"{100 * v:.0f}%" for v in share) if any(share) else "-",
            ]
        )
    return header, body


def inspector_links(rows: list[dict]) -> list[tuple[str, str, int, str]]:
    """(env, method, seed, page path relative to the report) of every cell with a credit inspector."""
    out = [(r["env"], r["method"], r["seed"], r["extra"]["inspector"]) for r in rows if r["extra"].get("inspector")]
    return sorted(out, key=lambda x: (x[0], _order(x[1]), x[2]))


def probe_points(curve: list[dict]) -> list[tuple[int, float]]:
    """(iteration, held-out probe success) of a run's metrics: iteration 0 is the start model."""
    points = []
    for m in curve:
        if "probe/success_start" in m:
            points.append((m["iteration"] - 1, m["probe/success_start"]))
        if "probe/success" in m:
            points.append((m["iteration"], m["probe/success"]))
    return points


def curve_table(db, rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Per trained (env, method, seed): the probe's points, and train success early vs late."""
    header = ["env", "method", "seed", "held-out probe by iteration", "train success first third -> last third"]
    body = []
    for r in sorted(rows, key=lambda r: (r["env"], _order(r["method"]), r["seed"])):
        curve = db.curve(r["key"])
        if not curve:
            continue
        k = max(1, len(curve) // 3)
        first = sum(m.get("success", 0.0) for m in curve[:k]) / k
        last = sum(m.get("success", 0.0) for m in curve[-k:]) / k
        probe = " ".join(f"{it}:{100 * v:.0f}" for it, v in probe_points(curve)) or "-"
        body.append([r["env"], r["method"], str(r["seed"]), probe, f"{100 * first:.0f}% -> {100 * last:.0f}%"])
    return header, body


def _mean_std(values: list[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    m = sum(values) / len(values)
    if len(values) < 2:
        return m, 0.0
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def _order(method: str) -> tuple:
    order = registry.names()
    return (order.index(method) if method in order else len(order), method)


def aggregate(rows: list[dict]) -> list[dict]:
    """One entry per (env, method): mean and std over seeds, groups, overhead, relative gain over GRPO."""
    by: dict[tuple, list[dict]] = {}
    for r in rows:
        by.setdefault((r["env"], r["method"]), []).append(r)
    out = []
    for (env, method), rs in by.items():
        s_m, s_s = _mean_std([r["success"] for r in rs])
        c_m, c_s = _mean_std([r["score"] for r in rs])
        groups: dict[str, list[float]] = {}
        for r in rs:
            for g, v in r["groups"].items():
                groups.setdefault(g, []).append(v)
        extra_tok = [
            r["extra"].get("prover/extra_tokens_ratio") for r in rs if "prover/extra_tokens_ratio" in r["extra"]
        ]
        extra_steps = [
            r["extra"].get("prover/extra_env_steps_ratio") for r in rs if "prover/extra_env_steps_ratio" in r["extra"]
        ]
        out.append(
            {
                "env": env,
                "method": method,
                "seeds": sorted(r["seed"] for r in rs),
                "success_mean": s_m,
                "success_std": s_s,
                "success_se": success_se(rs),
                "score_mean": c_m,
                "score_std": c_s,
                "groups": {g: _mean_std(v)[0] for g, v in sorted(groups.items())},
                "episodes": sum(r["episodes"] for r in rs),
                "extra_tokens_ratio": _mean_std(extra_tok)[0] if extra_tok else None,
                "extra_env_steps_ratio": _mean_std(extra_steps)[0] if extra_steps else None,
                "train_seconds": sum(r["train_seconds"] for r in rs),
                "eval_seconds": sum(r["eval_seconds"] for r in rs),
                "tokens": sum(r["tokens"] for r in rs),
                "env_steps": sum(r["env_steps"] for r in rs),
            }
        )
    grpo = {a["env"]: a["success_mean"] for a in out if a["method"] == "grpo"}
    for a in out:
        g = grpo.get(a["env"])
        a["rel_vs_grpo_pct"] = (100.0 * (a["success_mean"] - g) / g) if g else None
    out.sort(key=lambda a: (a["env"], _order(a["method"])))
    return out


def _fmt(m, s=None, pct=True) -> str:
    if m is None or (isinstance(m, float) and math.isnan(m)):
        return "n/a"
    scale = 100.0 if pct else 1.0
    return f"{m * scale:.1f} ± {s * scale:.1f}" if s is not None else f"{m * scale:.1f}"


def main_table(agg: list[dict], envs: list[str]) -> tuple[list[str], list[list[str]]]:
    """The headline table: a row per method, per env its success (and WebShop's score) with the standard error."""
    methods = sorted({a["method"] for a in agg}, key=_order)
    cell = {(a["env"], a["method"]): a for a in agg}
    header = ["method"]
    for e in envs:
        if e in SCORE_ENVS:
            header.append(f"{e} score")
        header.append(f"{e} success")
    header += ["average success", "vs GRPO (relative)", "ProVer extra tokens"]
    grpo_cells = [cell.get((e, "grpo")) for e in envs]
    grpo_avg = (
        (sum(c["success_mean"] for c in grpo_cells if c) / len(grpo_cells)) if grpo_cells and all(grpo_cells) else None
    )
    body = []
    for m in methods:
        row, succ, extra = [m], [], []
        for e in envs:
            a = cell.get((e, m))
            if e in SCORE_ENVS:
                row.append(_fmt(a["score_mean"], a["score_std"]) if a else "")
            row.append(_fmt(a["success_mean"], a["success_se"]) if a else "")
            if a:
                succ.append(a["success_mean"])
                if a["extra_tokens_ratio"] is not None and m.startswith("prover"):
                    extra.append(a["extra_tokens_ratio"])
        avg = sum(succ) / len(succ) if succ else None
        row.append(_fmt(avg) if avg is not None else "")
        row.append("" if m == "grpo" or avg is None or not grpo_avg else f"{100 * (avg - grpo_avg) / grpo_avg:+.1f}%")
        row.append(f"+{100 * sum(extra) / len(extra):.0f}%" if extra else "")
        body.append(row)
    return header, body


def group_tables(agg: list[dict], envs: list[str]) -> list[tuple[str, list[str], list[list[str]]]]:
    """Per env with task groups (ALFWorld's task types, Search-QA's data sources), success by group and method."""
    tables = []
    for e in envs:
        rows = [a for a in agg if a["env"] == e and a["groups"]]
        groups = sorted({g for a in rows for g in a["groups"]})
        if not groups:
            continue
        header = ["method", *groups]
        body = [[a["method"], *[_fmt(a["groups"].get(g)) if g in a["groups"] else "" for g in groups]] for a in rows]
        tables.append((e, header, body))
    return tables


def _md(header, body) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def plots(db, preset: str, agg: list[dict], envs: list[str], rows: list[dict]) -> dict[str, bytes]:
    """PNG bytes by file name; empty when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    out = {}

    def png(fig) -> bytes:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
        plt.close(fig)
        return buf.getvalue()

    # learning curves, mean over seeds: the held-out probe (greedy, the same unseen tasks at every point;
    # iteration 0 = the start model) where the run logged one, and the training success (sampled, on the
    # tasks each iteration drew) dashed
    fig, axes = plt.subplots(1, len(envs), figsize=(4.2 * len(envs), 3.2), squeeze=False)
    for ax, env in zip(axes[0], envs):
        curves: dict[str, dict[int, list[float]]] = {}
        probes: dict[str, dict[int, list[float]]] = {}
        for r in rows:
            if r["env"] != env:
                continue
            curve = db.curve(r["key"])
            for it, v in probe_points(curve):
                probes.setdefault(r["method"], {}).setdefault(it, []).append(v)
            for m in curve:
                curves.setdefault(r["method"], {}).setdefault(m["iteration"], []).append(m.get("success", 0.0))
        for i, method in enumerate(sorted(set(curves) | set(probes), key=_order)):
            color = f"C{i}"
            if method in probes:
                its = sorted(probes[method])
                ax.plot(
                    its,
                    [100 * sum(probes[method][k]) / len(probes[method][k]) for k in its],
                    marker="o",
                    color=color,
                    label=f"{method} (held-out probe)",
                )
            if method in curves:
                its = sorted(curves[method])
                ax.plot(
                    its,
                    [100 * sum(curves[method][k]) / len(curves[method][k]) for k in its],
                    linestyle="--",
                    alpha=0.5,
                    color=color,
                    label=f"{method} (train, sampled)",
                )
        ax.set_title(env)
        ax.set_xlabel("iteration")
        ax.set_ylabel("success (%)")
        if curves or probes:
            ax.legend(fontsize=6)
    out["learning_curves.png"] = png(fig)

    # per-group (task type / dataset family) success
    tables = [(e, [a for a in agg if a["env"] == e and a["groups"]]) for e in envs]
    tables = [(e, rs) for e, rs in tables if rs]
    if tables:
        fig, axes = plt.subplots(1, len(tables), figsize=(5 * len(tables), 3.4), squeeze=False)
        for ax, (env, rs) in zip(axes[0], tables):
            groups = sorted({g for a in rs for g in a["groups"]})
            width = 0.8 / max(1, len(rs))
            for k, a in enumerate(rs):
                ax.bar(
                    [i + k * width for i in range(len(groups))],
                    [100 * a["groups"].get(g, 0) for g in groups],
                    width,
                    label=a["method"],
                )
            ax.set_xticks([i + 0.4 - width / 2 for i in range(len(groups))])
            ax.set_xticklabels(
                [g.replace("_then_place_in_recep", "").replace("_", " ") for g in groups],
                rotation=30,
                ha="right",
                fontsize=7,
            )
            ax.set_title(f"{env}: success by group")
            ax.set_ylabel("success (%)")
            ax.legend(fontsize=7)
        out["task_types.png"] = png(fig)

    # where the credit went: A_seg histogram per method and the credited tokens' share by turn position
    credited = [r for r in rows if r["extra"].get("credit")]
    if credited:
        methods = sorted({r["method"] for r in credited}, key=_order)
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.2))
        edges = [-1 + 0.25 * i for i in range(9)]
        for i, method in enumerate(methods):
            a_segs = [x for r in credited if r["method"] == method for x in r["extra"]["credit"].get("a_seg", [])]
            if a_segs:
                ax1.hist(a_segs, bins=edges, alpha=0.5, label=f"{method} ({len(a_segs)})", color=f"C{i}")
            share = credited_share([r["extra"]["credit"] for r in credited if r["method"] == method])
            if share:
                turns = sorted(share)
                ax2.bar(
                    [t + 0.8 * i / len(methods) for t in turns],
                    [100 * share[t] for t in turns],
                    0.8 / len(methods),
                    label=method,
                    color=f"C{i}",
                )
        ax1.set_xlabel("verified A_seg")
        ax1.set_ylabel("segments")
        ax1.set_title("A_seg by method (all envs, seeds)")
        ax2.set_xlabel("turn position")
        ax2.set_ylabel("credited tokens (%)")
        ax2.set_title("where the bonus lands")
        for ax in (ax1, ax2):
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
        out["credit.png"] = png(fig)

    # judge precision by verification
    prec = [p for p in db.precisions(preset) if p["env"] in envs and p["precision"] is not None]
    if prec:
        kinds = sorted({p["judge"] for p in prec})
        fig, ax = plt.subplots(figsize=(5.5, 3.2))
        width = 0.8 / len(kinds)
        for k, kind in enumerate(kinds):
            vals = [next((p["precision"] for p in prec if p["env"] == e and p["judge"] == kind), 0) for e in envs]
            ax.bar([i + k * width for i in range(len(envs))], [100 * v for v in vals], width, label=kind)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(envs))])
        ax.set_xticklabels(envs)
        ax.set_ylabel("proposals verifying A_seg > 0 (%)")
        ax.set_title("judge precision by verification (one-slip groups)")
        ax.legend(fontsize=7)
        out["judge_precision.png"] = png(fig)
    return out


_JS = """
document.querySelectorAll('table.sortable th').forEach(function (th, col) {
  th.addEventListener('click', function () {
    var table = th.closest('table'), body = table.tBodies[0];
    var rows = Array.from(body.rows), asc = th.dataset.asc !== '1';
    var key = function (r) { var t = r.cells[col].innerText.trim(); var v = parseFloat(t);
      return isNaN(v) ? t.toLowerCase() : v; };
    rows.sort(function (a, b) { var x = key(a), y = key(b);
      if (typeof x !== typeof y) { x = String(x); y = String(y); }
      return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1); });
    rows.forEach(function (r) { body.appendChild(r); });
    table.querySelectorAll('th').forEach(function (h) { h.dataset.asc = ''; });
    th.dataset.asc = asc ? '1' : '0';
  });
});
"""


def _precision_table(prec: list[dict]) -> tuple[list[str], list[list[str]]]:
    """One row per (env, judge): groups, proposals, precision, mean A_seg, agreement, and where the env records
    the deciding step (``pivot_known`` > 0 in some row) the localisation (trainers/judge_eval.py)."""
    pivots = any(p.get("pivot_known") for p in prec)
    header = ["env", "judge", "groups", "proposals", "precision", "mean A_seg", "agreement"]
    header += ["hit pivot"] if pivots else []
    body = [
        [
            p["env"],
            p["judge"],
            str(p["groups"]),
            str(p["proposals"]),
            _fmt(p["precision"]),
            "n/a" if p.get("mean_a_seg") is None else f"{p['mean_a_seg']:+.2f}",
            _fmt(p.get("agreement")),
            *([_fmt(p.get("localisation"))] if pivots else []),
        ]
        for p in prec
    ]
    return header, body


def _html_table(header, body) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
    return f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def write_reports(db, preset: str, out: Path, *, envs: list[str]) -> tuple[list[Path], list[dict]]:
    """Every report file of ``preset``; returns their paths and the paired comparisons they state."""
    rows = [r for r in db.results(preset) if r["env"] in envs]
    agg = aggregate(rows)
    present = [e for e in envs if any(a["env"] == e for a in agg)]
    header, body = main_table(agg, present)
    groups = group_tables(agg, present)
    comps = comparisons(rows, present)
    prec = [p for p in db.precisions(preset) if p["env"] in present]
    commits = sorted({r["commit_id"] for r in rows if r["commit_id"]})
    versions = sorted({r["version"] for r in rows if r.get("version")})
    failed = [e for e in db.errors(preset) if e["env"] in envs] if hasattr(db, "errors") else []
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    paths = []

    md = [
        f"# prover-gym leaderboard: preset `{preset}`",
        "",
        f"Generated {stamp}; prover-gym {', '.join(versions) or 'unknown'}, commit {', '.join(commits) or 'unknown'}. "
        "Success in %, mean ± standard error "
        "(binomial over the eval episodes, or over seeds when they vary more); WebShop's score is the mean reward "
        "(± std over seeds). 'vs GRPO' is the relative change of the average success; 'ProVer extra tokens' is the "
        "generation added by verification continuations, relative to the base rollouts.",
        "",
        _md(header, body),
        "",
    ]
    if failed:
        md += [
            "## Cells that failed (no row; a re-run tries them again)",
            "",
            *[f"- {e['env']} {e['method']} seed {e['seed']}: `{e['error']}`" for e in failed],
            "",
        ]
    if comps:
        md += [
            "## Differences between methods, paired by training seed",
            "",
            "The unit is the training seed: each seed's difference is over the same eval tasks, both runs under "
            "common random numbers (same tasks, same sampling keys); the 95% interval is a paired t over seeds, "
            "and a difference is claimed only when it excludes 0. One seed gives no between-method interval "
            "(verdict 'no claim'). The last column is the eval-task bootstrap: the eval noise of one pair of "
            "checkpoints only, which says nothing about another training run.",
            "",
            _md(*_comparison_table(comps)),
            "",
        ]
        md += [
            f"- {c['a']} vs {c['b']} ({c['env']}): {c['verdict']}"
            for c in comps
            if (c["a"], c["b"]) == ("prover", "grpo")
        ] + [""]
    inspectors = inspector_links(rows)
    credit = credit_table(rows)
    if inspectors:
        md += [
            "## Where the credit went",
            "",
            "From each trained ProVer cell's credit record (`credit.jsonl`; figure: credit.png): the judged "
            "segments, how many verified positive and were credited, the judge's localisation against the env's "
            "pivot step where it records one, and where the credited tokens sit. Each cell's inspector "
            "(`prover-gym-inspect`) shows every judged segment, its verification and bonus.",
            "",
            _md(*credit) if credit[1] else "",
            "",
        ]
        md += [f"- {env} {method} seed {seed}: [{link}]({link})" for env, method, seed, link in inspectors] + [""]
    curves = curve_table(db, rows)
    if curves[1]:
        md += [
            "## Learning curves",
            "",
            "The held-out probe: greedy success on the same first unseen tasks of the eval split, before RL "
            "(iteration 0) and along training (learning_curves.png); train success: the sampled rollouts' success "
            "over the first and last third of the iterations.",
            "",
            _md(*curves),
            "",
        ]
    for env, h, b in groups:
        md += [f"## {env}: success by group", "", _md(h, b), ""]
    if prec:
        md += [
            "## Judge precision by verification (one-slip groups)",
            "",
            "Precision: the share of a judge's proposals whose verified A_seg is > 0 (the only ones ProVer credits); "
            "agreement: the share that name the exhaustive judge's best verified turn"
            + (
                "; hit pivot: the share whose segment contains the step the env records as deciding"
                if any(p.get("pivot_known") for p in prec)
                else ""
            )
            + ". Continuations: "
            f"{prec[0].get('continuation', 'n/a')}, M = {prec[0].get('m', 'n/a')} per side.",
            "",
            _md(*_precision_table(prec)),
            "",
        ]
    paths.append(atomic_write(out / "leaderboard.md", "\n".join(md)))

    buf = io.StringIO()
    all_groups = sorted({g for a in agg for g in a["groups"]})
    cols = [
        "env",
        "method",
        "seeds",
        "success_mean",
        "success_std",
        "success_se",
        "score_mean",
        "score_std",
        "rel_vs_grpo_pct",
        "extra_tokens_ratio",
        "extra_env_steps_ratio",
        "episodes",
        "env_steps",
        "tokens",
        "train_seconds",
        "eval_seconds",
        *[f"group:{g}" for g in all_groups],
    ]
    w = csv.writer(buf)
    w.writerow(cols)
    for a in agg:
        w.writerow(
            [
                a["env"],
                a["method"],
                " ".join(map(str, a["seeds"])),
                *[a[c] for c in cols[3:16]],
                *[a["groups"].get(g, "") for g in all_groups],
            ]
        )
    paths.append(atomic_write(out / "leaderboard.csv", buf.getvalue()))

    doc = {
        "preset": preset,
        "generated": stamp,
        "commits": commits,
        "envs": present,
        "leaderboard": agg,
        "comparisons": comps,
        "results": rows,
        "judge_precision": prec,
        "curves": {r["key"]: db.curve(r["key"]) for r in rows if r["method"] not in ("random", "expert")},
    }
    paths.append(atomic_write(out / "leaderboard.json", json.dumps(doc, indent=1, default=str)))

    images = plots(db, preset, agg, present, rows)
    for name, data in images.items():
        paths.append(atomic_write(out / name, data))
    parts = [
        f"<h1>prover-gym leaderboard: preset <code>{html.escape(preset)}</code></h1>",
        f"<p>Generated {html.escape(stamp)}; commit {html.escape(', '.join(commits) or 'unknown')}. "
        "Success in %, mean ± standard error. Click a column header to sort.</p>",
        _html_table(header, body),
    ]
    if comps:
        parts += [
            "<h2>Differences between methods, paired by training seed (paired-t 95% CI over seeds; "
            "the last column is eval noise only)</h2>",
            _html_table(*_comparison_table(comps)),
        ]
    if inspectors:
        parts += ["<h2>Where the credit went</h2>", _html_table(*credit) if credit[1] else "", "<ul>"]
        parts += [
            f"<li>{html.escape(f'{env} {method} seed {seed}')}: "
            f"<a href='{html.escape(link)}'>{html.escape(link)}</a></li>"
            for env, method, seed, link in inspectors
        ]
        parts += ["</ul>"]
    for env, h, b in groups:
        parts += [f"<h2>{html.escape(env)}: success by group</h2>", _html_table(h, b)]
    if prec:
        parts += ["<h2>Judge precision by verification</h2>", _html_table(*_precision_table(prec))]
    for name, data in images.items():
        parts.append(
            f"<h2>{html.escape(name[:-4].replace('_', ' '))}</h2>"
            f'<img alt="{html.escape(name)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'
        )
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>prover-gym leaderboard</title><style>"
        "body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}"
        "th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}th{cursor:pointer;background:#f3f3f3}"
        "td:first-child,th:first-child{text-align:left}img{max-width:100%}</style></head><body>"
        + "".join(parts)
        + f"<script>{_JS}</script></body></html>"
    )
    paths.append(atomic_write(out / "leaderboard.html", page))
    return paths, comps
