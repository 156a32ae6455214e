"""The extension's kernel registrations for the tpu (PrivateUse1) key.

`m.impl("eq.out", ...)` for an operator whose out= overload is named `eq.Tensor_out` does not
fail: the dispatcher keeps the kernel under a name no schema has, and `torch.eq(a, b, out=c)`
silently runs through the CPU fallback. Every registration must name a real ATen schema.
"""
import torch

import torch_tpu  # noqa: F401  (registers the kernels)


def test_every_registration_names_an_aten_schema():
    orphans = []
    for name in torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1"):
        if not name.startswith("aten::"):
            continue
        op, _, overload = name[len("aten::"):].partition(".")
        try:
            torch._C._dispatch_find_schema_or_throw("aten::" + op, overload)
        except RuntimeError:
            orphans.append(name)
    assert not orphans, f"registered under names without a schema (never called): {orphans}"


def test_comparison_out_forms_are_native(no_fallback):
    a, b = torch.randn(5), torch.randn(5)
    for op in (torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge):
        out = torch.empty(0, dtype=torch.bool, device="tpu")
        op(a.to("tpu"), b.to("tpu"), out=out)
        assert torch.equal(out.cpu(), op(a, b)), op.__name__
    for op in (torch.remainder, torch.fmod):
        out = torch.empty(0, device="tpu")
        op(a.to("tpu"), b.to("tpu"), out=out)
        torch.testing.assert_close(out.cpu(), op(a, b), rtol=0, atol=0)
