"""A tiny Qwen3-architecture model for CPU runs, made here (nothing is downloaded).

``tiny_model_dir()`` builds it once into the cache: a byte-level BPE tokenizer trained with
``tokenizers`` on text the environments generate (expert trajectories rendered through the agent
prompt formats), with Qwen's chat markers and a chat template, and a randomly initialised
``Qwen3ForCausalLM`` with a small config. The result is an ordinary Hugging Face model directory:
``AutoModelForCausalLM.from_pretrained`` / the ``hf`` backend load it like any Qwen checkpoint.
It knows nothing until trained (SFT warm start, issue 6).
"""

from __future__ import annotations

from pathlib import Path

TINY_VERSION = 1
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
DEFAULT_CONFIG = dict(
    hidden_size=128,
    intermediate_size=384,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    max_position_embeddings=8192,
    tie_word_embeddings=True,
)


def env_corpus(episodes_per_env: int = 60) -> list[str]:
    """Prompts, observations and expert responses from the bundled envs' train splits."""
    import gymnasium as gym

    import prover_gym  # noqa: F401
    from agents.baselines import ExpertPolicy
    from agents.formats import make_format
    from agents.rollout import rollout

    texts: list[str] = []
    for env_id in ("prover/SearchQA-v0", "prover/WebShop-v0"):
        if env_id not in gym.registry:
            continue
        env = gym.make(env_id, split="train")
        fmt = make_format(env_id)
        for seed in range(episodes_per_env):
            traj = rollout(env, ExpertPolicy(), seed=seed)
            history: list[tuple[str, str]] = []
            for turn in traj.turns:
                if fmt.name == "searchr1":
                    texts.append(fmt.prompt(traj.task))
                    verb, arg = turn.action.split("[", 1)
                    texts.append(f"<think>I should {verb}.</think><{verb}> {arg[:-1]} </{verb}>")
                else:
                    texts.append(fmt.messages(traj.task, history, turn.observation, None)[0]["content"])
                    texts.append(f"<think>The next step is {turn.action}.</think><action>{turn.action}</action>")
                texts.append(turn.observation)
                history.append((turn.observation, turn.action))
    return texts


def build_tiny_model(out_dir: Path, texts: list[str], *, vocab_size: int = 4096, seed: int = 0, **config) -> Path:
    """Train a byte-level BPE tokenizer on ``texts`` and save it with a freshly initialised small Qwen3 causal LM
    (``config`` overrides its size) into ``out_dir``: the local model the CPU settings use (nothing is downloaded)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None, unk_token=None
    )
    tok.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    cfg = Qwen3Config(
        vocab_size=len(tok),
        bos_token_id=tok.convert_tokens_to_ids("<|im_start|>"),  # type: ignore[arg-type]  # one token: an int
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        **{**DEFAULT_CONFIG, **config},
    )
    model = Qwen3ForCausalLM(cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir))
    tok.save_pretrained(str(out_dir))
    return out_dir


def tiny_model_dir(root: Path | None = None) -> Path:
    """The cached tiny model directory, built on first use (atomically)."""
    from prover_gym.cache import build_once, cache_dir

    def build(out: Path) -> dict:
        texts = env_corpus()
        build_tiny_model(out, texts)
        return {"texts": len(texts), "version": TINY_VERSION}

    return build_once((root or cache_dir()) / f"tiny-qwen3-v{TINY_VERSION}", build)
