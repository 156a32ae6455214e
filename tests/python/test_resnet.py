"""examples/resnet.py's ResNet-18 and ResNet-50 (our own definitions: torchvision's layout with a
width parameter for speed) trained with SGD (momentum, weight decay) on the device, in both eager
modes, with zero CPU-fallback ops, checked against PyTorch's CPU:

- ResNet-18 in float32 (oneDNN convolutions), ResNet-50 in float64: every device step is
  compared with the same step on CPU taken from the device's state before it (parameters,
  momentum buffers, batch-norm statistics): the loss, every gradient, the updated parameters and
  running statistics; then eval-mode logits.
- ResNet-18 in float64: three steps end to end from the same initial weights, no resynchronisation.
- ResNet-50 in float32: one step, as accurate as CPU's against the float64 step (see the test).
- bfloat16 autocast (bfloat16 convolutions, batch norm on bfloat16 activations with float32
  parameters): one step, natively, as accurate as CPU's autocast step.
- the example's checkpoint save/resume (exact) and its inference benchmark.

Why float32 is compared step by step: the network has max pools and ReLUs, whose gradients jump
when two nearly equal activations swap order. Float32 rounding differences (between any two
correct implementations, CPU's own against float64 included) make such swaps likely within a few
steps, after which the runs legitimately differ by percents. From one shared state a step matches
to float32 rounding: rtol=1e-4, atol=1e-5 (batch norm divides by per-batch standard deviations,
which amplifies the ulp-level differences of the convolutions). A gradient is a sum with
cancellation, so its error scales with the largest terms, not with each element: gradients are
compared to 1e-4 of their largest magnitude. Float64 differences are ~1e-15, far below any such
swap, so three independent steps (or a ResNet-50 step from a shared state) must match to
rtol=1e-9. Under autocast both sides round every activation to bfloat16 (8 bits), at different
points of their kernels: losses agree to 1e-2, and gradients are compared by their distance to
the float32 gradients.
"""
import copy
import os
import sys

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import resnet  # noqa: E402

TOL32 = dict(rtol=1e-4, atol=1e-5)
TOL64 = dict(rtol=1e-9, atol=1e-10)


def make_batches(n, batch=8, seed=1):
    data = resnet.SyntheticImages(32, seed=seed)
    return [data.batch(i, batch) for i in range(n)]


def sgd(model):
    return resnet.sgd(model, lr=0.05)


def step(model, opt, x, y):
    loss = resnet.train_step(model, opt, x, y).item()
    return loss, [p.grad.detach().cpu().clone() for p in model.parameters()]


def assert_close_to_scale(got, want, rel, msg):
    err = (got - want).abs().max().item()
    scale = want.abs().max().item()
    assert err <= rel * scale + 1e-7, f"{msg}: max error {err:.3g} for values up to {scale:.3g}"


def assert_same_state(dev_model, cpu_model, tol, what):
    # Parameters and buffers: running_mean, running_var, num_batches_tracked of every batch norm.
    for (name, want), got in zip(cpu_model.state_dict().items(), dev_model.state_dict().values()):
        torch.testing.assert_close(got.cpu(), want, **tol, msg=f"{what}: {name}")


# ResNet-18 in float32; ResNet-50 (width 4: 16 bottlenecks of 4..32 -> 16..128 channels) in
# float64, since its float32 step is ill-conditioned (see test_resnet50_float32_step_as_accurate_as_cpu).
SAME_STATE_CASES = {
    "resnet18-float32": dict(arch="resnet18", width=8, steps=3, batch=8, dtype=torch.float32, tol=TOL32, grad_rel=1e-4),
    "resnet50-float64": dict(arch="resnet50", width=4, steps=2, batch=4, dtype=torch.float64, tol=TOL64, grad_rel=1e-9),
}


