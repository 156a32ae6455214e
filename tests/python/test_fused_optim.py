"""Fused optimizer steps and GradScaler's kernels on the device, against PyTorch's fused CPU
kernels: torch.optim.Adam/AdamW/SGD(fused=True) for several steps (weight decay, amsgrad,
maximize, momentum/dampening/nesterov, a tensor learning rate, bfloat16 parameters), the fused
ops called directly with grad_scale/found_inf, _amp_foreach_non_finite_check_and_unscale_ and
_amp_update_scale_ on edge values, and a GradScaler + autocast training loop with an inf step.

Tolerances: float32 parameters at rtol 1e-5/atol 1e-6 after 4 steps. The update is the CPU
kernel's formula, but the CPU vector loop uses fused multiply-adds (lerp, SGD's momentum) where
our program rounds the product first, so values differ by an ulp or two per step; Adam divides
by sqrt(v) + eps, which can turn an ulp in v into a few ulps in the step. bfloat16 parameters at
bfloat16's default tolerances (an ulp difference in float can flip one rounding).
"""
import copy

import pytest
import torch

import torch_tpu

F32 = dict(rtol=1e-5, atol=1e-6)


def model_and_data(dtype=torch.float32):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(7, 33), torch.nn.Tanh(), torch.nn.Linear(33, 3)).to(dtype)
    x = torch.randn(5, 7, generator=torch.Generator().manual_seed(1)).to(dtype)
    return model, x


def train(model, x, make_opt, device, steps=4):
    model = copy.deepcopy(model).to(device)
    opt = make_opt(model.parameters())
    x = x.to(device)
    for _ in range(steps):
        loss = model(x).float().pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [p.detach().cpu() for p in model.parameters()], opt


CONFIGS = {
    "adamw": (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
    "adamw_amsgrad_maximize": (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1, amsgrad=True, maximize=True)),
    "adamw_big_beta1_weight": (torch.optim.AdamW, dict(lr=1e-2, betas=(0.3, 0.95))),  # lerp's other formula
    "adamw_tensor_lr": (torch.optim.AdamW, dict(lr=torch.tensor(1e-2), weight_decay=0.1)),
    "adam": (torch.optim.Adam, dict(lr=1e-2)),
    "adam_weight_decay_amsgrad": (torch.optim.Adam, dict(lr=1e-2, weight_decay=0.1, amsgrad=True)),
    "adam_maximize_tensor_lr": (torch.optim.Adam, dict(lr=torch.tensor(3e-3), maximize=True)),
    "sgd": (torch.optim.SGD, dict(lr=1e-2)),
    "sgd_momentum_dampening": (torch.optim.SGD, dict(lr=1e-2, momentum=0.9, dampening=0.2, weight_decay=0.1)),
    "sgd_nesterov_maximize": (torch.optim.SGD, dict(lr=1e-2, momentum=0.9, nesterov=True, maximize=True)),
    "sgd_tensor_lr": (torch.optim.SGD, dict(lr=torch.tensor(1e-2), momentum=0.5)),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_fused_optimizer_matches_cpu(name, mode, no_fallback):
    cls, kw = CONFIGS[name]
    model, x = model_and_data()
    make = lambda params: cls(params, fused=True, **kw)  # noqa: E731
    expected, _ = train(model, x, make, "cpu")
    actual, opt = train(model, x, make, "tpu")
    assert opt.defaults["fused"]
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, **F32)


@pytest.mark.parametrize("name", ["adamw_amsgrad_maximize", "adam_weight_decay_amsgrad"])
def test_fused_optimizer_bfloat16_params(name, no_fallback):
    cls, kw = CONFIGS[name]
    model, x = model_and_data(torch.bfloat16)
    make = lambda params: cls(params, fused=True, **kw)  # noqa: E731
    expected, _ = train(model, x, make, "cpu")
    actual, _ = train(model, x, make, "tpu")
    for a, e in zip(actual, expected):
        assert a.dtype == torch.bfloat16
        torch.testing.assert_close(a, e)


def test_fused_sgd_bfloat16_params(no_fallback):
    # torch 2.13's fused CPU SGD kernel leaves bfloat16/float16 parameters unchanged in its vector
    # loop (it never stores them), so the reference here is the same formula in float32 on the
    # bfloat16 values, rounded once to bfloat16, as the kernel's scalar loop does.
    g = torch.Generator().manual_seed(0)
    p, grad, buf = (torch.randn(64, generator=g).bfloat16() for _ in range(3))
    lr, wd, mom, damp = 0.1, 0.01, 0.9, 0.1
    gf = grad.float() + p.float() * wd
    buf_f = buf.float() * mom + gf * (1 - damp)
    expected_p = (p.float() - (gf + buf_f * mom) * lr).bfloat16()
    tp, tgrad, tbuf = p.to("tpu"), grad.to("tpu"), buf.to("tpu")
    torch._fused_sgd_([tp], [tgrad], [tbuf], weight_decay=wd, momentum=mom, lr=lr, dampening=damp, nesterov=True,
                      maximize=False, is_first_step=False)
    assert torch.equal(tbuf.cpu(), buf_f.bfloat16())
    torch.testing.assert_close(tp.cpu(), expected_p, rtol=0, atol=0)


