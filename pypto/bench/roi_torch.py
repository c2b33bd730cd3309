"""RoIAlign in vectorized PyTorch eager: the torch peer of ``roi_align`` where torchvision is absent.

It follows the conventions of PyPTO's op, which are torchvision's (``torchvision.ops.roi_align``
with a fixed ``sampling_ratio``): box corners times ``spatial_scale`` (minus half a pixel when
``aligned``); without ``aligned`` a box is at least 1 x 1; each of the ``pooled_height`` x
``pooled_width`` bins averages a ``sampling_ratio`` x ``sampling_ratio`` grid of bilinear samples
placed at the sub-cell centres; a sample more than one pixel outside the map counts as 0, one
inside that margin is clamped to the edge.

The sample grid of a box is the product of its rows and its columns, so the interpolation
weights are computed per axis (with the outside-the-map test folded in as a zero weight). The
four corners of every sample are then gathered as rows of a channels-last copy of the feature
map (one ``index_select`` per corner), weighted and summed, and the samples of each bin
averaged. Boxes go in chunks so that the gathered samples stay a few tens of MiB.
"""

from __future__ import annotations


def _axis(start, size, bins: int, g: int, extent: int):
    """Per box, the low and high pixel of each sample along one axis and their weights."""
    import torch

    dt = start.dtype
    step = size / bins                                               # [K]
    j = torch.arange(bins * g)
    at = (j // g).to(dt) + ((j % g).to(dt) + 0.5) / g                # bins, in units of a bin
    pos = start[:, None] + at[None, :] * step[:, None]               # [K, bins * g]
    inside = ((pos >= -1.0) & (pos <= extent)).to(dt)
    pos = pos.clamp(min=0.0)
    lo = pos.long()
    edge = lo >= extent - 1
    lo = torch.where(edge, extent - 1, lo)
    hi = torch.where(edge, lo, lo + 1)
    frac = torch.where(edge, torch.zeros_like(pos), pos - lo.to(dt))
    return lo, hi, (1.0 - frac) * inside, frac * inside


def roi_align_torch(x, boxes, *, pooled_height: int, pooled_width: int, spatial_scale: float = 1.0,
                    sampling_ratio: int = 2, aligned: bool = False, chunk: int = 128):
    """``x`` [N, C, H, W] and ``boxes`` [K, 5] (batch index, x1, y1, x2, y2) -> [K, C, PH, PW]."""
    import torch

    n_img, c, h, w = x.shape
    k = boxes.shape[0]
    g = sampling_ratio
    feat = x.permute(0, 2, 3, 1).reshape(n_img * h * w, c)           # a row of channels per pixel
    img = boxes[:, 0].long().clamp(0, n_img - 1)
    corners = boxes[:, 1:] * spatial_scale - (0.5 if aligned else 0.0)
    x1, y1 = corners[:, 0], corners[:, 1]
    rw, rh = corners[:, 2] - x1, corners[:, 3] - y1
    if not aligned:
        rw, rh = rw.clamp(min=1.0), rh.clamp(min=1.0)
    ys = _axis(y1, rh, pooled_height, g, h)
    xs = _axis(x1, rw, pooled_width, g, w)
    base = img * (h * w)
    out = torch.empty((k, c, pooled_height, pooled_width), dtype=x.dtype)
    for s in range(0, k, chunk):
        e = min(s + chunk, k)
        acc = None
        for yi, wy in ((ys[0], ys[2]), (ys[1], ys[3])):
            for xi, wx in ((xs[0], xs[2]), (xs[1], xs[3])):
                idx = base[s:e, None, None] + yi[s:e, :, None] * w + xi[s:e, None, :]
                v = feat.index_select(0, idx.reshape(-1)).reshape(*idx.shape, c)
                wt = (wy[s:e, :, None] * wx[s:e, None, :])[..., None]
                acc = v * wt if acc is None else acc.addcmul_(v, wt)
        pooled = acc.reshape(e - s, pooled_height, g, pooled_width, g, c).mean(dim=(2, 4))
        out[s:e] = pooled.permute(0, 3, 1, 2)
    return out
