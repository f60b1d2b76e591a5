"""A read-only web view of WebShop states and trajectories: see what the agent saw.

    python -m prover_gym.webshop.view                          # browse the bundled test goals
    python -m prover_gym.webshop.view --trajectory run.jsonl   # one {"task_id", "actions": [...]} per line

Routes: ``/`` lists goals (and loaded trajectories); ``/task/{task_id}?actions=<json list>&step=k``
replays the actions from reset and renders the page after step k (default: the last) as HTML,
next to the text observation and the list of steps. Nothing can be bought or changed from the
browser: every page is computed from (task, actions). Binds 127.0.0.1 unless ``--allow-remote``.
"""

from __future__ import annotations

import argparse
import html
import ipaddress
import json
import sys
from pathlib import Path
from urllib.parse import quote

from prover_gym.webshop.engine import SUB_PAGES, ShopState

_CSS = """
body{font-family:system-ui,sans-serif;margin:0;background:#f4f4f4;color:#111}
header{background:#232f3e;color:#fff;padding:10px 20px;font-size:20px}
main{display:flex;gap:20px;padding:20px}
.page{flex:3;background:#fff;padding:20px;border-radius:6px;min-height:400px}
.side{flex:2;background:#fff;padding:16px;border-radius:6px;font-size:13px}
.instruction{background:#fff8e1;border-left:4px solid #f0ad4e;padding:10px;margin-bottom:16px}
.btn{display:inline-block;background:#febd69;border:1px solid #a88734;border-radius:3px;padding:4px 10px;margin:2px}
.product{border-bottom:1px solid #ddd;padding:8px 0}
.asin{font-family:monospace;color:#007185}
.opt{display:inline-block;border:1px solid #888;border-radius:3px;padding:3px 8px;margin:2px}
.opt.on{background:#232f3e;color:#fff}
pre{white-space:pre-wrap;word-break:break-word;background:#f7f7f7;padding:8px}
ol li.cur{font-weight:bold}
.reward{font-size:28px;color:#067d62}
"""


def _e(text) -> str:
    return html.escape(str(text))


def render_page(shop, state: ShopState, instruction: str) -> str:
    """The HTML body of one shop page (the structure of WebShop's templates)."""
    ins = f'<div class="instruction"><b>Instruction:</b><br>{_e(instruction)}</div>'
    if state.page == "search":
        return f'{ins}<div><input id="search_input" value="" disabled size="50"> <span class="btn">Search</span></div>'
    if state.page == "results":
        hits = shop.results(state.keywords)
        parts = [
            ins,
            '<span class="btn">Back to Search</span>',
            f"<h3>Page {state.page_num} (Total results: {len(hits)})</h3>",
        ]
        if state.page_num > 1:
            parts.append('<span class="btn">&lt; Prev</span>')
        parts.append('<span class="btn">Next &gt;</span>')
        for asin in shop.window(state):
            p = shop.catalog.by_asin[asin]
            seen = " (visited)" if asin in state.visited else ""
            parts.append(
                f'<div class="product"><span class="asin">{_e(asin)}</span>{seen}<br>{_e(p["Title"])}<br>'
                f"<b>{_e(p['Price'])}</b></div>"
            )
        return "".join(parts)
    if state.page == "done":
        return (
            f'<h2>Thank you for shopping with us!</h2><p>Purchased <span class="asin">{_e(state.asin)}</span> '
            f"with options {_e(json.dumps(dict(state.options)))}</p><p>Your score (min 0.0, max 1.0)</p>"
            f'<div class="reward">{_e(state.reward)}</div>'
        )
    p = shop.catalog.by_asin[state.asin]
    parts = [ins, '<span class="btn">Back to Search</span> <span class="btn">&lt; Prev</span>']
    if state.page == "item":
        chosen = dict(state.options)
        for name, values in p["options"].items():
            opts = "".join(f'<span class="opt{" on" if chosen.get(name) == v else ""}">{_e(v)}</span>' for v in values)
            parts.append(f"<div><b>{_e(name)}</b>: {opts}</div>")
        parts += [
            f"<h2>{_e(p['Title'])}</h2><div>Price: {_e(p['Price'])}</div><div>Rating: {_e(p['Rating'])}</div>",
            '<span class="btn">Description</span><span class="btn">Features</span><span class="btn">Reviews</span>'
            '<span class="btn">Buy Now</span>',
        ]
    elif state.page == "description":
        parts.append(f"<p>{_e(p['Description'])}</p>")
    elif state.page == "features":
        parts.append("<ul>" + "".join(f"<li>{_e(b)}</li>" for b in p["BulletPoints"]) + "</ul>")
    elif state.page in SUB_PAGES:
        parts.append("<p>(no reviews)</p>")
    return "".join(parts)


def replay(env, task_id: str, actions: list[str]) -> list[dict]:
    """Run ``actions`` from reset; one record per state (index 0 = after reset)."""
    obs, info = env.reset(options={"task_id": task_id})
    records = [{"action": None, "obs": obs, "reward": 0.0, "state": env.unwrapped._state}]
    for a in actions:
        obs, reward, term, trunc, info = env.step(a)
        records.append(
            {"action": a, "obs": obs, "reward": reward, "state": env.unwrapped._state, "error": info.get("error")}
        )
        if term or trunc:
            break
    return records