@pytest.mark.parametrize("case", SAME_STATE_CASES)
def test_steps_from_the_same_state_match_cpu(case, mode):
    arch, width, steps, batch, dtype, tol, grad_rel = SAME_STATE_CASES[case].values()
    torch.manual_seed(0)
    dev_model = resnet.ARCHS[arch](width).to("tpu", dtype).train()
    dev_opt = sgd(dev_model)
    cpu_model = resnet.ARCHS[arch](width).to(dtype=dtype).train()
    cpu_opt = sgd(cpu_model)
    torch_tpu.metrics.reset()
    for i, (x, y) in enumerate(make_batches(steps, batch)):
        x = x.to(dtype)
        # The CPU takes the same step from the device's current state.
        cpu_model.load_state_dict(dev_model.state_dict())
        cpu_opt.load_state_dict(dev_opt.state_dict())
        cpu_loss, cpu_grads = step(cpu_model, cpu_opt, x, y)
        dev_loss, dev_grads = step(dev_model, dev_opt, x.to("tpu"), y.to("tpu"))
        torch.testing.assert_close(dev_loss, cpu_loss, **tol, msg=f"loss of step {i}")
        for (name, _), got, want in zip(cpu_model.named_parameters(), dev_grads, cpu_grads):
            assert_close_to_scale(got, want, grad_rel, f"step {i}: grad of {name}")
        assert_same_state(dev_model, cpu_model, tol, f"after step {i}")
    fallbacks = torch_tpu.metrics.fallback_ops()
    assert not fallbacks, f"ops fell back to the CPU: {fallbacks}"
    x = make_batches(1, batch=3, seed=5)[0][0].to(dtype)
    with torch.no_grad():
        cpu_model.load_state_dict(dev_model.state_dict())
        want = cpu_model.eval()(x)
        got = dev_model.eval()(x.to("tpu")).cpu()
    assert not torch_tpu.metrics.fallback_ops()
    torch.testing.assert_close(got, want, **tol)


def test_resnet18_float64_trains_like_cpu(mode, no_fallback):
    torch.manual_seed(0)
    cpu_model = resnet.resnet18(width=8).double().train()
    dev_model = copy.deepcopy(cpu_model).to("tpu")
    cpu_opt, dev_opt = sgd(cpu_model), sgd(dev_model)
    cpu_losses, dev_losses = [], []
    for x, y in make_batches(3):
        cpu_losses.append(step(cpu_model, cpu_opt, x.double(), y)[0])
        dev_losses.append(step(dev_model, dev_opt, x.double().to("tpu"), y.to("tpu"))[0])
    torch.testing.assert_close(dev_losses, cpu_losses, **TOL64)
    assert_same_state(dev_model, cpu_model, TOL64, "after 3 steps")


@pytest.mark.xfail(torch_tpu.config.get("backend") == "pjrt", strict=True,
                   reason="pjrt backend (XLA's CPU plugin, strict mode): float32 gradients are less accurate "
                          "against float64 than PyTorch CPU's beyond the 2x allowed (grad of layers.0.1.bn2.bias: "
                          "error 0.0344 vs CPU's 0.014, values up to 25.1); not yet traced to an op")