def adam_state(device, n=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(4, 5), (17,), ()][:n]
    mk = lambda: [torch.randn(s, generator=g).to(device) for s in shapes]  # noqa: E731
    params, grads, avgs = mk(), mk(), mk()
    sqs = [t.abs().to(device) for t in mk()]
    maxs = [t.abs().to(device) for t in mk()]
    steps = [torch.tensor(float(k + 1), device=device) for k in range(n)]
    return params, grads, avgs, sqs, maxs, steps


@pytest.mark.parametrize("op", [torch._fused_adam_, torch._fused_adamw_])
@pytest.mark.parametrize("found", [None, 0.0, 1.0])
def test_fused_adam_with_grad_scale_and_found_inf(op, found, no_fallback):
    results = {}
    for device in ("cpu", "tpu"):
        state = adam_state(device)
        kw = dict(lr=1e-2, beta1=0.9, beta2=0.99, weight_decay=0.05, eps=1e-8, amsgrad=True, maximize=False,
                  grad_scale=torch.full((1,), 8.0, device=device))
        if found is not None:
            kw["found_inf"] = torch.full((1,), found, device=device)
        torch_tpu.metrics.reset()
        op(*state, **kw)
        if device == "tpu":
            assert torch_tpu.metrics.counters().get("executions", 0) == 1  # one program for the whole step
        results[device] = [[t.cpu() for t in lst] for lst in state]
    original = [[t.clone() for t in lst] for lst in adam_state("cpu")]
    for lst_tpu, lst_cpu, lst_orig in zip(results["tpu"], results["cpu"], original):
        for a, e, o in zip(lst_tpu, lst_cpu, lst_orig):
            torch.testing.assert_close(a, e, **F32)
            if found == 1.0:
                assert torch.equal(a, o)  # a skipped step changes nothing, gradients included


@pytest.mark.parametrize("first_step", [True, False])
@pytest.mark.parametrize("found", [None, 0.0, 1.0])
def test_fused_sgd_with_grad_scale_and_found_inf(first_step, found, no_fallback):
    results = {}
    for device in ("cpu", "tpu"):
        params, grads, bufs = adam_state(device)[:3]
        kw = dict(weight_decay=0.1, momentum=0.9, lr=0.1, dampening=0.1, nesterov=False, maximize=True,
                  is_first_step=first_step, grad_scale=torch.full((1,), 4.0, device=device))
        if found is not None:
            kw["found_inf"] = torch.full((1,), found, device=device)
        torch._fused_sgd_(params, grads, bufs, **kw)
        results[device] = [t.cpu() for t in params + grads + bufs]
    for a, e in zip(results["tpu"], results["cpu"]):
        torch.testing.assert_close(a, e, **F32)


def test_fused_functional_form(no_fallback):
    # _fused_adamw (no trailing underscore) is ATen's composite wrapper: it returns new tensors.
    cpu_state, tpu_state = adam_state("cpu"), adam_state("tpu")
    kw = dict(lr=1e-2, beta1=0.9, beta2=0.99, weight_decay=0.05, eps=1e-8, amsgrad=True, maximize=False)
    expected = torch.ops.aten._fused_adamw(*cpu_state, **kw)
    actual = torch.ops.aten._fused_adamw(*tpu_state, **kw)
    for ea, aa in zip(expected, actual):
        for e, a in zip(ea, aa):
            torch.testing.assert_close(a.cpu(), e, **F32)


@pytest.mark.parametrize("fused_op", ["adamw", "sgd"])
def test_gradients_that_are_views_of_one_buffer(fused_op, no_fallback):
    """FSDP2 hands the optimizer gradients that are views of one reduce-scatter buffer: the step
    only reads them, so it runs (as on the CPU). Where it writes them back (unscaling by a
    grad_scale), views of one storage are refused by name."""
    def step(device):
        g = torch.Generator().manual_seed(2)
        params = [torch.nn.Parameter(torch.randn(s, generator=g).to(device)) for s in ((3, 4), (5,))]
        flat = torch.randn(17, generator=g).to(device)
        params[0].grad, params[1].grad = flat[:12].view(3, 4), flat[12:]
        opt = (torch.optim.AdamW(params, lr=0.1, weight_decay=0.1, fused=True) if fused_op == "adamw" else
               torch.optim.SGD(params, lr=0.1, momentum=0.9, fused=True))
        for _ in range(3):
            opt.step()
        return [p.detach().cpu() for p in params]

    for a, e in zip(step("tpu"), step("cpu")):
        torch.testing.assert_close(a, e, **F32)
    params, grads, avgs, sqs, _, steps = adam_state("tpu")
    flat = torch.cat([g.flatten() for g in grads])
    views, k = [], 0
    for g in grads:
        views.append(flat[k:k + g.numel()].view(g.shape))
        k += g.numel()
    with pytest.raises(RuntimeError, match=r"grads\[1\] shares its storage with another tensor the step writes"):
        torch._fused_adamw_(params, views, avgs, sqs, [], steps, lr=1e-2, beta1=0.9, beta2=0.99, weight_decay=0.0,
                            eps=1e-8, amsgrad=False, maximize=False, grad_scale=torch.full((1,), 2.0, device="tpu"))


