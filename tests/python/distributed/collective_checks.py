"""The collectives checked against the math, run on every rank (test_collectives.py spawns them).

Each rank's inputs are a function of (rank, case), so every rank computes every expected result
on the CPU: reductions in float64 (then cast), data movement exactly. Tolerances are
torch.testing's defaults for the dtype: float32 sums differ from the float64 reference by
rounding only; bfloat16/float16 results are the float32 sum rounded once (torch_tpu's documented
rule), within the dtype's default tolerance of the float64 result. Integers and data movement are
exact.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
INTS = (torch.int64, torch.int32, torch.uint8)


def value(rank: int, shape, dtype, case: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 * case + rank)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    lo, hi = (0, 200) if dtype == torch.uint8 else (-50, 50)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def reduce_ref(tensors, op: str, dtype):
    """The reduction of the ranks' CPU tensors, in float64 (or int64, or bool)."""
    wide = torch.float64 if dtype.is_floating_point else (torch.bool if dtype == torch.bool else torch.int64)
    xs = [t.to(wide) for t in tensors]
    out = xs[0].clone()
    for x in xs[1:]:
        if op in ("sum", "avg", "premul"):
            out = out | x if wide == torch.bool else out + x
        elif op == "product":
            out = out & x if wide == torch.bool else out * x
        elif op == "min":
            out = torch.minimum(out, x)
        elif op == "max":
            out = torch.maximum(out, x)
        elif op == "band":
            out = out & x
        elif op == "bor":
            out = out | x
        elif op == "bxor":
            out = out ^ x
    if op == "avg":
        out = out / len(xs)
    if dtype == torch.uint8:
        return (out % 256).to(dtype)  # sums wrap, as on the device
    return out.to(dtype)


OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "product": dist.ReduceOp.PRODUCT,
       "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX, "band": dist.ReduceOp.BAND,
       "bor": dist.ReduceOp.BOR, "bxor": dist.ReduceOp.BXOR}


class Checker:
    def __init__(self, rank, world):
        self.rank, self.world, self.failures, self.count = rank, world, [], 0

    def close(self, name, actual, expected):
        self.count += 1
        try:
            assert actual.device.type == "tpu", f"result on {actual.device}"
            torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)
        except Exception as e:  # collected: the parent reports every failure at once
            self.failures.append(f"rank {self.rank} {name}: {e}")

    def true(self, name, cond, what=""):
        self.count += 1
        if not cond:
            self.failures.append(f"rank {self.rank} {name}: {what}")


def all_reduce_checks(c: Checker, dtypes, shapes, case0=0):
    r, w = c.rank, c.world
    for dtype in dtypes:
        ops = ["sum", "min", "max"]
        if dtype.is_floating_point:
            ops += ["avg", "product"]
        elif dtype != torch.bool:
            ops += ["product", "band", "bor", "bxor"]
        for shape in shapes:
            for case, op in enumerate(ops):
                case += case0 + 10 * len(shape)
                t = value(r, shape, dtype, case).to("tpu")
                dist.all_reduce(t, op=OPS[op])
                c.close(f"all_reduce {op} {dtype} {shape}", t,
                        reduce_ref([value(q, shape, dtype, case) for q in range(w)], op, dtype))
    # PREMUL_SUM with a number and with a device tensor factor (FSDP2's gradient scaling).
    for dtype in (torch.float32, torch.bfloat16):
        for f in (0.5, torch.tensor(0.25, device="tpu")):
            t = value(r, (33,), dtype, 7).to("tpu")
            dist.all_reduce(t, op=dist._make_nccl_premul_sum(f))
            fv = float(f) if not isinstance(f, torch.Tensor) else f.item()
            c.close(f"all_reduce premul {dtype} {fv}", t,
                    reduce_ref([value(q, (33,), dtype, 7) * fv for q in range(w)], "sum", dtype))


def non_contiguous_checks(c: Checker):
    r, w = c.rank, c.world
    # In place on a strided view of a larger tensor: only the view's elements change.
    for name, view in (("every other column", lambda b: b[:, ::2]), ("transposed", lambda b: b.t()),
                       ("offset slice", lambda b: b[1:, 2:5])):
        base = value(r, (6, 8), torch.float32, 31).to("tpu")
        v = view(base)
        dist.all_reduce(v)
        expected = value(r, (6, 8), torch.float32, 31)
        view(expected).copy_(reduce_ref([view(value(q, (6, 8), torch.float32, 31)) for q in range(w)], "sum",
                                        torch.float32))
        c.close(f"all_reduce in place on a {name} view", base, expected)
        base = value(r, (6, 8), torch.float32, 32).to("tpu")
        v = view(base)
        dist.broadcast(v, src=w - 1)
        expected = value(r, (6, 8), torch.float32, 32)
        view(expected).copy_(view(value(w - 1, (6, 8), torch.float32, 32)))
        c.close(f"broadcast in place on a {name} view", base, expected)
    # A non-contiguous input and output of all_gather_into_tensor / reduce_scatter_tensor.
    x = value(r, (4, 6), torch.float32, 33).to("tpu").t()  # (6, 4), non-contiguous
    out = torch.zeros(4, 6 * w, device="tpu").t()        # (6w, 4), non-contiguous
    dist.all_gather_into_tensor(out, x)
    c.close("all_gather_into_tensor of non-contiguous tensors", out,
            torch.cat([value(q, (4, 6), torch.float32, 33).t() for q in range(w)]))
    big = value(r, (4, 6 * w), torch.float32, 34).to("tpu").t()  # (6w, 4)
    res = torch.zeros(4, 6, device="tpu").t()
    dist.reduce_scatter_tensor(res, big)
    full = reduce_ref([value(q, (4, 6 * w), torch.float32, 34).t() for q in range(w)], "sum", torch.float32)
    c.close("reduce_scatter_tensor of non-contiguous tensors", res, full[6 * r:6 * (r + 1)])