def test_resnet50_float32_step_as_accurate_as_cpu(mode, no_fallback):
    # ResNet-50's float32 step is ill-conditioned (16 bottlenecks, batch norm over a batch of 4 at
    # 1x1 in the last stage, gradients up to ~400): CPU's own float32 gradients differ from
    # float64 by ~3e-3 of their scale here, and the next step from such a state differs by O(1),
    # so a fixed float32 tolerance would prove little. Instead the device's float32 step must be
    # about as close to the float64 step as CPU's float32 step is (the float64 same-state test
    # proves the device's math): error(tpu) <= 2 * error(cpu) + 1e-5 * scale, per tensor.
    torch.manual_seed(0)
    model = resnet.resnet50(width=4).train()
    x, y = make_batches(1, batch=4)[0]
    runs = {}
    for tag, device, dtype in [("f64", "cpu", torch.float64), ("cpu", "cpu", torch.float32),
                               ("tpu", "tpu", torch.float32)]:
        m = copy.deepcopy(model).to(device, dtype)
        loss, grads = step(m, sgd(m), x.to(device, dtype), y.to(device))
        state = [t.detach().cpu().double() for t in m.state_dict().values()]
        with torch.no_grad():
            logits = m.eval()(make_batches(1, batch=3, seed=5)[0][0].to(device, dtype)).cpu().double()
        runs[tag] = [torch.tensor(loss, dtype=torch.float64), logits] + [g.double() for g in grads] + state
    names = ["loss", "eval logits"] + [f"grad of {n}" for n, _ in model.named_parameters()] + \
        [f"state {n}" for n in model.state_dict()]
    for name, ref, cpu, dev in zip(names, runs["f64"], runs["cpu"], runs["tpu"]):
        scale = ref.abs().max().item()
        err_cpu, err_dev = (cpu - ref).abs().max().item(), (dev - ref).abs().max().item()
        assert err_dev <= 2 * err_cpu + 1e-5 * scale + 1e-7, \
            f"{name}: device error {err_dev:.3g} vs CPU's {err_cpu:.3g} (values up to {scale:.3g})"


def test_resnet18_bfloat16_autocast_step(no_fallback):
    torch.manual_seed(0)
    model = resnet.resnet18(width=8).train()
    x, y = make_batches(1)[0]
    losses, grads = {}, {}
    for tag, device, autocast in [("f32", "cpu", False), ("cpu", "cpu", True), ("tpu", "tpu", True)]:
        m = copy.deepcopy(model).to(device)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
            logits = m(x.to(device))
            loss = F.cross_entropy(logits, y.to(device))
        assert logits.dtype == (torch.bfloat16 if autocast else torch.float32)
        loss.backward()
        losses[tag] = loss.item()
        grads[tag] = torch.cat([p.grad.cpu().flatten() for p in m.parameters()])
    torch.testing.assert_close(losses["tpu"], losses["cpu"], rtol=1e-2, atol=0)
    # Gradients through bfloat16 activations are far from float32 ones (~40% here, on CPU too):
    # the device's must be about as close to the float32 gradients as CPU's autocast ones.
    err = {k: ((grads[k] - grads["f32"]).norm() / grads["f32"].norm()).item() for k in ("cpu", "tpu")}
    assert err["tpu"] <= 1.25 * err["cpu"] + 0.02, err


def test_checkpoint_resume_continues_exactly(tmp_path, no_fallback):
    # Weights, momentum buffers and batch-norm running statistics all come back: a resumed run
    # repeats the same programs on the same data, so it matches the uninterrupted run exactly.
    kw = dict(batch_size=4, width=4, progress=False)
    full_model, full_losses, _ = resnet.train("resnet18", "tpu", 4, **kw)
    ckpt = str(tmp_path / "ckpt.pt")
    _, first, _ = resnet.train("resnet18", "tpu", 2, save=ckpt, **kw)
    assert first == full_losses[:2]
    resumed_model, rest, _ = resnet.train("resnet18", "tpu", 4, resume=ckpt, **kw)
    assert rest == full_losses[2:]
    for (name, want), got in zip(full_model.state_dict().items(), resumed_model.state_dict().values()):
        assert torch.equal(got.cpu(), want.cpu()), name
    with pytest.raises(ValueError, match="resnet18 width 4, not resnet50"):
        resnet.train("resnet50", "tpu", 3, resume=ckpt, **kw)


def test_inference_benchmark_runs_in_eval_mode(no_fallback):
    model = resnet.resnet50(width=4).to("tpu")
    img_s = resnet.benchmark_inference(model, "tpu", steps=2, batch_size=4, warmup=1, progress=False)
    assert img_s > 0 and not model.training
