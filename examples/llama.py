"""A Llama-style decoder (and its Qwen2-style variant): train on a text file, then generate.

    python examples/llama.py --device tpu --mode strict --steps 200
    python examples/llama.py --device cpu --steps 200                  # the same run on PyTorch CPU
    python examples/llama.py --config qwen --steps 100 --save ckpt.pt  # Qwen2-style, checkpointed
    python examples/llama.py --config qwen --steps 150 --resume ckpt.pt  # continues to step 150

The architecture is Llama's: RMSNorm before each block, rotary position embeddings, a SwiGLU
MLP, grouped-query attention (fewer key/value heads than query heads) and a KV cache for
generation. The Qwen2 variant is a configuration of the same model: biases on the q/k/v
projections, a larger RoPE base and tied input/output embeddings.

The model is plain PyTorch: the same code runs on any device. A checkpoint holds the model, the
optimizer and the data sampler's state, so a resumed run continues exactly where it stopped.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from char_gpt import CharData  # noqa: E402  (the character-level text the GPT example uses)
from training import (  # noqa: E402  (what the examples share)
    example_parser, load_checkpoint, parse_example_args, print_run, run_steps, save_checkpoint)


@dataclass
class LlamaConfig:
    vocab_size: int = 96
    max_seq_len: int = 128    # longest sequence (training context, and the KV cache's length)
    dim: int = 128
    n_layers: int = 4
    n_heads: int = 8
    n_kv_heads: int = 2       # grouped-query attention: each k/v head serves n_heads / n_kv_heads
    hidden_dim: int = 352     # SwiGLU width, about 8/3 * dim
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    qkv_bias: bool = False
    tie_embeddings: bool = False

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


CONFIGS = {
    "llama": LlamaConfig(),
    # Qwen2: bias on q/k/v, RoPE base 1e6, RMSNorm eps 1e-6, tied embeddings (as its small models).
    "qwen": LlamaConfig(qkv_bias=True, rope_theta=1_000_000.0, norm_eps=1e-6, tie_embeddings=True),
}


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        h = x.float()  # normalise in float32 even when the model runs in bfloat16
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rope_tables(head_dim: int, max_len: int, theta: float):
    """cos/sin of the rotation angles, (max_len, head_dim): position p, pair i turns by p/theta^(2i/d)."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(max_len, dtype=torch.float32), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)  # the "rotate half" layout (Llama in HF, Qwen2)
    return angles.cos(), angles.sin()


