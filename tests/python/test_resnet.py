"""A ResNet-18 (our own definition: torchvision's layout with a width parameter for speed) trained
with SGD (momentum, weight decay) on the device, in both eager modes, with zero CPU-fallback ops,
checked against PyTorch's CPU:

- float32 (oneDNN convolutions): every device step is compared with the same step on CPU taken
  from the device's state before it (parameters, momentum buffers, batch-norm statistics): the
  loss, every gradient, the updated parameters and running statistics; then eval-mode logits.
- float64: three steps end to end from the same initial weights, no resynchronisation.
- bfloat16 autocast (bfloat16 convolutions, batch norm on bfloat16 activations with float32
  parameters): one step, natively, as accurate as CPU's autocast step.

Why float32 is compared step by step: the network has max pools and ReLUs, whose gradients jump
when two nearly equal activations swap order. Float32 rounding differences (between any two
correct implementations, CPU's own against float64 included) make such swaps likely within a few
steps, after which the runs legitimately differ by percents. From one shared state a step matches
to float32 rounding: rtol=1e-4, atol=1e-5 (batch norm divides by per-batch standard deviations,
which amplifies the ulp-level differences of the convolutions). A gradient is a sum with
cancellation, so its error scales with the largest terms, not with each element: gradients are
compared to 1e-4 of their largest magnitude. Float64 differences are ~1e-15, far below any such
swap, so three independent steps must match to rtol=1e-9. Under autocast both sides round every
activation to bfloat16 (8 bits), at different points of their kernels: losses agree to 1e-2, and
gradients are compared by their distance to the float32 gradients.
"""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu

TOL32 = dict(rtol=1e-4, atol=1e-5)
TOL64 = dict(rtol=1e-9, atol=1e-10)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    """7x7/2 stem, 3x3/2 max pool, four stages of two basic blocks, global average pool, linear."""

    def __init__(self, width=64, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers, cin = [], width
        for i, cout in enumerate([width, 2 * width, 4 * width, 8 * width]):
            stride = 1 if i == 0 else 2
            layers.append(nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.avgpool(self.layers(x))
        return self.fc(torch.flatten(x, 1))


def make_batches(n, batch=8, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch, 3, 32, 32, generator=g), torch.randint(0, 10, (batch,), generator=g))
            for _ in range(n)]


def sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)


def step(model, opt, x, y):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    grads = [p.grad.detach().cpu().clone() for p in model.parameters()]
    opt.step()
    return loss.item(), grads


def assert_close_to_scale(got, want, rel, msg):
    err = (got - want).abs().max().item()
    scale = want.abs().max().item()
    assert err <= rel * scale + 1e-7, f"{msg}: max error {err:.3g} for values up to {scale:.3g}"


def assert_same_state(dev_model, cpu_model, tol, what):
    # Parameters and buffers: running_mean, running_var, num_batches_tracked of every batch norm.
    for (name, want), got in zip(cpu_model.state_dict().items(), dev_model.state_dict().values()):
        torch.testing.assert_close(got.cpu(), want, **tol, msg=f"{what}: {name}")


def test_resnet18_float32_steps_match_cpu(mode):
    torch.manual_seed(0)
    dev_model = ResNet18(width=8).to("tpu").train()
    dev_opt = sgd(dev_model)
    cpu_model = ResNet18(width=8).train()
    cpu_opt = sgd(cpu_model)
    torch_tpu.metrics.reset()
    for i, (x, y) in enumerate(make_batches(3)):
        # The CPU takes the same step from the device's current state.
        cpu_model.load_state_dict(dev_model.state_dict())
        cpu_opt.load_state_dict(dev_opt.state_dict())
        cpu_loss, cpu_grads = step(cpu_model, cpu_opt, x, y)
        dev_loss, dev_grads = step(dev_model, dev_opt, x.to("tpu"), y.to("tpu"))
        torch.testing.assert_close(dev_loss, cpu_loss, **TOL32, msg=f"loss of step {i}")
        for (name, _), got, want in zip(cpu_model.named_parameters(), dev_grads, cpu_grads):
            assert_close_to_scale(got, want, 1e-4, f"step {i}: grad of {name}")
        assert_same_state(dev_model, cpu_model, TOL32, f"after step {i}")
    fallbacks = torch_tpu.metrics.fallback_ops()
    assert not fallbacks, f"ops fell back to the CPU: {fallbacks}"
    x = make_batches(1, batch=3, seed=5)[0][0]
    with torch.no_grad():
        cpu_model.load_state_dict(dev_model.state_dict())
        want = cpu_model.eval()(x)
        got = dev_model.eval()(x.to("tpu")).cpu()
    assert not torch_tpu.metrics.fallback_ops()
    torch.testing.assert_close(got, want, **TOL32)


def test_resnet18_float64_trains_like_cpu(mode, no_fallback):
    torch.manual_seed(0)
    cpu_model = ResNet18(width=8).double().train()
    dev_model = copy.deepcopy(cpu_model).to("tpu")
    cpu_opt, dev_opt = sgd(cpu_model), sgd(dev_model)
    cpu_losses, dev_losses = [], []
    for x, y in make_batches(3):
        cpu_losses.append(step(cpu_model, cpu_opt, x.double(), y)[0])
        dev_losses.append(step(dev_model, dev_opt, x.double().to("tpu"), y.to("tpu"))[0])
    torch.testing.assert_close(dev_losses, cpu_losses, **TOL64)
    assert_same_state(dev_model, cpu_model, TOL64, "after 3 steps")


def test_resnet18_bfloat16_autocast_step(no_fallback):
    torch.manual_seed(0)
    model = ResNet18(width=8).train()
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
