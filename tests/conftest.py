import socket

import gymnasium as gym
import pytest

import prover_gym  # noqa: F401


@pytest.fixture(scope="session")
def bundled_dir():
    from prover_gym.searchqa.bundled import bundled_data_dir

    return bundled_data_dir()


@pytest.fixture
def make_searchqa(bundled_dir):
    made = []

    def make(**kwargs):
        env = gym.make("prover/SearchQA-v0", **kwargs)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
