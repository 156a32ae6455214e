"""``torch_tpu.profiler``: the tpu device's timeline in ``torch.profiler`` traces.

Profile as on CUDA, with the PrivateUse1 activity (the tpu device)::

    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        train_step()
    print(prof.key_averages().table(sort_by="self_device_time_total"))
    prof.export_chrome_trace("trace.json")        # chrome://tracing or https://ui.perfetto.dev

Every task the device queue ran while the profile recorded is a device event (process ``tpu:N``
in the trace): its program (a lowered op's name such as ``aten::mm``, or ``fused window`` with the
ops it holds), the user's line that issued it, its kind (program / copy / host task) and how
long the device ran it. Events link to the CPU op that issued them, whose device time they make up
(Note [Device timeline] in csrc/torch/profiler.cc). The helpers here read those events back.
"""
from __future__ import annotations

import json
from typing import Iterable, Optional

import torch

__all__ = ["device_events", "device_time_us", "trace_device_events", "plot_trace"]


def _is_device_event(e) -> bool:
    return e.device_type == torch.autograd.DeviceType.PrivateUse1


def device_events(prof) -> list:
    """The device's events of a finished ``torch.profiler.profile`` (FunctionEvents)."""
    return [e for e in prof.events() if _is_device_event(e)]


def device_time_us(prof) -> float:
    """Total time the device spent running tasks during the profile, in microseconds."""
    return sum(e.time_range.elapsed_us() for e in device_events(prof))


def trace_device_events(trace: dict | str) -> list[dict]:
    """The device events of an exported Chrome trace (a path or the loaded JSON)."""
    if isinstance(trace, str):
        with open(trace) as f:
            trace = json.load(f)
    return [e for e in trace.get("traceEvents", []) if e.get("ph") == "X" and isinstance(e.get("args"), dict)
            and str(e["args"].get("device", "")).startswith("tpu:")]


def plot_trace(trace: dict | str, png_path: str, *, title: Optional[str] = None,
               cpu_threads: Optional[Iterable[int]] = None, max_label: int = 28) -> None:
    """Draws an exported Chrome trace as a timeline PNG (matplotlib): one row per CPU thread that
    ran profiled ops (top-level ops only) and one row per tpu device, the bars being the trace's
    own events at their recorded times."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if isinstance(trace, str):
        with open(trace) as f:
            trace = json.load(f)
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X" and "dur" in e]
    dev = trace_device_events(trace)
    cpu = [e for e in events if e.get("cat") == "cpu_op"]
    if cpu_threads is not None:
        wanted = set(cpu_threads)
        cpu = [e for e in cpu if e.get("tid") in wanted]
    # Top-level CPU ops: not inside another op of the same thread.
    top = []
    for tid in sorted({e["tid"] for e in cpu}, key=str):
        end = -1.0
        for e in sorted((e for e in cpu if e["tid"] == tid), key=lambda e: (e["ts"], -e["dur"])):
            if e["ts"] >= end:
                top.append(e)
                end = e["ts"] + e["dur"]
    rows = [("CPU thread %s" % tid, [e for e in top if e["tid"] == tid]) for tid in sorted({e["tid"] for e in top}, key=str)]
    for d in sorted({e["args"]["device"] for e in dev}):
        rows.append((d + " queue", [e for e in dev if e["args"]["device"] == d]))
    if not rows:
        raise ValueError("the trace has no CPU ops and no tpu device events")
    t0 = min(e["ts"] for _, es in rows for e in es)
    fig, ax = plt.subplots(figsize=(14, 1.2 + 0.9 * len(rows)))
    palette = plt.get_cmap("tab20")
    names = sorted({e["name"] for _, es in rows for e in es})
    color = {n: palette(i % 20) for i, n in enumerate(names)}
    for y, (label, es) in enumerate(rows):
        for e in es:
            x, w = (e["ts"] - t0) / 1000.0, e["dur"] / 1000.0
            ax.broken_barh([(x, w)], (y - 0.4, 0.8), facecolors=color[e["name"]], edgecolor="black", linewidth=0.3)
        ax.text(-0.01, y, label, transform=ax.get_yaxis_transform(), ha="right", va="center", fontsize=9)
    total = max((e["ts"] + e["dur"] - t0) / 1000.0 for _, es in rows for e in es)
    for y, (_, es) in enumerate(rows):
        for e in es:
            x, w = (e["ts"] - t0) / 1000.0, e["dur"] / 1000.0
            if w > 0.045 * total:
                ax.text(x + w / 2, y, e["name"][:max_label], ha="center", va="center", fontsize=7, clip_on=True)
    ax.set_yticks([])
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.invert_yaxis()
    ax.set_xlim(0, total * 1.01)
    ax.set_xlabel("time since the first event (ms)")
    busy = sum(e["dur"] for e in dev) / 1000.0
    ax.set_title(title or f"torch.profiler trace: {len(dev)} tpu device events, device busy {busy:.1f} ms")
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor=color[n]) for n in names[:20]]
    ax.legend(handles, [n[:max_label] for n in names[:20]], loc="upper left", bbox_to_anchor=(1.0, 1.0),
              fontsize=7, frameon=False)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
