"""`gym.make("prover/...")` after `import gymnasium` alone, and a light `import prover_gym`."""

import subprocess
import sys


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=300).stdout


def test_gym_make_after_import_gymnasium_alone(bundled_dir):
    out = _run(
        "import gymnasium as gym; env = gym.make('prover/SearchQA-v0', split='test'); "
        "print(type(env.unwrapped).__name__, env.reset(seed=0)[1]['task_id'])"
    )
    assert out.split()[0] == "SearchQAEnv"


def test_interpreter_start_and_package_import_stay_light():
    out = _run("import sys; import prover_gym; print('gymnasium' in sys.modules, 'numpy' in sys.modules)")
    assert out.split() == ["False", "False"]


def test_import_prover_gym_registers_ids():
    out = _run("import prover_gym, gymnasium; print('prover/SearchQA-v0' in gymnasium.registry)")
    assert out.strip() == "True"