def apply_rope(x, cos, sin):
    """Rotates the pairs (x[..., i], x[..., i + d/2]) of x (B, H, T, d) by the angles of its positions."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class KVCache:
    """Keys and values of the positions seen so far, per layer: (B, n_kv_heads, max_seq_len, head_dim).

    The cache has a fixed length and attention always reads all of it, masking the positions not
    written yet: every decoding step then has the same shapes and runs the same compiled programs.
    """

    def __init__(self, cfg: LlamaConfig, batch: int, device, dtype):
        shape = (batch, cfg.n_kv_heads, cfg.max_seq_len, cfg.head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)

    def update(self, k, v, pos: int):
        t = k.size(2)
        self.k[:, :, pos:pos + t] = k
        self.v[:, :, pos:pos + t] = v
        return self.k, self.v


def repeat_kv(x, n_rep: int):
    """(B, n_kv, T, d) -> (B, n_kv * n_rep, T, d): each k/v head shared by n_rep query heads."""
    if n_rep == 1:
        return x
    b, h, t, d = x.shape
    return x[:, :, None].expand(b, h, n_rep, t, d).reshape(b, h * n_rep, t, d)


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.wq = nn.Linear(cfg.dim, cfg.n_heads * cfg.head_dim, bias=cfg.qkv_bias)
        self.wk = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=cfg.qkv_bias)
        self.wv = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=cfg.qkv_bias)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.dim, bias=False)

    def forward(self, x, cos, sin, cache: KVCache | None = None, pos: int = 0, mask=None):
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if cache is not None:
            k, v = cache.update(k, v, pos)
        n_rep = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        if mask is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.wo(y.transpose(1, 2).reshape(B, T, -1))


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)
        self.w3 = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)
        self.w2 = nn.Linear(cfg.hidden_dim, cfg.dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.ffn = FeedForward(cfg)

    def forward(self, x, cos, sin, cache=None, pos=0, mask=None):
        x = x + self.attn(self.attn_norm(x), cos, sin, cache, pos, mask)
        return x + self.ffn(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.output.weight = self.tok_emb.weight
        self.apply(self._init)
        cos, sin = rope_tables(cfg.head_dim, cfg.max_seq_len, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        causal = torch.tril(torch.ones(cfg.max_seq_len, cfg.max_seq_len, dtype=torch.bool))
        self.register_buffer("causal", causal, persistent=False)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, targets=None, caches: list[KVCache] | None = None, pos: int = 0):
        """idx (B, T) holds the tokens of positions pos..pos+T-1. Without caches: a causal pass
        over the whole sequence (training). With caches: keys/values are appended at pos and the
        queries attend to every cached position up to their own."""
        B, T = idx.shape
        assert pos + T <= self.cfg.max_seq_len, f"sequence longer than max_seq_len={self.cfg.max_seq_len}"
        cos, sin = self.rope_cos[pos:pos + T], self.rope_sin[pos:pos + T]
        mask = self.causal[pos:pos + T] if caches is not None else None  # (T, max_seq_len)
        x = self.tok_emb(idx)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, caches[i] if caches is not None else None, pos, mask)
        logits = self.output(self.norm(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss

    @torch.no_grad()
    def generate(self, prompt, max_new_tokens: int, temperature: float = 0.0,
                 generator: torch.Generator | None = None):
        """Prefill the cache with the prompt in one pass, then decode one token per step.
        temperature 0 is greedy; otherwise tokens are sampled on the host with `generator`."""
        B, T0 = prompt.shape
        dtype = self.tok_emb.weight.dtype
        caches = [KVCache(self.cfg, B, prompt.device, dtype) for _ in self.layers]
        logits, _ = self(prompt, caches=caches, pos=0)
        tokens, pos = [prompt], T0
        for i in range(max_new_tokens):
            last = logits[:, -1, :]
            if temperature == 0:
                nxt = last.argmax(dim=-1, keepdim=True)
            else:
                probs = F.softmax(last.float() / temperature, dim=-1).cpu()
                nxt = torch.multinomial(probs, 1, generator=generator).to(prompt.device)
            tokens.append(nxt)
            if i + 1 < max_new_tokens:
                logits, _ = self(nxt, caches=caches, pos=pos)
                pos += 1
        return torch.cat(tokens, dim=1)


# ---- training ------------------------------------------------------------------------------------

def train(cfg: LlamaConfig, device: str, steps: int, batch_size: int = 16, seq_len: int = 64,
          lr: float = 3e-3, seed: int = 0, data: CharData | None = None, save: str | None = None,
          resume: str | None = None, progress: bool = True):
    """Trains from a fixed seed up to step `steps` (from the checkpoint's step when resuming).
    Returns (model, losses of the steps run here, seconds per step after warm-up)."""
    data = data or CharData()
    torch.manual_seed(seed)
    model = Llama(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    data_rng = torch.Generator().manual_seed(seed)
    start = load_checkpoint(resume, dataclasses.asdict(cfg), model, opt, data_rng) if resume else 0

    def step_fn(step):
        x, y = data.batch(batch_size, seq_len, data_rng)
        _, loss = model(x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    losses, sec = run_steps(step_fn, start, steps, f"train {device}", batch_size * seq_len, "tok", progress)
    if save:
        save_checkpoint(save, dataclasses.asdict(cfg), model, opt, max(start, steps), data_rng)
    return model, losses, sec


def main() -> None:
    p = example_parser(__doc__, checkpoints=True)
    p.add_argument("--config", default="llama", choices=sorted(CONFIGS))
    p.add_argument("--steps", type=int, default=200, help="train up to this step (counted from 0)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--text", default=None, help="training text (default: the GPL-3 licence text)")
    p.add_argument("--generate", type=int, default=200, help="characters to generate after training")
    p.add_argument("--temperature", type=float, default=0.8, help="0: greedy")
    args = parse_example_args(p)
    data = CharData(args.text)
    cfg = dataclasses.replace(CONFIGS[args.config], vocab_size=data.vocab_size)
    if args.seq_len > cfg.max_seq_len:
        p.error(f"--seq-len must be at most {cfg.max_seq_len}")
    model, losses, sec = train(cfg, args.device, args.steps, args.batch_size, args.seq_len, args.lr,
                               data=data, save=args.save, resume=args.resume)
    n_params = sum(p.numel() for p in model.parameters())
    print_run(f"{args.config}: {n_params:,} parameters", losses, sec, args.batch_size * args.seq_len, "tokens",
              args.save)
    if args.generate > 0:
        prompt = torch.tensor([[data.stoi.get("\n", 0)]], device=args.device)
        n = min(args.generate, cfg.max_seq_len - 1)
        out = model.eval().generate(prompt, n, args.temperature, generator=torch.Generator().manual_seed(0))
        print(data.decode(out[0].tolist()))


if __name__ == "__main__":
    main()