def data_movement_checks(c: Checker, dtypes, n: int):
    r, w = c.rank, c.world
    for dtype in dtypes:
        for root in range(w):
            t = value(r, (n,), dtype, 40 + root).to("tpu")
            dist.broadcast(t, src=root)
            c.close(f"broadcast {dtype} from {root}", t, value(root, (n,), dtype, 40 + root))
        x = value(r, (n,), dtype, 50).to("tpu")
        outs = [torch.empty(n, dtype=dtype, device="tpu") for _ in range(w)]
        dist.all_gather(outs, x)
        for q in range(w):
            c.close(f"all_gather {dtype} [{q}]", outs[q], value(q, (n,), dtype, 50))
        out = torch.empty(w * n, dtype=dtype, device="tpu")
        dist.all_gather_into_tensor(out, x)
        c.close(f"all_gather_into_tensor {dtype}", out, torch.cat([value(q, (n,), dtype, 50) for q in range(w)]))
        # gather / scatter to and from the last rank
        root = w - 1
        gl = [torch.empty(n, dtype=dtype, device="tpu") for _ in range(w)] if r == root else None
        dist.gather(x, gl, dst=root)
        if r == root:
            for q in range(w):
                c.close(f"gather {dtype} [{q}]", gl[q], value(q, (n,), dtype, 50))
        sl = [value(root, (n,), dtype, 60 + q).to("tpu") for q in range(w)] if r == root else None
        o = torch.empty(n, dtype=dtype, device="tpu")
        dist.scatter(o, sl, src=root)
        c.close(f"scatter {dtype}", o, value(root, (n,), dtype, 60 + r))
        # all-to-all, equal and uneven splits: rank q sends (q + d + 1) rows to rank d.
        x = value(r, (w * 3, 2), dtype, 70).to("tpu")
        y = torch.empty(w * 3, 2, dtype=dtype, device="tpu")
        dist.all_to_all_single(y, x)
        c.close(f"all_to_all_single equal {dtype}", y,
                torch.cat([value(q, (w * 3, 2), dtype, 70)[3 * r:3 * r + 3] for q in range(w)]))
        send = [r + d + 1 for d in range(w)]
        recv = [q + r + 1 for q in range(w)]
        x = value(r, (sum(send), 3), dtype, 71).to("tpu")
        y = torch.empty(sum(recv), 3, dtype=dtype, device="tpu")
        dist.all_to_all_single(y, x, output_split_sizes=recv, input_split_sizes=send)
        parts = []
        for q in range(w):
            qs = [q + d + 1 for d in range(w)]
            start = sum(qs[:r])
            parts.append(value(q, (sum(qs), 3), dtype, 71)[start:start + qs[r]])
        c.close(f"all_to_all_single uneven {dtype}", y, torch.cat(parts))
        ins = [value(r, (2, q + 1), dtype, 72 + q).to("tpu") for q in range(w)]
        outs = [torch.empty(2, r + 1, dtype=dtype, device="tpu") for _ in range(w)]
        dist.all_to_all(outs, ins)
        for q in range(w):
            c.close(f"all_to_all list {dtype} [{q}]", outs[q], value(q, (2, r + 1), dtype, 72 + r))


def reduce_scatter_checks(c: Checker, dtypes, n: int):
    r, w = c.rank, c.world
    for dtype in dtypes:
        for op in ("sum", "avg") if dtype.is_floating_point else ("sum", "max"):
            x = value(r, (w * n,), dtype, 80).to("tpu")
            o = torch.empty(n, dtype=dtype, device="tpu")
            dist.reduce_scatter_tensor(o, x, op=OPS[op])
            full = reduce_ref([value(q, (w * n,), dtype, 80) for q in range(w)], op, dtype)
            c.close(f"reduce_scatter_tensor {op} {dtype}", o, full[r * n:(r + 1) * n])
            lst = [value(r, (n,), dtype, 81 + q).to("tpu") for q in range(w)]
            o = torch.empty(n, dtype=dtype, device="tpu")
            dist.reduce_scatter(o, lst, op=OPS[op])
            c.close(f"reduce_scatter list {op} {dtype}", o,
                    reduce_ref([value(q, (n,), dtype, 81 + r) for q in range(w)], op, dtype))
        t = value(r, (n,), dtype, 85).to("tpu")
        dist.reduce(t, dst=w - 1)
        if r == w - 1:
            c.close(f"reduce {dtype}", t, reduce_ref([value(q, (n,), dtype, 85) for q in range(w)], "sum", dtype))
        else:
            c.close(f"reduce {dtype} leaves a non-destination rank's tensor", t, value(r, (n,), dtype, 85))
    # PREMUL_SUM reduce-scatter (FSDP2 without gradient division)
    x = value(r, (w * n,), torch.float32, 86).to("tpu")
    o = torch.empty(n, device="tpu")
    dist.reduce_scatter_tensor(o, x, op=dist._make_nccl_premul_sum(1.0 / w))
    full = reduce_ref([value(q, (w * n,), torch.float32, 86) / w for q in range(w)], "sum", torch.float32)
    c.close("reduce_scatter_tensor premul", o, full[r * n:(r + 1) * n])


