"""Counters of what the device did: executions, compiles, compile-cache hits/misses, host syncs,
transfers and bytes, and one ``fallback/aten::name`` counter per op that ran on the CPU."""
from __future__ import annotations

from . import _C


def counters() -> dict[str, int]:
    return dict(_C.counters())


def reset() -> None:
    _C.reset_counters()


def window_cuts() -> dict[str, int]:
    """Why fused windows were cut: reason -> count (host_read, synchronize, size_limit, fallback,
    mode_change, alias, each_op, compiled_graph, collective, optimizer_step, backward,
    optimizer_begin, work_limit)."""
    return {k[len("window_cuts/"):]: v for k, v in counters().items() if k.startswith("window_cuts/") and v}


def fallback_ops() -> dict[str, int]:
    """Ops that ran through the CPU fallback, with their counts."""
    return {k[len("fallback/"):]: v for k, v in counters().items() if k.startswith("fallback/") and v}


def report() -> str:
    c = counters()
    get = lambda k: c.get(k, 0)  # noqa: E731
    lines = [
        "torch_tpu metrics",
        f"  executions           {get('executions')}  ({get('inline_executions')} small ones run inline on an idle queue)",
        f"  compiles             {get('compiles')}  ({get('compile_time_ns') / 1e6:.1f} ms)",
        f"  compile cache        {get('compile_cache_hits')} hits, {get('compile_cache_misses')} misses"
        + (f" ({get('compile_cache_disk_hits')} loaded from the cache directory)" if get('compile_cache_disk_hits') else ""),
        f"  host syncs           {get('host_syncs')}",
        f"  fused windows        {get('windows')}"
        + (f"  ({get('window_ops') / max(1, get('windows')):.1f} ops per window; cut by: "
           + ", ".join(f"{k[len('window_cuts/'):]} {v}" for k, v in sorted(c.items())
                       if k.startswith("window_cuts/") and v) + ")" if get('windows') else ""),
        f"  to device            {get('transfers_to_device')} transfers, {get('transfer_bytes_to_device')} bytes",
        f"  to host              {get('transfers_to_host')} transfers, {get('transfer_bytes_to_host')} bytes",
    ]
    reasons = {k[len("compile_reasons/"):]: v for k, v in c.items() if k.startswith("compile_reasons/") and v}
    if reasons:
        lines.append("  compiles by reason   " + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())))
        from . import compile_cache
        for name, reason, what in compile_cache.recompiles(include_new=False)[-5:]:
            lines.append(f"    {name}: {reason}: {what}")
    fb = fallback_ops()
    if fb:
        lines.append(f"  CPU fallback ops     {sum(fb.values())} calls:")
        for name, n in sorted(fb.items(), key=lambda kv: -kv[1]):
            lines.append(f"    {name:<40} {n}")
    else:
        lines.append("  CPU fallback ops     none")
    return "\n".join(lines)
