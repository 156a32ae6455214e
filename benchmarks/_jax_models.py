"""The models bench_compile.py times, written in JAX from the PyTorch definitions in examples/
(char_gpt.GPT, llama.Llama, resnet.resnet18) together with their optimizers (AdamW, SGD with
momentum), each training step one jax.jit on XLA's CPU backend.

Every model starts from a PyTorch model's weights (and buffers) and computes the same function
as the PyTorch training step, so the losses of the first steps agree with the PyTorch variants':
GPT and Llama with dropout 0; ResNet-18 in training mode, batch norm normalising with the batch's
statistics and updating its running statistics as nn.BatchNorm2d does (momentum 0.1, the
running variance unbiased).
"""
from __future__ import annotations

import math
from typing import Callable, Dict, Tuple

import jax
import jax.numpy as jnp

Params = Dict[str, jnp.ndarray]
tree_map = jax.tree_util.tree_map


def _arrays(named) -> Params:
    return {k: jnp.asarray(v.detach().cpu().numpy()) for k, v in named}


def _linear(x, p: Params, name: str, bias: bool = True):
    y = x @ p[name + ".weight"].T
    return y + p[name + ".bias"] if bias else y


def _cross_entropy(logits, targets):
    logp = jax.nn.log_softmax(logits.reshape(-1, logits.shape[-1]), axis=-1)
    return -jnp.take_along_axis(logp, targets.reshape(-1, 1), axis=1).mean()


def _causal_attention(q, k, v):
    """q, k, v (B, H, T, d): softmax(q k^T / sqrt(d), causal) v."""
    T = q.shape[2]
    att = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(q.shape[-1]))
    att = jnp.where(jnp.tril(jnp.ones((T, T), dtype=bool)), att, -jnp.inf)
    return jax.nn.softmax(att, axis=-1) @ v


# ---- optimizers (torch.optim's update rules, one parameter group) -------------------------------

class AdamW:
    def __init__(self, lr: float, weight_decay: float, betas=(0.9, 0.999), eps: float = 1e-8):
        self.lr, self.wd, (self.b1, self.b2), self.eps = lr, weight_decay, betas, eps

    def init(self, params: Params):
        zeros = tree_map(jnp.zeros_like, params)
        return (zeros, tree_map(jnp.zeros_like, params), jnp.zeros((), jnp.float32))

    def update(self, params: Params, grads: Params, state):
        m, v, t = state
        lr, b1, b2, eps, wd = self.lr, self.b1, self.b2, self.eps, self.wd
        t = t + 1
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        m = tree_map(lambda m_, g_: b1 * m_ + (1 - b1) * g_, m, grads)
        v = tree_map(lambda v_, g_: b2 * v_ + (1 - b2) * g_ * g_, v, grads)
        params = tree_map(lambda p_, m_, v_: p_ * (1 - lr * wd) - (lr / bc1) * m_ / (jnp.sqrt(v_) / jnp.sqrt(bc2) + eps),
                          params, m, v)
        return params, (m, v, t)


class SGD:
    """Momentum without dampening: the first step's buffer is the gradient itself, which is what
    momentum * 0 + gradient gives."""

    def __init__(self, lr: float, momentum: float, weight_decay: float):
        self.lr, self.momentum, self.wd = lr, momentum, weight_decay

    def init(self, params: Params):
        return tree_map(jnp.zeros_like, params)

    def update(self, params: Params, grads: Params, buf):
        grads = tree_map(lambda g_, p_: g_ + self.wd * p_, grads, params)
        buf = tree_map(lambda b_, g_: self.momentum * b_ + g_, buf, grads)
        return tree_map(lambda p_, b_: p_ - self.lr * b_, params, buf), buf


# ---- models: (parameters, buffers, loss(params, buffers, x, y) -> (loss, new buffers)) ---------