def async_and_coalesced_checks(c: Checker):
    r, w = c.rank, c.world
    t = value(r, (10,), torch.float32, 90).to("tpu")
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future().then(lambda f: f.value()[0] * 2)  # a device op queued after it
    work.wait()
    ref = reduce_ref([value(q, (10,), torch.float32, 90) for q in range(w)], "sum", torch.float32)
    c.close("async all_reduce", t, ref)
    c.close("future callback", fut.wait(), ref * 2)
    torch.tpu.synchronize()
    c.true("work completed after synchronize", work.is_completed() and work.is_success())
    # The coalescing manager: all_reduce, all_gather_into_tensor, reduce_scatter_tensor.
    ts = [value(r, (k + 3,), torch.float32, 91 + k).to("tpu") for k in range(3)]
    with dist._coalescing_manager(async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    for k, t in enumerate(ts):
        c.close(f"coalesced all_reduce [{k}]", t,
                reduce_ref([value(q, (k + 3,), torch.float32, 91 + k) for q in range(w)], "sum", torch.float32))
    ins = [value(r, (k + 2,), torch.float32, 95 + k).to("tpu") for k in range(2)]
    outs = [torch.empty(w * (k + 2), device="tpu") for k in range(2)]
    with dist._coalescing_manager():
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    for k in range(2):
        c.close(f"coalesced all_gather_into_tensor [{k}]", outs[k],
                torch.cat([value(q, (k + 2,), torch.float32, 95 + k) for q in range(w)]))
    ins = [value(r, (w * (k + 2),), torch.float32, 97 + k).to("tpu") for k in range(2)]
    outs = [torch.empty(k + 2, device="tpu") for k in range(2)]
    with dist._coalescing_manager():
        for o, i in zip(outs, ins):
            dist.reduce_scatter_tensor(o, i)
    for k in range(2):
        full = reduce_ref([value(q, (w * (k + 2),), torch.float32, 97 + k) for q in range(w)], "sum", torch.float32)
        c.close(f"coalesced reduce_scatter_tensor [{k}]", outs[k], full[r * (k + 2):(r + 1) * (k + 2)])
    # Object collectives (bytes through tpu tensors).
    objs = [None] * w
    dist.all_gather_object(objs, {"rank": r, "name": f"r{r}"})
    c.true("all_gather_object", objs == [{"rank": q, "name": f"r{q}"} for q in range(w)], repr(objs))
    lst = [f"from {r}", r] if r == 0 else [None, None]
    dist.broadcast_object_list(lst, src=0)
    c.true("broadcast_object_list", lst == ["from 0", 0], repr(lst))
    dist.barrier()
    dist.barrier(device_ids=[0])


def p2p_checks(c: Checker):
    r, w = c.rank, c.world
    nxt, prv = (r + 1) % w, (r - 1) % w
    # A ring: isend to the next, irecv from the previous (both in flight at once).
    for n in (5, 300000):  # small, and larger than the test's shared-memory chunk
        x = value(r, (n,), torch.float32, 100).to("tpu")
        y = torch.empty(n, device="tpu")
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, x, nxt), dist.P2POp(dist.irecv, y, prv)])
        for q in reqs:
            q.wait()
        c.close(f"batch_isend_irecv ring n={n}", y, value(prv, (n,), torch.float32, 100))
    if r == 0:
        for q in range(1, w):
            dist.send(value(0, (4,), torch.int64, 101 + q).to("tpu"), dst=q, tag=q)
        got = set()
        for _ in range(1, w):
            buf = torch.empty(3, dtype=torch.bfloat16, device="tpu")
            src = dist.recv(buf)  # any source
            got.add(src)
            c.close(f"recv from any source ({src})", buf, value(src, (3,), torch.bfloat16, 110))
        c.true("recv from any source: every sender", got == set(range(1, w)), repr(got))
    else:
        buf = torch.empty(4, dtype=torch.int64, device="tpu")
        dist.recv(buf, src=0, tag=r)
        c.close("send/recv with a tag", buf, value(0, (4,), torch.int64, 101 + r))
        dist.send(value(r, (3,), torch.bfloat16, 110).to("tpu"), dst=0)
