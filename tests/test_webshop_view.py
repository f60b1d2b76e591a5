"""The read-only WebShop web view: HTML through HTTP, and a real headless-browser screenshot."""

import json
import subprocess
import sys
import time
from urllib.parse import quote

import gymnasium as gym
import pytest
import requests
from conftest import CHROMIUM, free_port, run_chromium


@pytest.fixture(scope="module")
def trajectory():
    env = gym.make("prover/WebShop-v0", split="test")
    env.reset(options={"task_id": "0"})
    actions = []
    while True:
        a = env.unwrapped.expert_action()
        if a is None:
            break
        actions.append(a)
        _, _, term, trunc, _ = env.step(a)
        if term or trunc:
            break
    return {
        "task_id": "0",
        "actions": actions,
        "title": env.unwrapped.catalog.by_asin[env.unwrapped._goal["asin"]]["Title"],
    }


@pytest.fixture(scope="module")
def view(tmp_path_factory, trajectory):
    path = tmp_path_factory.mktemp("traj") / "run.jsonl"
    path.write_text(json.dumps({"task_id": trajectory["task_id"], "actions": trajectory["actions"]}) + "\n")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "prover_gym.webshop.view", "--port", str(port), "--trajectory", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if requests.get(url + "/", timeout=1).ok:
                break
        except requests.ConnectionError:
            time.sleep(0.2)
        assert proc.poll() is None, proc.stdout.read().decode()
    yield url
    proc.terminate()
    proc.wait(10)


def test_index_lists_goals_and_trajectories(view):
    page = requests.get(view + "/").text
    assert "trajectory 0 (task 0" in page and "Find me" in page


def test_task_page_replays_actions(view, trajectory):
    acts = quote(json.dumps(trajectory["actions"]))
    item_step = trajectory["actions"].index(next(a for a in trajectory["actions"] if a.startswith("click[b0"))) + 1
    page = requests.get(f"{view}/task/0?actions={acts}&step={item_step}").text
    assert trajectory["title"] in page and "Buy Now" in page and "Rating: N.A." in page
    done = requests.get(f"{view}/task/0?actions={acts}").text
    assert "Thank you for shopping with us!" in done and '<div class="reward">1.0</div>' in done
    assert requests.get(f"{view}/task/nope").status_code == 404
    assert requests.get(f"{view}/task/0?actions=notjson").status_code == 422


def test_view_refuses_non_loopback():
    from prover_gym.webshop.view import main

    assert main(["--host", "0.0.0.0"]) == 2


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it when apt works)")
def test_screenshot_in_headless_chromium(view, trajectory, tmp_path):
    from PIL import Image

    acts = quote(json.dumps(trajectory["actions"]))
    shot = tmp_path / "page.png"
    run_chromium(
        f"--screenshot={shot}", "--window-size=1200,800", f"{view}/task/0?actions={acts}&step=2", profile=tmp_path / "p"
    )
    img = Image.open(shot).convert("RGB")
    assert img.size == (1200, 800)
    assert img.getpixel((5, 5)) == (0x23, 0x2F, 0x3E)  # the header bar was painted
    colours = img.resize((120, 80)).getcolors(maxcolors=10_000)
    assert colours is not None and len(colours) > 20  # text and boxes, not a blank page


def test_env_kwargs_replay_a_training_setting_from_the_item_page():
    from prover_gym.webshop.view import main, page_html

    env = gym.make("prover/WebShop-v0", split="train", start="item", budget_slack=1)
    task = env.unwrapped.task_ids()[0]
    env.reset(options={"task_id": task})
    actions = []
    while (a := env.unwrapped.expert_action()) is not None:
        actions.append(a)
        if env.step(a)[2]:
            break
    page = page_html(env, task, actions, None)
    assert "Thank you for shopping with us!" in page and "error" not in page.split("<ol")[1].split("</ol>")[0]
    assert main(["--env-kwargs", "[1]"]) == 2  # not an object: exit 2 with the reason
