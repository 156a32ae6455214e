"""_foreach_* ops (one program per call) and the optimizers built on them, against PyTorch CPU."""
import copy

import pytest
import torch

import torch_tpu
from conftest import to_cpu, to_tpu

SHAPES = [(3, 4), (7,), (2, 3, 5), ()]


def tensors(seed, dtype=torch.float32, positive=False):
    g = torch.Generator().manual_seed(seed)
    out = [torch.randn(s, generator=g, dtype=torch.float32) for s in SHAPES]
    if positive:
        out = [t.abs() + 0.1 for t in out]
    return [t.to(dtype) for t in out]


def run_both(fn, *lists):
    cpu = [[t.clone() for t in lst] for lst in lists]
    dev = [to_tpu([t.clone() for t in lst]) for lst in lists]
    r_cpu = fn(*cpu)
    r_dev = fn(*dev)
    return cpu, dev, r_cpu, r_dev


def assert_lists_close(actual, expected, **kw):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a.cpu(), e, **kw)


INPLACE = {
    "add_scalar": lambda a, b, c: torch._foreach_add_(a, 0.5),
    "add_list_alpha": lambda a, b, c: torch._foreach_add_(a, b, alpha=-2.0),
    "add_scalarlist": lambda a, b, c: torch._foreach_add_(a, [0.1, 0.2, 0.3, 0.4]),
    "sub_list": lambda a, b, c: torch._foreach_sub_(a, b, alpha=0.5),
    "mul_scalar": lambda a, b, c: torch._foreach_mul_(a, 0.9),
    "mul_list": lambda a, b, c: torch._foreach_mul_(a, b),
    "mul_tensor": lambda a, b, c: torch._foreach_mul_(a, torch.tensor(3.0, device=a[0].device)),
    "div_scalarlist": lambda a, b, c: torch._foreach_div_(a, [2.0, 4.0, 8.0, 16.0]),
    "div_list": lambda a, b, c: torch._foreach_div_(a, c),
    "lerp_scalar": lambda a, b, c: torch._foreach_lerp_(a, b, 0.1),
    "lerp_scalar_hi": lambda a, b, c: torch._foreach_lerp_(a, b, 0.9),
    "addcmul": lambda a, b, c: torch._foreach_addcmul_(a, b, c, value=0.01),
    "addcdiv_scalarlist": lambda a, b, c: torch._foreach_addcdiv_(a, b, c, [-1e-3, 2e-3, 1.0, 0.5]),
    "maximum_list": lambda a, b, c: torch._foreach_maximum_(a, b),
    "clamp_min": lambda a, b, c: torch._foreach_clamp_min_(a, 0.0),
    "clamp_max": lambda a, b, c: torch._foreach_clamp_max_(a, 0.0),
    "sqrt_": lambda a, b, c: torch._foreach_sqrt_(c),
    "neg_": lambda a, b, c: torch._foreach_neg_(a),
    "reciprocal_": lambda a, b, c: torch._foreach_reciprocal_(c),
    "zero_": lambda a, b, c: torch._foreach_zero_(a),
    "copy_": lambda a, b, c: torch._foreach_copy_(a, b),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace(name, mode, no_fallback):
    cpu, dev, _, _ = run_both(INPLACE[name], tensors(0), tensors(1), tensors(2, positive=True))
    for c, d in zip(cpu, dev):
        assert_lists_close(d, c)


FUNCTIONAL = {
    "add_list": lambda a, b: torch._foreach_add(a, b, alpha=2),
    "mul_scalar": lambda a, b: torch._foreach_mul(a, 1.5),
    "div_scalar": lambda a, b: torch._foreach_div(a, 3.0),
    "sqrt": lambda a, b: torch._foreach_sqrt(b),
    "neg": lambda a, b: torch._foreach_neg(a),
    "pow_scalar": lambda a, b: torch._foreach_pow(b, 2.5),
    "norm2": lambda a, b: torch._foreach_norm(a),
    "norm1": lambda a, b: torch._foreach_norm(a, 1),
    "norm_inf": lambda a, b: torch._foreach_norm(a, float("inf")),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONAL))