def page_html(env, task_id: str, actions: list[str], step: int | None) -> str:
    """The HTML page of task ``task_id`` after ``actions`` (up to ``step``): the observation rendered as the shop's
    page, the list of steps linked."""
    records = replay(env, task_id, actions)
    k = len(records) - 1 if step is None else max(0, min(step, len(records) - 1))
    rec = records[k]
    base = f"/task/{quote(task_id)}?actions={quote(json.dumps(actions))}"
    steps = "".join(
        f'<li class="{"cur" if i == k else ""}"><a href="{base}&step={i}">{_e(r["action"] or "reset")}</a>'
        f"{' &mdash; ' + _e(r['error']) if r.get('error') else ''}</li>"
        for i, r in enumerate(records)
    )
    body = render_page(env.unwrapped.shop, rec["state"], env.unwrapped.task())
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>WebShop task {_e(task_id)}</title>"
        f"<style>{_CSS}</style></head><body><header>WebShop &middot; task {_e(task_id)} &middot; step {k}</header>"
        f"<main><div class='page' id='page'>{body}</div><div class='side'><h3>Steps</h3><ol start='0'>{steps}</ol>"
        f"<h3>Text observation</h3><pre id='obs'>{_e(rec['obs'])}</pre></div></main></body></html>"
    )


def create_app(env, trajectories: list[dict] | None = None):
    """A FastAPI app that shows an env's pages in a browser, replaying the given trajectories."""
    from fastapi import FastAPI, HTTPException, Query
    from fastapi.responses import HTMLResponse

    app = FastAPI(title="prover-gym WebShop view")
    trajectories = trajectories or []

    @app.get("/", response_class=HTMLResponse)
    def index():
        ids = env.unwrapped.task_ids()[:200]
        links = "".join(
            f'<li><a href="/task/{quote(t)}">{_e(t)}</a>: {_e(env.unwrapped.goals[int(t)]["instruction_text"])}</li>'
            for t in ids
        )
        runs = "".join(
            f'<li><a href="/task/{quote(str(r["task_id"]))}?actions={quote(json.dumps(r["actions"]))}">'
            f"trajectory {i} (task {_e(r['task_id'])}, {len(r['actions'])} actions)</a></li>"
            for i, r in enumerate(trajectories)
        )
        return (
            f"<!doctype html><html><head><meta charset='utf-8'><style>{_CSS}</style></head><body>"
            f"<header>WebShop view</header><main><div class='page'><h3>Trajectories</h3><ol>{runs}</ol>"
            f"<h3>Goals</h3><ul>{links}</ul></div></main></body></html>"
        )

    @app.get("/task/{task_id}", response_class=HTMLResponse)
    def task(task_id: str, actions: str = Query("[]"), step: int | None = None):
        if task_id not in env.unwrapped._task_index():
            raise HTTPException(404, f"unknown task_id {task_id!r}")
        try:
            acts = json.loads(actions)
            if not isinstance(acts, list) or not all(isinstance(a, str) for a in acts):
                raise ValueError
        except ValueError:
            raise HTTPException(422, "actions must be a JSON list of strings") from None
        return page_html(env, task_id, acts, step)

    return app


def load_trajectories(path: Path) -> list[dict]:
    """Trajectories from a JSONL file of ``{task_id, actions}`` rows; a bad line is an error naming its number."""
    out = []
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            out.append({"task_id": str(row["task_id"]), "actions": [str(a) for a in row["actions"]]})
        except (ValueError, KeyError, TypeError):
            raise SystemExit(f'{path}:{lineno}: expected {{"task_id": ..., "actions": [...]}}') from None
    return out


def main(argv: list[str] | None = None) -> int:
    """``prover-gym-webshop-view``: serve the WebShop view on loopback."""
    ap = argparse.ArgumentParser(prog="python -m prover_gym.webshop.view", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=3000)
    ap.add_argument("--split", default="test")
    ap.add_argument("--data", help="official WebShop data directory (default: bundled)")
    ap.add_argument("--trajectory", help="jsonl of {task_id, actions} to list on the index page")
    ap.add_argument("--allow-remote", action="store_true")
    ap.add_argument(
        "--env-kwargs",
        default="{}",
        help="more gym.make kwargs as a JSON object, to replay episodes of another setting, e.g. a training "
        'run\'s \'{"split": "train", "start": "item", "budget_slack": 1}\' (what its credit inspector links to)',
    )
    args = ap.parse_args(argv)
    try:
        extra = json.loads(args.env_kwargs)
        if not isinstance(extra, dict):
            raise ValueError
    except ValueError:
        print(f"--env-kwargs {args.env_kwargs!r}: give a JSON object of gym.make kwargs", file=sys.stderr)
        return 2
    try:
        loopback = args.host == "localhost" or ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and not args.allow_remote:
        print(f"refusing to bind {args.host}: not a loopback address; pass --allow-remote", file=sys.stderr)
        return 2
    import gymnasium as gym
    import uvicorn

    import prover_gym  # noqa: F401

    env = gym.make("prover/WebShop-v0", **{"split": args.split, "data": args.data, "max_steps": 1000, **extra})
    trajectories = load_trajectories(Path(args.trajectory)) if args.trajectory else []
    print(f"WebShop view on http://{args.host}:{args.port}/", flush=True)
    uvicorn.run(create_app(env, trajectories), host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