def gpt(model) -> Tuple[Params, Params, Callable]:
    cfg = model.cfg
    H, C = cfg.n_head, cfg.n_embd

    def layer_norm(x, p, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / jnp.sqrt(var + 1e-5) * p[name + ".weight"] + p[name + ".bias"]

    def loss_fn(p, buffers, idx, targets):
        B, T = idx.shape
        x = p["tok_emb.weight"][idx] + p["pos_emb.weight"][jnp.arange(T)]
        for layer in range(cfg.n_layer):
            b = f"blocks.{layer}."
            q, k, v = jnp.split(_linear(layer_norm(x, p, b + "ln1"), p, b + "attn.qkv"), 3, axis=2)
            q, k, v = (t.reshape(B, T, H, C // H).transpose(0, 2, 1, 3) for t in (q, k, v))
            y = _causal_attention(q, k, v).transpose(0, 2, 1, 3).reshape(B, T, C)
            x = x + _linear(y, p, b + "attn.proj")
            h = jax.nn.gelu(_linear(layer_norm(x, p, b + "ln2"), p, b + "mlp.0"), approximate=False)
            x = x + _linear(h, p, b + "mlp.2")
        logits = _linear(layer_norm(x, p, "ln_f"), p, "head", bias=False)
        return _cross_entropy(logits, targets), buffers

    return _arrays(model.named_parameters()), {}, loss_fn


def llama(model) -> Tuple[Params, Params, Callable]:
    """examples/llama.py's Llama, training pass (no KV cache): RMSNorm, rotary embeddings in the
    rotate-half layout, grouped-query attention, SwiGLU; tied embeddings when the config ties them."""
    cfg = model.cfg
    H, KV, hd = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    cos_table = jnp.asarray(model.rope_cos.cpu().numpy())
    sin_table = jnp.asarray(model.rope_sin.cpu().numpy())

    def rms_norm(x, p, name):
        return p[name + ".weight"] * (x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + cfg.norm_eps))

    def rope(x, cos, sin):
        x1, x2 = jnp.split(x, 2, axis=-1)
        return x * cos + jnp.concatenate([-x2, x1], axis=-1) * sin

    def loss_fn(p, buffers, idx, targets):
        B, T = idx.shape
        cos, sin = cos_table[:T], sin_table[:T]
        x = p["tok_emb.weight"][idx]
        for layer in range(cfg.n_layers):
            b = f"layers.{layer}."
            h = rms_norm(x, p, b + "attn_norm")
            q = _linear(h, p, b + "attn.wq", cfg.qkv_bias).reshape(B, T, H, hd).transpose(0, 2, 1, 3)
            k = _linear(h, p, b + "attn.wk", cfg.qkv_bias).reshape(B, T, KV, hd).transpose(0, 2, 1, 3)
            v = _linear(h, p, b + "attn.wv", cfg.qkv_bias).reshape(B, T, KV, hd).transpose(0, 2, 1, 3)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            # Query head j reads key/value head j // (H / KV), as llama.repeat_kv arranges them.
            k, v = jnp.repeat(k, H // KV, axis=1), jnp.repeat(v, H // KV, axis=1)
            y = _causal_attention(q, k, v).transpose(0, 2, 1, 3).reshape(B, T, H * hd)
            x = x + _linear(y, p, b + "attn.wo", bias=False)
            h = rms_norm(x, p, b + "ffn_norm")
            g = jax.nn.silu(_linear(h, p, b + "ffn.w1", bias=False)) * _linear(h, p, b + "ffn.w3", bias=False)
            x = x + _linear(g, p, b + "ffn.w2", bias=False)
        head = p["tok_emb.weight"] if cfg.tie_embeddings else p["output.weight"]
        logits = rms_norm(x, p, "norm") @ head.T
        return _cross_entropy(logits, targets), buffers

    # named_parameters() lists a tied weight once (under tok_emb), which is what loss_fn reads.
    return _arrays(model.named_parameters()), {}, loss_fn


def resnet(model) -> Tuple[Params, Params, Callable]:
    """examples/resnet.py's ResNet (basic blocks) in training mode, in JAX's NHWC layout (XLA's CPU
    convolutions' own layout; the images and the OIHW weights are transposed once here)."""
    import torch.nn as nn

    params = _arrays(model.named_parameters())
    for name, m in model.named_modules():
        if isinstance(m, nn.Conv2d):
            params[name + ".weight"] = params[name + ".weight"].transpose(2, 3, 1, 0)  # OIHW -> HWIO
    buffers = _arrays((k, v) for k, v in model.named_buffers() if not k.endswith("num_batches_tracked"))
    convs = {name: (m.stride[0], m.padding[0]) for name, m in model.named_modules() if isinstance(m, nn.Conv2d)}
    stages = [[name for name, _ in stage.named_children()] for stage in model.layers]
    has_downsample = {f"layers.{i}.{j}": blk.downsample is not None
                      for i, stage in enumerate(model.layers) for j, blk in enumerate(stage)}

    def conv(x, p, name):
        stride, pad = convs[name]
        return jax.lax.conv_general_dilated(x, p[name + ".weight"], (stride, stride), [(pad, pad), (pad, pad)],
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def batch_norm(x, p, buffers, new, name, eps=1e-5, momentum=0.1):
        mean = x.mean((0, 1, 2))
        var = ((x - mean) ** 2).mean((0, 1, 2))  # biased: what training-mode batch norm divides by
        n = x.shape[0] * x.shape[1] * x.shape[2]
        new[name + ".running_mean"] = (1 - momentum) * buffers[name + ".running_mean"] + momentum * mean
        new[name + ".running_var"] = (1 - momentum) * buffers[name + ".running_var"] + momentum * var * (n / (n - 1))
        return (x - mean) * jax.lax.rsqrt(var + eps) * p[name + ".weight"] + p[name + ".bias"]

    def loss_fn(p, buffers, x, y):
        new = {}
        bn = lambda h, name: batch_norm(h, p, buffers, new, name)  # noqa: E731
        h = jax.nn.relu(bn(conv(x, p, "conv1"), "bn1"))
        h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1),
                                  [(0, 0), (1, 1), (1, 1), (0, 0)])  # MaxPool2d(3, 2, 1)
        for i, stage in enumerate(stages):
            for j in stage:
                b = f"layers.{i}.{j}"
                out = jax.nn.relu(bn(conv(h, p, b + ".conv1"), b + ".bn1"))
                out = bn(conv(out, p, b + ".conv2"), b + ".bn2")
                short = bn(conv(h, p, b + ".downsample.0"), b + ".downsample.1") if has_downsample[b] else h
                h = jax.nn.relu(out + short)
        logits = _linear(h.mean((1, 2)), p, "fc")
        return _cross_entropy(logits, y), new

    return params, buffers, loss_fn


def train_step(params: Params, buffers: Params, loss_fn: Callable, opt, batches) -> Callable[[], float]:
    """The whole step (forward, backward, optimizer, buffer updates) as one jax.jit; returns a
    step() that runs the next batch and returns its loss as a float (waiting for the step)."""

    @jax.jit
    def step_fn(p, bufs, state, x, y):
        (loss, bufs), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, bufs, x, y)
        p, state = opt.update(p, grads, state)
        return p, bufs, state, loss

    carry = [params, buffers, opt.init(params)]
    i = 0

    def step() -> float:
        nonlocal i, carry
        x, y = batches[i % len(batches)]
        i += 1
        *carry, loss = step_fn(*carry, x, y)
        return float(loss)  # waits for the step, as loss.item() does

    return step