def test_functional(name, mode, no_fallback):
    _, _, r_cpu, r_dev = run_both(FUNCTIONAL[name], tensors(3), tensors(4, positive=True))
    assert_lists_close(r_dev, r_cpu)


def test_bfloat16_computes_in_float32(no_fallback):
    cpu, dev, _, _ = run_both(lambda a, b: torch._foreach_addcmul_(a, b, b, value=0.1),
                              tensors(5, torch.bfloat16), tensors(6, torch.bfloat16))
    assert_lists_close(dev[0], cpu[0])


def test_mismatched_lengths_raise():
    a = to_tpu(tensors(0))
    with pytest.raises(RuntimeError, match="same number of tensors"):
        torch._foreach_add_(a, a[:2])


def test_cpu_tensors_in_the_list_use_the_per_tensor_path():
    # Optimizers keep step counters on the CPU: those lists must still work.
    steps = [torch.tensor(1.0), torch.tensor(2.0)]
    torch._foreach_add_(steps, 1)
    assert [s.item() for s in steps] == [2.0, 3.0]


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


@pytest.mark.parametrize("opt_cls,kwargs", [
    (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
    (torch.optim.Adam, dict(lr=1e-2, amsgrad=True)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)),
])
def test_optimizer_steps_match_cpu(opt_cls, kwargs, mode):
    cpu_model = _mlp()
    dev_model = copy.deepcopy(cpu_model).to("tpu")
    cpu_opt = opt_cls(cpu_model.parameters(), foreach=True, **kwargs)
    dev_opt = opt_cls(dev_model.parameters(), foreach=True, **kwargs)
    g = torch.Generator().manual_seed(1)
    torch_tpu.metrics.reset()
    for _ in range(4):
        x = torch.randn(5, 6, generator=g)
        for model, opt, inp in ((cpu_model, cpu_opt, x), (dev_model, dev_opt, x.to("tpu"))):
            opt.zero_grad()
            model(inp).pow(2).mean().backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
            opt.step()
    for p_cpu, p_dev in zip(cpu_model.parameters(), dev_model.parameters()):
        # Float32 rounding differences of the gradients compound over 4 steps.
        torch.testing.assert_close(p_dev.cpu(), p_cpu, rtol=1e-5, atol=1e-6)
    fb = torch_tpu.metrics.fallback_ops()
    assert not any(k.startswith("aten::_foreach") for k in fb), fb


def test_many_same_shaped_tensors_in_one_program(no_fallback):
    # A model's parameters are often many tensors of one shape: the program's elementwise chain
    # must be split into regions that fit the executor's registers.
    cpu = [torch.randn(8, generator=torch.Generator().manual_seed(i)) for i in range(40)]
    exp_avg = [torch.zeros(8) for _ in range(40)]
    dev, dev_avg = to_tpu([t.clone() for t in cpu]), to_tpu([t.clone() for t in exp_avg])
    for params, avg in ((cpu, exp_avg), (dev, dev_avg)):
        torch._foreach_lerp_(avg, params, 0.1)
        torch._foreach_addcdiv_(params, avg, [a.abs() + 1 for a in avg], [-1e-2] * 40)
    assert_lists_close(dev, cpu)
    assert_lists_close(dev_avg, exp_avg)


def test_aliased_lists_follow_tensor_by_tensor_order():
    x, y = torch.randn(5), torch.randn(5)
    cpu_x, cpu_y = x.clone(), y.clone()
    torch._foreach_add_([cpu_x, cpu_y], [cpu_y, cpu_x])
    dx, dy = x.to("tpu"), y.to("tpu")
    torch._foreach_add_([dx, dy], [dy, dx])
    torch.testing.assert_close(dx.cpu(), cpu_x)
    torch.testing.assert_close(dy.cpu(), cpu_y)


def test_scalar_list_length_is_checked():
    a = to_tpu(tensors(0))
    with pytest.raises(RuntimeError, match="same number of elements as scalar list"):
        torch._foreach_add_(a, [1.0])
