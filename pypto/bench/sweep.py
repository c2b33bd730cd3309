"""``pypto bench --all-ops``: every op at one representative shape against NumPy and torch eager.

A report, not a test: each op runs through :func:`pypto.bench.harness.run_item` (every candidate
verified against the op's reference, then timed with the fair protocol), with a shorter timing
than the suite's so that all ops fit in about half an hour on two cores. The shape of each op is
one a user meets: elementwise ops on about 4M elements, reductions and scans on 2048 x 2048,
nn ops at model-like sizes (:data:`SHAPES`, else a default by the op's dims). One op that
breaks is reported with its error and the sweep goes on. The closing summary lists the ops where
PyPTO trails NumPy or torch (ratio under :data:`TRAILING`) with the ratio, and every peer that was
left out because its output differed from the reference.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .harness import Item

#: Below this ratio (peer time over PyPTO time) PyPTO is said to trail the peer.
TRAILING = 0.97
PEERS = ("numpy", "torch")
ELEMENTS = 1 << 22

#: The sweep's timing (``run_item``'s ``timing``): a few rounds, a small budget per op, torch
#: with this process's OpenMP wait policy only (the child process of the suite is left out).
TIMING = {"pause_s": 0.15, "min_rounds": 3, "max_rounds": 5, "budget_s": 2.0, "max_block_ms": 100.0,
          "torch_policies": False}
QUICK = {"pause_s": 0.1, "min_rounds": 2, "max_rounds": 3, "budget_s": 1.0, "max_block_ms": 50.0,
         "torch_policies": False}
#: One round and no pause: every candidate is built and verified; the figures mean nothing.
CHECK = {"pause_s": 0.0, "min_rounds": 1, "max_rounds": 1, "budget_s": 0.0, "warmup": 0,
         "block_calls": 1, "min_block_ms": 0.0, "max_block_ms": 0.0, "torch_policies": False}

_SQ = {"R": 2048, "C": 2048}
_RED = {"O": 2048, "R": 2048}
_SCAN = {"O": 2048, "R": 2048, "I": 1}
_IMG = {"B": 1, "H": 2048, "W": 2048}
_NCHW = {"N": 8, "C": 64, "H": 56, "W": 56}
_POOL2 = {"kernel_h": 3, "kernel_w": 3, "stride_h": 2, "stride_w": 2, "pad_h": 1, "pad_w": 1}
_CONV = {"N": 1, "C": 64, "H": 56, "W": 56, "O": 64, "CG": 64, "KH": 3, "KW": 3}
_ATT = {"B": 1, "H": 8, "S": 512, "L": 512, "D": 64, "E": 64}
_CELL = {"B": 64, "IN": 512, "HID": 512, "HO": 512}
_SORT = {"O": 4096, "R": 1024, "I": 1}
_COLOR = {"B": 1, "C": 3, "N": 1 << 20}
_OAI = {"O": 2048, "A": 2048, "I": 1}
_Q = {"scale": 0.02, "zero_point": 3}

#: op -> (dims, params): the representative shape, where the default by dims does not fit.
SHAPES: dict[str, tuple[dict, dict]] = {
    # linalg
    "matmul": ({"M": 1024, "K": 1024, "N": 1024}, {}),
    "batch_matmul": ({"B": 8, "M": 256, "K": 256, "N": 256}, {}),
    "einsum": ({"B": 8, "M": 256, "K": 256, "N": 256}, {}),
    "baddbmm": ({"B": 8, "M": 256, "K": 256, "N": 256}, {}),
    "addmm": ({"M": 1024, "K": 1024, "N": 1024}, {}),
    "linear": ({"R": 1024, "I": 1024, "O": 1024}, {}),
    "outer": ({"M": 2048, "N": 2048}, {}),
    "trace": ({"B": 64, "R": 512, "C": 512}, {}),
    "transpose": (_SQ, {}),
    "batch_transpose": ({"B": 8, "R": 256, "C": 256, "E": 8}, {}),
    "quantized_matmul": ({"M": 512, "K": 512, "N": 512}, {}),
    # creation
    "arange": ({"K": 2}, {"n": ELEMENTS}),
    "diag": ({"N": 2048}, {}),
    "diagonal": ({"B": 16, "M": 512, "N": 512}, {}),
    "eye": ({"K": 1}, {"rows": 2048, "cols": 2048}),
    "tril": ({"B": 16, "M": 512, "N": 512}, {}),
    "triu": ({"B": 16, "M": 512, "N": 512}, {}),
    # nn
    "conv1d": ({"N": 8, "C": 128, "L": 1024, "O": 128, "CG": 128, "K": 3}, {"pad": 1}),
    "conv2d": (_CONV, {"pad_h": 1, "pad_w": 1}),
    "conv3d": ({"N": 1, "C": 32, "D": 16, "H": 28, "W": 28, "O": 32, "CG": 32, "KD": 3, "KH": 3,
                "KW": 3}, {"pad_d": 1, "pad_h": 1, "pad_w": 1}),
    "conv_transpose1d": ({"N": 8, "C": 128, "L": 512, "OG": 64, "O": 64, "K": 4},
                         {"stride": 2, "pad": 1}),
    "conv_transpose2d": ({"N": 1, "C": 64, "H": 28, "W": 28, "OG": 32, "O": 32, "KH": 4, "KW": 4},
                         {"stride_h": 2, "stride_w": 2, "pad_h": 1, "pad_w": 1}),
    "depthwise_conv2d": ({"N": 1, "C": 256, "H": 56, "W": 56, "M": 1, "KH": 3, "KW": 3},
                         {"pad_h": 1, "pad_w": 1}),
    "max_pool1d": ({"N": 8, "C": 64, "L": 4096}, {"kernel": 3, "stride": 2, "pad": 1}),
    "avg_pool1d": ({"N": 8, "C": 64, "L": 4096}, {"kernel": 3, "stride": 2, "pad": 1}),
    "max_pool2d": (_NCHW, _POOL2),
    "avg_pool2d": (_NCHW, _POOL2),
    "max_pool3d": ({"N": 1, "C": 32, "D": 16, "H": 56, "W": 56},
                   {"kernel_d": 3, "kernel_h": 3, "kernel_w": 3, "stride_d": 2, "stride_h": 2,
                    "stride_w": 2, "pad_d": 1, "pad_h": 1, "pad_w": 1}),
    "avg_pool3d": ({"N": 1, "C": 32, "D": 16, "H": 56, "W": 56},
                   {"kernel_d": 3, "kernel_h": 3, "kernel_w": 3, "stride_d": 2, "stride_h": 2,
                    "stride_w": 2, "pad_d": 1, "pad_h": 1, "pad_w": 1}),
    "adaptive_avg_pool2d": ({"N": 8, "C": 512, "H": 14, "W": 14}, {"out_h": 7, "out_w": 7}),
    "global_avg_pool2d": ({"P": 8 * 512, "S": 196}, {}),
    "softmax": ({"R": 4096, "C": 1024}, {}),
    "log_softmax": ({"R": 4096, "C": 1024}, {}),
    "softmin": ({"R": 4096, "C": 1024}, {}),
    "layer_norm": ({"R": 4096, "C": 1024}, {}),
    "rms_norm": ({"R": 4096, "C": 1024}, {}),
    "batch_norm": ({"N": 32, "C": 64, "S": 3136}, {}),
    "instance_norm": ({"N": 32, "C": 64, "S": 3136}, {}),
    "group_norm": ({"N": 32, "G": 8, "CG": 8, "S": 3136}, {}),
    "glu": ({"R": 4096, "S": 2, "C": 1024}, {}),
    "geglu": ({"R": 4096, "S": 2, "C": 1024}, {}),
    "scaled_dot_product_attention": (_ATT, {}),
    "masked_attention": ({**_ATT, "MB": 1, "MH": 1, "MS": 512, "ML": 512}, {}),
    "rotary_embedding": ({"B": 4, "H": 8, "S": 512, "T": 2, "E": 32}, {}),
    "lstm_cell": ({"B": 64, "IN": 512, "HID": 512, "G": 2048}, {}),
    "gru_cell": ({**_CELL, "T": 3}, {}),
    "rnn_cell": ({**_CELL, "T": 1}, {}),
    "grid_sample": ({"N": 4, "C": 32, "H": 64, "W": 64, "OH": 64, "OW": 64, "T": 2}, {}),
    "affine_grid": ({"N": 16, "R": 2, "K": 3}, {"height": 256, "width": 256}),
    "pixel_shuffle": ({"B": 4, "CI": 256, "H": 64, "W": 64}, {}),
    "pixel_unshuffle": ({"B": 4, "C": 64, "H": 128, "W": 128}, {}),
    "upsample_nearest": ({"B": 16, "H": 256, "W": 256}, {"height": 512, "width": 512,
                                                         "scale_h": 0.5, "scale_w": 0.5}),
    # losses with class targets
    "cross_entropy": ({"N": 4096, "C": 1000}, {}),
    "nll_loss": ({"N": 4096, "C": 1000}, {}),
    # scans, sorting, distance
    "argsort": (_SORT, {"width": 1024}),
    "sort": (_SORT, {"width": 1024}),
    "median": (_SORT, {"width": 1024}),
    "topk": (_SORT, {"k": 8}),
    "cummax": ({"O": 256, "R": 1024, "I": 1}, {}),      # a Python-loop reference: kept small
    "cummin": ({"O": 256, "R": 1024, "I": 1}, {}),
    "cdist": ({"B": 4, "P": 1024, "Q": 1024, "M": 64}, {}),
    "cosine_similarity": ({"O": 2048, "R": 2048, "I": 1}, {}),
    "pairwise_distance": (_SQ, {}),
    # layout and indexing
    "concat": ({"O": 2048, "A": 1024, "B": 1024}, {}),
    "stack": ({"O": 2048, "I": 2048}, {}),
    "pad": (_OAI, {"before": 8, "after": 8}),
    "repeat": ({"O": 2048, "A": 1024, "I": 1}, {"repeats": 2}),
    "tile": ({"O": 2048, "A": 1024, "I": 1}, {"reps": 2}),
    "roll": (_OAI, {"shift": 5}),
    "split": (_OAI, {"start": 512, "length": 1024}),
    "flip": (_OAI, {}),
    "gather": ({"O": 1024, "A": 1024, "I": 1, "J": 1024}, {}),
    "take_along_axis": ({"O": 1024, "A": 1024, "I": 1, "J": 1024}, {}),
    "scatter_add": ({"O": 1024, "A": 1024, "I": 1, "J": 1024}, {}),
    "index_select": ({"O": 1024, "A": 1024, "I": 1, "J": 1024}, {}),
    "embedding": ({"N": 8192, "V": 32000, "D": 512}, {}),
    "one_hot": ({"N": 1 << 16}, {"num_classes": 64}),
    "sequence_mask": ({"N": 4096}, {"max_len": 1024}),
    # image and detection
    "resize_bilinear": ({"B": 3, "H": 1024, "W": 1024}, {"height": 1536, "width": 1536}),
    "resize_bicubic": ({"B": 3, "H": 1024, "W": 1024}, {"height": 1536, "width": 1536}),
    "resize_nearest": ({"B": 3, "H": 1024, "W": 1024}, {"height": 1536, "width": 1536}),
    "bilateral_filter": ({"B": 1, "H": 512, "W": 512}, {}),
    "median_blur": ({"B": 1, "H": 1024, "W": 1024}, {}),
    "histogram": ({"N": ELEMENTS}, {"bins": 256}),
    "rgb_to_gray": (_COLOR, {}), "rgb_to_hsv": (_COLOR, {}), "hsv_to_rgb": (_COLOR, {}),
    "rgb_to_yuv": (_COLOR, {}), "yuv_to_rgb": (_COLOR, {}),
    "warp_affine": ({"N": 1, "C": 3, "H": 1024, "W": 1024, "R": 2, "K": 3},
                    {"height": 1024, "width": 1024}),
    "warp_perspective": ({"N": 1, "C": 3, "H": 1024, "W": 1024, "R": 3, "K": 3},
                         {"height": 1024, "width": 1024}),
    "anchor_boxes": ({"A": 9, "E": 4}, {"feat_h": 128, "feat_w": 128, "stride_h": 8.0,
                                        "stride_w": 8.0}),
    # a detector's second stage: 1,000 proposals of varied sizes on a stride-16 feature map
    "roi_align": ({"N": 1, "C": 256, "H": 50, "W": 68, "K": 1000, "F": 5},
                  {"pooled_height": 7, "pooled_width": 7, "spatial_scale": 1 / 16, "sampling_ratio": 2}),
    "roi_pool": ({"N": 1, "C": 256, "H": 50, "W": 68, "K": 1000, "F": 5},   # its inputs' boxes are
                 {"pooled_height": 7, "pooled_width": 7}),                  # in map coordinates
    "box_iou": ({"N": 1000, "M": 1000, "E": 4}, {}),
    "box_convert": ({"N": 1 << 20, "E": 4}, {}),
    "nms": ({"N": 1000, "E": 4}, {}),
    "batched_nms": ({"N": 1000, "E": 4}, {}),
    # quantization
    "quantize": ({"N": ELEMENTS}, _Q),
    "dequantize": ({"N": ELEMENTS}, _Q),
    "requantize": ({"N": ELEMENTS}, {"scale": 0.001, "zero_point": 3}),
    "fake_quantize_per_tensor_affine": ({"N": ELEMENTS}, {**_Q, "quant_min": -128, "quant_max": 127}),
    "fake_quantize_per_channel_affine": ({"B": 16, "C": 64, "N": 4096}, {"quant_min": -128, "quant_max": 127}),
    "quantized_add": ({"N": ELEMENTS}, {"a_scale": 0.02, "a_zero_point": 1, "b_scale": 0.03,
                                        "b_zero_point": -2, "scale": 0.05, "zero_point": 0}),
    "quantized_relu": ({"N": ELEMENTS}, {}),
    "quantized_conv2d": (_CONV, {"pad_h": 1, "pad_w": 1}),
    # elementwise ops whose required parameters need values
    "threshold": ({"N": ELEMENTS}, {"threshold": 0.1, "value": 0.0}),
    "clip": ({"N": ELEMENTS}, {"min": -0.5, "max": 0.5}),
}

#: Defaults by the op's input dims, for ops not in :data:`SHAPES`.
_BY_DIMS: dict[tuple[str, ...], dict] = {
    ("N",): {"N": ELEMENTS}, ("R", "C"): _SQ, ("O", "R"): _RED, ("O", "R", "I"): _SCAN,
    ("B", "H", "W"): _IMG,
}


def representative(op) -> tuple[dict[str, int], dict[str, Any]]:
    """(dims, params) of the op's representative shape; its example shape where none is known."""
    if op.name in SHAPES:
        dims, params = SHAPES[op.name]
        return dict(dims), dict(params)
    dims = _BY_DIMS.get(tuple(op.input_dims))
    if dims is not None:
        return dict(dims), {}
    return dict(op.example or {d: 8 for d in op.input_dims}), {}