def test_fused_errors_are_clear():
    params, grads, avgs, sqs, maxs, steps = adam_state("tpu")
    kw = dict(lr=1e-2, beta1=0.9, beta2=0.99, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
    with pytest.raises(RuntimeError, match="expected as many grads as parameters"):
        torch._fused_adam_(params, grads[:2], avgs, sqs, [], steps, **kw)
    with pytest.raises(RuntimeError, match="max_exp_avg_sqs must be empty"):
        torch._fused_adam_(params, grads, avgs, sqs, maxs, steps, **kw)
    with pytest.raises(RuntimeError, match=r"grads\[1\] has shape"):
        torch._fused_adam_(params, [grads[0], grads[0], grads[2]], avgs, sqs, [], steps, **kw)
    with pytest.raises(RuntimeError, match=r"exp_avgs\[0\] is on cpu"):
        torch._fused_adam_(params, grads, [avgs[0].cpu()] + avgs[1:], sqs, [], steps, **kw)
    with pytest.raises(RuntimeError, match="grad_scale must be a float tensor"):
        torch._fused_adam_(params, grads, avgs, sqs, [], steps, **kw, grad_scale=torch.ones(1, device="tpu").double())
    # The device stays usable.
    torch._fused_adam_(params, grads, avgs, sqs, [], steps, **kw)
    torch.tpu.synchronize()


# ---- GradScaler ------------------------------------------------------------------------------
@pytest.mark.parametrize("found_before", [0.0, 1.0])
@pytest.mark.parametrize("inv_scale", [0.25, 1.0])
def test_amp_unscale_matches_cpu(found_before, inv_scale, no_fallback):
    def run(device, bad):
        g = torch.Generator().manual_seed(3)
        grads = [torch.randn(6, 5, generator=g), torch.randn(9, generator=g).bfloat16(), torch.randn(0)]
        if bad is not None:
            grads[1][4] = bad
        grads = [t.to(device) for t in grads]
        found = torch.full((1,), found_before, device=device)
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found, torch.full((1,), inv_scale, device=device))
        return [t.cpu() for t in grads], found.cpu()

    for bad in (None, float("inf"), float("-inf"), float("nan")):
        (ga, fa), (ge, fe) = run("tpu", bad), run("cpu", bad)
        assert torch.equal(fa, fe), (bad, fa, fe)
        for a, e in zip(ga, ge):
            torch.testing.assert_close(a, e, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("scale, tracker, found", [
    (1024.0, 0, 0.0), (1024.0, 1, 0.0), (1024.0, 1, 1.0), (3e38, 1, 0.0), (2.0, 5, float("nan")), (65536.0, 0, 2.0)])
def test_amp_update_scale_matches_cpu(scale, tracker, found, no_fallback):
    out = {}
    for device in ("cpu", "tpu"):
        s = torch.full((1,), scale, device=device)
        t = torch.full((1,), tracker, dtype=torch.int32, device=device)
        r = torch._amp_update_scale_(s, t, torch.full((1,), found, device=device), 2.0, 0.5, 2)
        assert r is s
        out[device] = (s.cpu(), t.cpu())
    assert torch.equal(out["tpu"][0], out["cpu"][0]) and torch.equal(out["tpu"][1], out["cpu"][1])


@pytest.mark.parametrize("fused", [False, True])
def test_grad_scaler_autocast_loop_with_an_inf_step(fused, no_fallback):
    """GradScaler + autocast("tpu"): the scale backs off at the inf step (whose update is skipped:
    the parameters do not change) and grows after growth_interval clean steps; the same run on CPU
    (autocast("cpu"), also bfloat16) has the same scales and close parameters (bfloat16 matmuls:
    bfloat16 tolerances)."""
    model, x = model_and_data()

    def run(device):
        m = copy.deepcopy(model).to(device)
        opt = torch.optim.Adam(m.parameters(), lr=1e-2, fused=fused)
        scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 10, growth_interval=2)
        scales, unchanged = [], []
        for step in range(5):
            xs = x.clone()
            if step == 2:
                xs[0, 0] = float("inf")
            xs = xs.to(device)
            before = [p.detach().to("cpu", copy=True) for p in m.parameters()]
            with torch.autocast(device, dtype=torch.bfloat16):
                loss = m(xs).float().pow(2).mean()
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
            unchanged.append(all(torch.equal(b, p.detach().cpu()) for b, p in zip(before, m.parameters())))
        return scales, unchanged, [p.detach().cpu() for p in m.parameters()]

    scales_cpu, unchanged_cpu, params_cpu = run("cpu")
    scales_tpu, unchanged_tpu, params_tpu = run("tpu")
    assert scales_tpu == scales_cpu == [1024.0, 2048.0, 1024.0, 1024.0, 2048.0]
    assert unchanged_tpu == unchanged_cpu == [False, False, True, False, False]
    for a, e in zip(params_tpu, params_cpu):
        torch.testing.assert_close(a, e, rtol=1.6e-2, atol=1e-3)
