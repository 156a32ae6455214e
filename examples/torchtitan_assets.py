"""Small local stand-ins for the assets torchtitan's debug configs expect (no downloads).

llama3_debugmodel / qwen3_debugmodel read a Hugging Face tokenizer from ``./tests/assets/tokenizer``
and the ``c4_test`` dataset from ``tests/assets/c4_test``: files of torchtitan's git repository,
not of its wheel. This writes

    OUT/tokenizer/tokenizer.json, tokenizer_config.json   a byte-level BPE tokenizer (2,000 tokens,
                                                          under the debug models' vocab of 2,048),
                                                          trained here on the text below
    OUT/c4_test/data.json                                 JSON lines {"text": ...}, 400 documents

from examples/data/tiny.txt plus deterministic synthetic sentences over its words, so every run
on every machine sees the same tokens. Point torchtitan at them with
``--hf_assets_path OUT/tokenizer --dataloader.dataset_path OUT/c4_test``.

    python examples/torchtitan_assets.py OUT
"""
from __future__ import annotations

import json
import os
import random
import sys

BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"
VOCAB_SIZE = 2000
N_DOCS = 400


def _documents() -> list[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "data", "tiny.txt"), encoding="utf-8") as f:
        lines = [ln.strip() for ln in f if ln.strip()]
    words = sorted({w for ln in lines for w in ln.split()})
    rng = random.Random(0)
    docs = []
    for i in range(N_DOCS):
        parts = []
        for _ in range(rng.randint(2, 8)):  # documents of different lengths: packed sequences cross them
            if rng.random() < 0.5:
                parts.append(rng.choice(lines))
            else:
                n = rng.randint(5, 20)
                parts.append(" ".join(rng.choice(words) for _ in range(n)).capitalize() + ".")
        docs.append(f"Document {i}. " + " ".join(parts))
    return docs


def make_assets(out: str) -> tuple[str, str]:
    """Writes the tokenizer and the dataset under `out`; returns (tokenizer_dir, dataset_dir)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    docs = _documents()
    tok_dir, data_dir = os.path.join(out, "tokenizer"), os.path.join(out, "c4_test")
    os.makedirs(tok_dir, exist_ok=True)
    os.makedirs(data_dir, exist_ok=True)

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=[BOS, EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(docs, trainer=trainer)
    tok.save(os.path.join(tok_dir, "tokenizer.json"))
    with open(os.path.join(tok_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": BOS, "eos_token": EOS, "add_bos_token": True, "add_eos_token": False,
                   "model_max_length": 131072, "tokenizer_class": "PreTrainedTokenizerFast"}, f, indent=1)
    with open(os.path.join(data_dir, "data.json"), "w") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")
    return tok_dir, data_dir


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    t, d = make_assets(sys.argv[1])
    print(f"--hf_assets_path {t} --dataloader.dataset_path {d}")