def shape_text(dims: Mapping[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in dims.items())


def items(ops: Iterable[str] = (), *, small: bool = False) -> list[Item]:
    """One item per op (all registered ops, or ``ops``), at its representative shape, or with
    ``small`` at its example shape (the parameters stay: they must fit the op)."""
    from ..ops import get_op, list_ops

    # By default the built-in ops: a composite op registered in this process has no
    # representative shape here (name it to sweep it at its example shape).
    chosen = [get_op(n) for n in ops] if ops else [
        o for o in list_ops() if o.category != "test" and not hasattr(o, "specialize")]
    out = []
    for op in chosen:
        dims, params = representative(op)
        if small and op.example:
            dims = dict(op.example)
            params = {k: _SMALL.get(k, v) for k, v in params.items() if k in _SMALL_SAFE}
        out.append(Item(op=op.name, shape=shape_text(dims), params=params))
    return out


#: Parameters kept at the example shape (the others depend on the large shape, like a sort's width).
_SMALL_SAFE = frozenset({"threshold", "value", "min", "max", "scale", "zero_point", "quant_min",
                         "quant_max", "a_scale", "a_zero_point", "b_scale", "b_zero_point",
                         "pooled_height", "pooled_width", "sampling_ratio", "feat_h", "feat_w",
                         "stride_h", "stride_w", "height", "width", "kernel", "kernel_h",
                         "kernel_w", "kernel_d", "bins", "num_classes", "max_len", "k"})
_SMALL = {"height": 24, "width": 30, "max_len": 16}


# -- the run ------------------------------------------------------------------------------------

def run(chosen: Sequence[Item], *, compare: Iterable[str] = PEERS, timing: Mapping[str, Any] | None = None,
        log: Callable[[str], None] = lambda s: None,
        after_item: Callable[[dict], None] | None = None,
        run_item: Callable | None = None) -> dict[str, Any]:
    """Measures every item; returns a ``pypto bench`` report with a ``sweep`` section.

    ``sweep.failed`` holds the items that could not be measured at all (the error, the last
    frames of its traceback); ``sweep.trailing`` and ``sweep.mismatches`` are
    :func:`trailing` and :func:`mismatches` of the items. ``after_item`` sees the report after
    each item (to write it as it grows); ``run_item`` stands in for the harness's in tests.
    """
    from . import harness

    compare = set(compare)
    timing = dict(TIMING if timing is None else timing)
    measure = run_item or harness.run_item
    report = harness.new_report(compare, timing=timing)
    report["protocol"]["torch"] = ("measured with this process's OpenMP wait policy only (the "
                                   "sweep leaves out the child process with the other policy)")
    report["sweep"] = {"timing": timing, "trailing_below": TRAILING, "failed": [], "trailing": [],
                       "mismatches": []}
    for n, item in enumerate(chosen, 1):
        t0 = time.perf_counter()
        try:
            rec = measure(item, compare=compare, timing=timing)
        except Exception as e:  # one broken op is reported; the sweep goes on
            tb = traceback.format_exception(type(e), e, e.__traceback__)
            report["sweep"]["failed"].append({"op": item.op, "shape": item.shape,
                                              "error": f"{type(e).__name__}: {str(e)[:400]}",
                                              "where": "".join(tb[-3:])[-800:]})
            log(f"[{n}/{len(chosen)}] {item.op} {item.shape}: FAILED {type(e).__name__}: {str(e)[:200]}")
        else:
            report["items"].append(rec)
            log(f"[{n}/{len(chosen)}] {progress_line(rec)} ({time.perf_counter() - t0:.1f} s)")
        report["sweep"]["trailing"] = trailing(report)
        report["sweep"]["mismatches"] = mismatches(report)
        if after_item is not None:
            after_item(report)
    return report


def ratio(rec: Mapping[str, Any], peer: str) -> float | None:
    """Peer time over PyPTO time (above 1: PyPTO is faster), PyPTO in the peer's form."""
    res = rec["results"]
    if peer not in res:
        return None
    mine = "pypto-out" if res[peer].get("form") == "preallocated output" and "pypto-out" in res else "pypto"
    if mine not in res:
        return None
    return res[peer]["median_ms"] / res[mine]["median_ms"]


def trailing(report: Mapping[str, Any], below: float = TRAILING) -> list[dict[str, Any]]:
    """Every (op, peer) where PyPTO's single call is slower than the peer's by the margin."""
    out = []
    for rec in report["items"]:
        for peer in ("numpy", "torch", "torch-compile"):
            r = ratio(rec, peer)
            if r is not None and r < below:
                out.append({"op": rec["op"], "shape": rec["shape"], "peer": peer, "ratio": r,
                            "peer_label": rec["results"][peer]["label"]})
    return sorted(out, key=lambda t: t["ratio"])


def mismatches(report: Mapping[str, Any]) -> list[dict[str, str]]:
    """Every candidate left out because it failed or its output differed from the reference."""
    return [{"op": rec["op"], "candidate": name, "why": why}
            for rec in report["items"] for name, why in sorted(rec["errors"].items())]


# -- presentation -------------------------------------------------------------------------------

def _ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v is not None else "-"


def progress_line(rec: Mapping[str, Any]) -> str:
    res = rec["results"]
    parts = [f"{rec['op']} {rec['shape']}: pypto {_ms((res.get('pypto') or {}).get('median_ms'))} ms"]
    for peer in ("numpy", "torch"):
        if peer in res:
            parts.append(f"{peer} {_ms(res[peer]['median_ms'])} ms ({_x(ratio(rec, peer))})")
    if rec["errors"]:
        parts.append("not timed: " + ", ".join(sorted(rec["errors"])))
    return "; ".join(parts)


def table(report: Mapping[str, Any]) -> str:
    """One line per op: milliseconds (single call, median) and the ratios, peer over PyPTO."""
    head = f"{'op':<34}{'shape':<40}{'pypto':>9}{'numpy':>9}{'torch':>9}{'vs numpy':>10}{'vs torch':>10}"
    lines = [head, "-" * len(head)]
    for rec in report["items"]:
        res = rec["results"]

        def ms(name):
            return _ms((res.get(name) or {}).get("median_ms")) if name in res else (
                "x" if name in rec["errors"] else "-")
        np_label = (res.get("numpy") or {}).get("label", "")
        ref = "*" if np_label.startswith("numpy (reference)") else ""
        lines.append(f"{rec['op']:<34}{rec['shape'][:39]:<40}{ms('pypto'):>9}{ms('numpy') + ref:>9}"
                     f"{ms('torch'):>9}{_x(ratio(rec, 'numpy')):>10}{_x(ratio(rec, 'torch')):>10}")
    lines.append("")
    lines.append("ms: median single call; ratios: peer time / PyPTO time (above 1: PyPTO is faster); "
                 "* = NumPy peer is the op's reference (no fast NumPy form); x = not timed (see below)")
    return "\n".join(lines)


def summary(report: Mapping[str, Any]) -> str:
    """The closing note: ops that trail a peer, peers left out, ops that failed."""
    sw = report["sweep"]
    out = []
    trail = sw["trailing"]
    if trail:
        out.append(f"PyPTO trails a peer (ratio < {sw['trailing_below']}) in {len(trail)} case(s):")
        for t in trail:
            out.append(f"  {t['op']:<34} vs {t['peer']:<8} {t['ratio']:.2f}x  ({t['shape']})")
    else:
        out.append(f"PyPTO trails no peer by more than {(1 - sw['trailing_below']) * 100:.0f}%.")
    if sw["mismatches"]:
        out.append(f"Not timed ({len(sw['mismatches'])}): failed, or output differs from the reference:")
        for m in sw["mismatches"]:
            out.append(f"  {m['op']:<34} {m['candidate']:<8} {m['why'][:160]}")
    if sw["failed"]:
        out.append(f"Failed ops ({len(sw['failed'])}):")
        for f in sw["failed"]:
            out.append(f"  {f['op']:<34} {f['error'][:160]}")
    n_torch = sum(1 for rec in report["items"] if "torch" in rec["results"])
    out.append(f"{len(report['items'])} op(s) measured, {n_torch} against torch eager; "
               f"{len(sw['failed'])} failed.")
    return "\n".join(out)
