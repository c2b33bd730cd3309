"""Image ops: blurs, gradients, resampling and detection helpers.

Images are arrays whose last two axes are height and width (``[..., H, W]``). The leading axes
(batch, channels) are independent images; each op's public call accepts any number of them and
collapses them into one batch dim, so the kernels work on ``B H W`` arrays. Edges are replicated
(out-of-range coordinates are clamped to the nearest pixel) unless an op says otherwise.
"""

from __future__ import annotations

import math

import halide as hl
import numpy as np

from ..errors import ParamError, ShapeError
from ..runtime import as_array
from ._consts import lit, lit64
from ._args import int_arg, int_pair
from ._op import Param, op
from .indexing import trusted

_FLOATS = ["float32", "float64"]

#: Largest box size and Gaussian radius accepted (the kernels unroll the window taps).
MAX_BOX = 63
MAX_RADIUS = 64


# -- shared helpers -----------------------------------------------------------------------------

def _to_bhw(x, op_name: str, arg: str = "x"):
    """``x`` as a ``[B, H, W]`` array and the leading shape to restore."""
    x = as_array(x, op_name, arg)
    if x.ndim < 2:
        raise ShapeError(f"{op_name}: argument '{arg}' must have at least 2 dims [..., H, W], "
                         f"got shape {x.shape}")
    lead = x.shape[:-2]
    return x.reshape((math.prod(lead),) + x.shape[-2:]), lead


def _clamped(x, dims, name: str = "clamped"):
    """The image ``x`` ("B H W") extended beyond its edges by replicating them."""
    w, h, b = hl.Var("w"), hl.Var("h"), hl.Var("b")
    f = hl.Func(name)
    f[w, h, b] = x[hl.clamp(hl.likely(w), 0, dims.W - 1), hl.clamp(hl.likely(h), 0, dims.H - 1), b]
    return f


def _edge_pad(x: np.ndarray, r: int) -> np.ndarray:
    """NumPy: pad the last two axes by ``r`` replicated pixels."""
    pad = [(0, 0)] * (x.ndim - 2) + [(r, r), (r, r)]
    return np.pad(x, pad, mode="edge")


def _check_sizes(name, arg, value, low, high):
    return int_arg(name, arg, value, low, high)


# -- box_blur -----------------------------------------------------------------------------------

def _box_blur_ref(x, size=3):
    x = np.asarray(x)
    if size < 1 or size % 2 == 0:
        raise ParamError(f"box_blur: parameter 'size' must be an odd int >= 1, got {size!r}")
    r = size // 2
    H, W = x.shape[-2:]
    p = _edge_pad(x, r).astype(np.float64 if x.dtype.kind == "f" else np.int64)
    s = np.zeros(x.shape, p.dtype)
    for i in range(size):
        for j in range(size):
            s += p[..., i:i + H, j:j + W]
    if x.dtype == np.uint8:
        return np.round(s / float(size * size)).astype(np.uint8)
    return (s / (size * size)).astype(x.dtype)


def _box_blur_frontend(x, size=3):
    """Mean over a ``size`` x ``size`` window of the last two axes, edges replicated.

    ``size`` must be odd (1..63). Floats sum in their own precision and divide by ``size**2``.
    uint8 sums exactly in integers (S) and rounds the mean to the nearest integer:
    ``(S + n // 2) // n`` with ``n = size**2``; since ``n`` is odd the mean is never a tie, so
    this equals ``np.round(S / n)``.
    """
    x3, lead = _to_bhw(x, "box_blur")
    return box_blur.kernel(x3, size=size).reshape(lead + x3.shape[1:])


def _box_validate(dims, params):
    if params["size"] % 2 == 0:
        raise ParamError(f"box_blur: parameter 'size' must be odd, got {params['size']}")


@op(category="image", inputs={"x": "B H W"}, output="B H W",
    dtypes=["float32", "float64", "uint8"],
    params=[Param("size", int, 3, low=1, high=MAX_BOX, doc="odd window width and height")],
    reference=_box_blur_ref, frontend=_box_blur_frontend, validate=_box_validate,
    doc=_box_blur_frontend.__doc__,
    example={"B": 2, "H": 64, "W": 100})
def box_blur(x, *, size, dims):
    """Separable box blur: a horizontal window sum, then a vertical one, divided by size**2."""
    w, h, b = hl.Var("w"), hl.Var("h"), hl.Var("b")
    r = size // 2
    n = size * size
    t = x.type()
    if t.is_float():
        acc_t = t
    else:
        acc_t = hl.UInt(16) if 255 * n + n // 2 <= 0xFFFF else hl.UInt(32)
    c = _clamped(x, dims)
    hsum = hl.Func("hsum")
    hsum[w, h, b] = _taps([hl.cast(acc_t, c[w + i, h, b]) for i in range(-r, r + 1)])
    vsum = _taps([hsum[w, h + i, b] for i in range(-r, r + 1)])
    out = hl.Func("out")
    if t.is_float():
        # A product with 1/n, as Halide turns a division by a constant into anyway; written
        # out so the reciprocal is an exact float64 literal on every target (``_consts``).
        out[w, h, b] = vsum * lit(t, 1.0 / n)
    else:
        out[w, h, b] = hl.cast(t, (vsum + hl.cast(acc_t, n // 2)) / hl.cast(acc_t, n))
    return out


def _taps(terms):
    """Sum of expressions as a balanced tree (shorter dependency chains than a left fold)."""
    terms = list(terms)
    while len(terms) > 1:
        nxt = [terms[i] + terms[i + 1] for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms = nxt
    return terms[0]


# -- gaussian_blur ------------------------------------------------------------------------------

def _gauss_radius(sigma, radius, name="gaussian_blur"):
    if isinstance(sigma, bool) or not isinstance(sigma, (int, float, np.floating, np.integer)):
        raise ParamError(f"{name}: parameter 'sigma' expects a number, got {sigma!r}")
    if not (math.isfinite(sigma) and sigma > 0):
        raise ParamError(f"{name}: parameter 'sigma' must be finite and > 0, got {sigma!r}")
    if radius is None:
        radius = int(4.0 * float(sigma) + 0.5)
        if radius > MAX_RADIUS:
            raise ParamError(f"{name}: sigma={sigma!r} gives a default radius of {radius}, over "
                             f"the limit of {MAX_RADIUS}; give a smaller sigma or radius <= "
                             f"{MAX_RADIUS}")
        return radius
    return _check_sizes(name, "radius", radius, 0, MAX_RADIUS)


def _gauss_weights(sigma: float, radius: int) -> np.ndarray:
    i = np.arange(-radius, radius + 1, dtype=np.float64)
    w = np.exp(-0.5 * (i / float(sigma)) ** 2)
    return w / w.sum()


def _gaussian_blur_ref(x, sigma=1.0, radius=None):
    x = np.asarray(x)
    r = _gauss_radius(sigma, radius)
    H, W = x.shape[-2:]
    p = _edge_pad(x, r).astype(np.float64)
    i = np.arange(-r, r + 1, dtype=np.float64)
    k = np.exp(-(i * i) / (2.0 * float(sigma) ** 2))
    k /= k.sum()
    rows = sum(k[j] * p[..., :, j:j + W] for j in range(2 * r + 1))
    out = sum(k[j] * rows[..., j:j + H, :] for j in range(2 * r + 1))
    return out.astype(x.dtype)


def _gaussian_blur_frontend(x, sigma=1.0, radius=None):
    """Separable Gaussian blur of the last two axes, edges replicated.

    Weights are ``exp(-i**2 / (2 sigma**2))`` for ``i`` in ``[-radius, radius]``, normalized to
    sum 1 (computed in float64, then rounded to the array's dtype). ``radius`` defaults to
    ``int(4 * sigma + 0.5)`` (as ``scipy.ndimage.gaussian_filter`` with ``mode="nearest"``).
    """
    x3, lead = _to_bhw(x, "gaussian_blur")
    r = _gauss_radius(sigma, radius)
    return gaussian_blur.kernel(x3, sigma=float(sigma), radius=r).reshape(lead + x3.shape[1:])


def _gauss_validate(dims, params):
    _gauss_radius(params["sigma"], params["radius"])


@op(category="image", inputs={"x": "B H W"}, output="B H W", dtypes=_FLOATS,
    params=[Param("sigma", float, 1.0, doc="standard deviation in pixels (> 0)"),
            Param("radius", int, None, low=0, high=MAX_RADIUS,
                  doc="half window; default int(4 * sigma + 0.5)")],
    reference=_gaussian_blur_ref, frontend=_gaussian_blur_frontend, validate=_gauss_validate,
    doc=_gaussian_blur_frontend.__doc__,
    example={"B": 2, "H": 64, "W": 100})
def gaussian_blur(x, *, sigma, radius, dims):
    """Separable Gaussian blur: a horizontal weighted pass, then a vertical one."""
    w, h, b = hl.Var("w"), hl.Var("h"), hl.Var("b")
    r = _gauss_radius(sigma, radius)
    t = x.type()
    wt = [lit(t, v) for v in _gauss_weights(sigma, r)]
    c = _clamped(x, dims)
    hblur = hl.Func("hblur")
    hblur[w, h, b] = _taps([wt[i + r] * c[w + i, h, b] for i in range(-r, r + 1)])
    out = hl.Func("out")
    out[w, h, b] = _taps([wt[i + r] * hblur[w, h + i, b] for i in range(-r, r + 1)])
    return out


# -- sobel --------------------------------------------------------------------------------------

def _sobel_ref(x):
    x = np.asarray(x)
    H, W = x.shape[-2:]
    p = _edge_pad(x, 1).astype(np.float64)
    kx = np.array([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]], np.float64)
    gx = np.zeros(x.shape, np.float64)
    gy = np.zeros(x.shape, np.float64)
    for i in range(3):
        for j in range(3):
            win = p[..., i:i + H, j:j + W]
            if kx[i, j]:
                gx += kx[i, j] * win
            if kx[j, i]:
                gy += kx[j, i] * win
    return np.sqrt(gx * gx + gy * gy).astype(x.dtype)


def _sobel_frontend(x):
    """Gradient magnitude ``sqrt(gx**2 + gy**2)`` of the last two axes, edges replicated.

    ``gx`` and ``gy`` are the 3x3 Sobel derivatives along width and height
    (``[[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]]`` and its transpose). Taps of weight 0 are not read,
    so a NaN or infinity there does not reach the result.
    """
    x3, lead = _to_bhw(x, "sobel")
    return sobel.kernel(x3).reshape(lead + x3.shape[1:])


@op(category="image", inputs={"x": "B H W"}, output="B H W", dtypes=_FLOATS,
    reference=_sobel_ref, frontend=_sobel_frontend, doc=_sobel_frontend.__doc__,
    example={"B": 2, "H": 64, "W": 100})
def sobel(x, *, dims):
    """Sobel gradient magnitude, computed with separable row passes."""
    w, h, b = hl.Var("w"), hl.Var("h"), hl.Var("b")
    c = _clamped(x, dims)
    hdiff = hl.Func("hdiff")      # d/dw along the row
    hdiff[w, h, b] = c[w + 1, h, b] - c[w - 1, h, b]
    hsmooth = hl.Func("hsmooth")  # [1, 2, 1] along the row
    hsmooth[w, h, b] = c[w - 1, h, b] + 2 * c[w, h, b] + c[w + 1, h, b]
    gx = hdiff[w, h - 1, b] + 2 * hdiff[w, h, b] + hdiff[w, h + 1, b]
    gy = hsmooth[w, h + 1, b] - hsmooth[w, h - 1, b]
    out = hl.Func("out")
    out[w, h, b] = hl.sqrt(gx * gx + gy * gy)
    return out


# -- resize_bilinear ----------------------------------------------------------------------------

def _src_coords(n_in: int, n_out: int, align_corners: bool) -> np.ndarray:
    """NumPy: the source coordinate of each output pixel along one axis (float64)."""
    d = np.arange(n_out, dtype=np.float64)
    if align_corners:
        return d * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros(n_out)
    return np.maximum((d + 0.5) * (n_in / n_out) - 0.5, 0.0)


def _resize_bilinear_ref(x, height, width, align_corners=False):
    x = np.asarray(x)
    H, W = x.shape[-2:]

    def taps(n_in, n_out):
        s = _src_coords(n_in, n_out, align_corners)
        i0 = np.floor(s).astype(np.int64)
        i1 = np.minimum(i0 + 1, n_in - 1)
        lam = np.where(i0 < n_in - 1, s - i0, 0.0)
        return i0, i1, lam

    y0, y1, ly = taps(H, height)
    x0, x1, lx = taps(W, width)
    xd = x.astype(np.float64)
    top = xd[..., y0, :][..., x0] * (1 - lx) + xd[..., y0, :][..., x1] * lx
    bot = xd[..., y1, :][..., x0] * (1 - lx) + xd[..., y1, :][..., x1] * lx
    out = top * (1 - ly)[:, None] + bot * ly[:, None]
    return out.astype(x.dtype)


def _resize_frontend(x, height, width, align_corners=False):
    """Bilinear resize of the last two axes to ``height`` x ``width``, like
    ``torch.nn.functional.interpolate(mode="bilinear")``.

    With ``align_corners=False`` pixel centers are at half-integers: output pixel ``d`` samples
    source coordinate ``max((d + 0.5) * in / out - 0.5, 0)``; with ``True`` the corner pixels of
    input and output coincide (``d * (in - 1) / (out - 1)``). Coordinates past the last pixel
    use it (edges replicated). Source coordinates are computed in float64, the interpolation in
    the array's precision.
    """
    x3, lead = _to_bhw(x, "resize_bilinear")
    out = resize_bilinear.kernel(x3, height=height, width=width, align_corners=align_corners)
    return out.reshape(lead + out.shape[1:])


def _resize_derive(dims, params):
    return {"OH": params["height"], "OW": params["width"]}


@op(category="image", inputs={"x": "B H W"}, output="B OH OW", dtypes=_FLOATS,
    params=[Param("height", int, low=1, high=1 << 20, doc="output height"),
            Param("width", int, low=1, high=1 << 20, doc="output width"),
            Param("align_corners", bool, False, doc="corner pixels of input and output coincide")],
    reference=_resize_bilinear_ref, frontend=_resize_frontend, derive=_resize_derive,
    doc=_resize_frontend.__doc__,
    example={"B": 2, "H": 40, "W": 50})
def resize_bilinear(x, *, height, width, align_corners, dims):
    """Bilinear interpolation at torch-style source coordinates."""
    ow, oh, b = hl.Var("ow"), hl.Var("oh"), hl.Var("b")
    t = x.type()

    f64 = hl.Float(64)

    def axis(d, n_in, n_out, name):
        """Funcs of the lower source index and the upper weight along one axis.

        Coordinates are computed in float64 (exact enough for any size), the weight is then
        rounded to the array's precision.
        """
        df, nf = hl.cast(f64, d), hl.cast(f64, n_in)
        if align_corners:
            s = df * ((nf - 1) / lit64(n_out - 1)) if n_out > 1 else lit64(0.0)
        else:
            s = hl.max((df + 0.5) * (nf / lit64(n_out)) - 0.5, lit64(0.0))
        # Strict: the index and the weight must see the same coordinate, rounded as written.
        s = hl.strict_float(s)
        i0 = hl.clamp(hl.cast(hl.Int(32), s), 0, n_in - 1)
        lo = hl.Func(name + "lo")
        lo[d] = i0
        wt = hl.Func(name + "wt")
        wt[d] = hl.cast(t, hl.select(i0 < n_in - 1, s - hl.cast(f64, i0), lit64(0.0)))
        return lo, wt

    ylo, ywt = axis(oh, dims.H, height, "y")
    xlo, xwt = axis(ow, dims.W, width, "x")
    y0, x0, ly, lx = ylo[oh], xlo[ow], ywt[oh], xwt[ow]
    y1, x1 = hl.min(y0 + 1, dims.H - 1), hl.min(x0 + 1, dims.W - 1)
    one = hl.cast(t, 1)
    # Along the rows first, then across them: ``rows`` is an input row interpolated at the
    # output columns, which the schedule can compute once for the output rows that read it.
    y = hl.Var("y")
    rows = hl.Func("rows")
    rows[ow, y, b] = (one - lx) * x[x0, y, b] + lx * x[x1, y, b]
    out = hl.Func("out")
    out[ow, oh, b] = (one - ly) * rows[ow, y0, b] + ly * rows[ow, y1, b]
    return out


# -- roi_align ----------------------------------------------------------------------------------

def _pair(value, name, arg):
    return int_pair(name, arg, value, 1, 1 << 16)


def _roi_boxes(boxes, name="roi_align"):
    """Boxes as a [K, 5] array: a [K, 5] array, or a list of [L_i, 4] arrays (one per image)."""
    if isinstance(boxes, (list, tuple)) and boxes and all(
            isinstance(b, np.ndarray) and b.ndim == 2 for b in boxes):
        rows = []
        for i, b in enumerate(boxes):
            if b.shape[1] != 4:
                raise ShapeError(f"{name}: boxes[{i}] must be [L, 4] (x1, y1, x2, y2), got shape "
                                 f"{b.shape}")
            rows.append(np.concatenate([np.full((b.shape[0], 1), i, b.dtype), b], axis=1))
        return np.concatenate(rows, axis=0)
    return as_array(boxes, name, "boxes")


def _check_batch_index(name: str, x, boxes) -> None:
    """Each box's first column must name an image of ``x`` (a whole number in [0, N - 1]): the
    kernel would clamp it and pool the wrong image without a word. Boxes a traced program is
    given are checked on each of its calls."""
    if not (boxes.ndim == 2 and boxes.shape[1] == 5 and x.ndim == 4 and boxes.shape[0] > 0
            and boxes.dtype.kind in "fiu"):
        return
    n = x.shape[0]
    if not isinstance(boxes, np.ndarray):
        require = getattr(boxes, "require_values", None)
        if require is not None and not trusted():
            require(lambda b: _batch_indices(name, b, n))
        return
    _batch_indices(name, boxes, n)


def _batch_indices(name: str, boxes: np.ndarray, n: int) -> None:
    bi = boxes[:, 0]
    bad = (bi != np.floor(bi)) | (bi < 0) | (bi >= n)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ParamError(f"{name}: boxes[{k}, 0] = {float(bi[k])!r} is not a batch index in "
                         f"[0, {n - 1}]")


#: The largest adaptive grid (samples per bin and axis) roi_align takes.
MAX_ROI_GRID = 1 << 12


def _roi_align_ref(x, boxes, output_size, spatial_scale=1.0, sampling_ratio=-1, aligned=False):
    x = np.asarray(x)
    boxes = np.asarray(_roi_boxes(boxes))
    ph_n, pw_n = _pair(output_size, "roi_align", "output_size")
    N, C, H, W = x.shape
    K = boxes.shape[0]
    out = np.zeros((K, C, ph_n, pw_n), np.float64)
    off = 0.5 if aligned else 0.0
    xd = x.astype(np.float64)

    def sample(img, y, xx):
        if y < -1.0 or y > H or xx < -1.0 or xx > W:
            return np.zeros(C)
        y, xx = max(y, 0.0), max(xx, 0.0)
        y0, x0 = int(y), int(xx)
        if y0 >= H - 1:
            y0 = y1 = H - 1
            y = float(y0)
        else:
            y1 = y0 + 1
        if x0 >= W - 1:
            x0 = x1 = W - 1
            xx = float(x0)
        else:
            x1 = x0 + 1
        ly, lx = y - y0, xx - x0
        hy, hx = 1 - ly, 1 - lx
        return (hy * hx * img[:, y0, x0] + hy * lx * img[:, y0, x1]
                + ly * hx * img[:, y1, x0] + ly * lx * img[:, y1, x1])

    for k in range(K):
        img = xd[min(max(int(boxes[k, 0]), 0), N - 1)]  # the kernel clamps it the same way
        x1, y1, x2, y2 = (float(v) * spatial_scale - off for v in boxes[k, 1:])
        rw, rh = x2 - x1, y2 - y1
        if not aligned:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / ph_n, rw / pw_n
        # torchvision's adaptive grid: ceil(side / bins) samples per bin and axis, computed in
        # the input's precision (its kernel divides in the scalar type).
        t = x.dtype.type
        gh = sampling_ratio if sampling_ratio > 0 else max(int(np.ceil(t(rh) / t(ph_n))), 0)
        gw = sampling_ratio if sampling_ratio > 0 else max(int(np.ceil(t(rw) / t(pw_n))), 0)
        for i in range(ph_n):
            for j in range(pw_n):
                acc = np.zeros(C)
                for iy in range(gh):
                    y = y1 + i * bh + (iy + 0.5) * bh / gh
                    for ix in range(gw):
                        acc += sample(img, y, x1 + j * bw + (ix + 0.5) * bw / gw)
                out[k, :, i, j] = acc / max(gh * gw, 1)
    return out.astype(x.dtype)


def _roi_kernel_ref(x, boxes, pooled_height, pooled_width, spatial_scale=1.0, sampling_ratio=2,
                    aligned=False, max_grid=1):
    # max_grid only bounds the kernel's loops; the boxes' own grids are the same below it.
    return _roi_align_ref(x, boxes, (pooled_height, pooled_width), spatial_scale,
                          sampling_ratio if sampling_ratio > 0 else -1, aligned)


def _adaptive_grid_bound(boxes, oh, ow, spatial_scale, aligned) -> int:
    """A bound on torchvision's adaptive grid (``ceil(side / bins)`` per box and axis) over
    ``boxes``: the next power of two above the largest one plus one (a margin for the last
    bit of the kernel's arithmetic; powers of two keep the compiled variants few)."""
    b = np.asarray(boxes, np.float64)
    if b.ndim != 2 or b.shape[0] == 0 or b.shape[1] != 5:
        return 1                           # the kernel's checks say what is wrong with them
    off = 0.5 if aligned else 0.0
    c = b[:, 1:] * spatial_scale - off
    rw, rh = c[:, 2] - c[:, 0], c[:, 3] - c[:, 1]
    if not aligned:
        rw, rh = np.maximum(rw, 1.0), np.maximum(rh, 1.0)
    most = max(float(np.max(rh)) / oh, float(np.max(rw)) / ow, 0.0)
    if not math.isfinite(most) or most > MAX_ROI_GRID - 1:
        raise ParamError(f"roi_align: adaptive sampling (sampling_ratio <= 0) would take "
                         f"{most:.0f} samples per bin and axis for the largest box; give a "
                         f"sampling_ratio in [1, 64], or boxes within the image")
    return 1 << int(math.ceil(most)).bit_length()     # the power of two >= ceil(most) + 1


def _roi_align_frontend(x, boxes, output_size, spatial_scale=1.0, sampling_ratio=-1,
                        aligned=False):
    """Average of bilinear samples over each box's bins, like ``torchvision.ops.roi_align``.

    ``x`` is ``[N, C, H, W]``; ``boxes`` is ``[K, 5]`` rows ``(batch_index, x1, y1, x2, y2)`` in
    input coordinates (or a list of ``[L_i, 4]`` arrays, one per image). The result is
    ``[K, C, oh, ow]`` for ``output_size = (oh, ow)`` (or an int for both). Box corners are
    multiplied by ``spatial_scale`` (and shifted by -0.5 when ``aligned``); each bin averages a
    ``sampling_ratio`` x ``sampling_ratio`` grid of samples; with ``sampling_ratio <= 0`` (the
    default, as torchvision's) each box's bins take ``ceil(box height / oh)`` x ``ceil(box
    width / ow)`` samples. Samples more than one pixel outside the image count as 0.
    """
    name = "roi_align"
    x = as_array(x, name, "x")
    boxes = _roi_boxes(boxes, name)
    oh, ow = _pair(output_size, name, "output_size")
    _check_batch_index(name, x, boxes)
    if boxes.ndim == 2 and boxes.dtype != x.dtype and boxes.dtype.kind in "fiu" \
            and x.dtype.name in _FLOATS:
        boxes = boxes.astype(x.dtype)
    if isinstance(sampling_ratio, bool) or not isinstance(sampling_ratio, (int, np.integer)):
        raise ParamError(f"roi_align: parameter 'sampling_ratio' must be an int, got "
                         f"{sampling_ratio!r}")
    grid = {}
    if sampling_ratio <= 0:
        sampling_ratio = 0
        if isinstance(boxes, np.ndarray):
            scale = float(spatial_scale)
            grid["max_grid"] = _adaptive_grid_bound(boxes, oh, ow, scale, bool(aligned))
        else:                              # a traced Tensor: its sides are not known here
            raise ParamError("roi_align: adaptive sampling (sampling_ratio <= 0) reads the "
                             "boxes' sizes; inside a program give a sampling_ratio >= 1")
    return roi_align.kernel(x, boxes, pooled_height=oh, pooled_width=ow,
                            spatial_scale=spatial_scale, sampling_ratio=int(sampling_ratio),
                            aligned=aligned, **grid)


def _roi_validate(dims, params):
    if dims["F"] != 5:
        raise ShapeError(f"roi_align: argument 'boxes' must be [K, 5] rows (batch_index, x1, y1, "
                         f"x2, y2), got {dims['F']} columns")


def _roi_derive(dims, params):
    return {"OH": params["pooled_height"], "OW": params["pooled_width"]}


def _roi_inputs(dims, dtypes, params, rng):
    """A feature map and boxes as a detector's proposals look: inside the image (the map's
    extent divided by ``spatial_scale``), sides log-uniform from 2 map pixels to 90% of the map,
    each on a random image of the batch."""
    n, c, h, w, k = (dims[d] for d in ("N", "C", "H", "W", "K"))
    x = rng.uniform(-1, 1, (n, c, h, w)).astype(dtypes[0])
    if dims["F"] != 5:   # the op rejects it; inputs of the declared shape let it say so
        return [x, rng.uniform(0, 1, (k, dims["F"])).astype(dtypes[1])]
    scale = params.get("spatial_scale") or 1.0
    boxes = np.empty((k, 5))
    boxes[:, 0] = rng.integers(0, n, k)
    for col, extent in ((1, w / scale), (2, h / scale)):
        lo = min(2.0 / scale, 0.5 * extent)
        side = np.exp(rng.uniform(np.log(lo), np.log(0.9 * extent), k))
        boxes[:, col] = rng.uniform(0, 1, k) * (extent - side)
        boxes[:, col + 2] = boxes[:, col] + side
    return [x, boxes.astype(dtypes[1])]


@op(category="image", inputs={"x": "N C H W", "boxes": "K F"}, output="K C OH OW",
    dtypes=_FLOATS,
    params=[Param("pooled_height", int, low=1, high=1 << 16, doc="output bins along height"),
            Param("pooled_width", int, low=1, high=1 << 16, doc="output bins along width"),
            Param("spatial_scale", float, 1.0, low=0.0, doc="box coordinate scale"),
            Param("sampling_ratio", int, 2, low=0, high=64,
                  doc="samples per bin and axis; 0: ceil(box side / bins) per box (adaptive)"),
            Param("aligned", bool, False, doc="shift box corners by -0.5 pixel"),
            Param("max_grid", int, 1, low=1, high=MAX_ROI_GRID,
                  doc="adaptive only: a bound on every box's samples per bin and axis")],
    reference=_roi_align_ref, kernel_reference=_roi_kernel_ref, frontend=_roi_align_frontend,
    doc=_roi_align_frontend.__doc__,
    validate=_roi_validate, derive=_roi_derive, make_inputs=_roi_inputs,
    example={"N": 2, "C": 8, "H": 32, "W": 40, "K": 6, "F": 5})
def roi_align(x, boxes, *, pooled_height, pooled_width, spatial_scale, sampling_ratio, aligned,
              max_grid, dims):
    """RoIAlign: per box and bin, the mean of a regular grid of bilinear samples."""
    ow, oh, c, k = hl.Var("ow"), hl.Var("oh"), hl.Var("c"), hl.Var("k")
    t = x.type()
    H, W = dims.H, dims.W
    g = sampling_ratio
    zero, one = hl.cast(t, 0), hl.cast(t, 1)
    off = hl.cast(t, 0.5 if aligned else 0.0)
    scale = lit(t, spatial_scale)
    n = hl.clamp(hl.cast(hl.Int(32), boxes[0, k]), 0, dims.N - 1)
    x1 = boxes[1, k] * scale - off
    y1 = boxes[2, k] * scale - off
    rw = boxes[3, k] * scale - off - x1
    rh = boxes[4, k] * scale - off - y1
    if not aligned:
        rw, rh = hl.max(rw, one), hl.max(rh, one)
    # Divisions by constants are written as products with exact reciprocals (``_consts``).
    bw = rw * lit(t, 1.0 / pooled_width)
    bh = rh * lit(t, 1.0 / pooled_height)
    if g > 0:
        gy = gx = g
        s = hl.RDom([hl.Range(0, g), hl.Range(0, g)], "s")
    else:
        # torchvision's adaptive grid, per box: ceil(side / bins), the side divided as its
        # kernel divides (strict: no reciprocal product). The loops run to max_grid (a bound
        # the frontend takes from the boxes), trimmed by the predicate.
        def grid(side, bins):
            return hl.clamp(hl.cast(hl.Int(32), hl.ceil(hl.strict_float(
                side / hl.cast(t, bins)))), 0, max_grid)

        gy_f, gx_f = hl.Func("grid_rows"), hl.Func("grid_cols")
        gy_f[k] = grid(rh, pooled_height)
        gx_f[k] = grid(rw, pooled_width)
        gy, gx = gy_f[k], gx_f[k]
        s = hl.RDom([hl.Range(0, max_grid), hl.Range(0, max_grid)], "s")
        s.where((s.y < gy) & (s.x < gx))
    # A sample's row (its two source rows and weight) depends on (bin row, sample row, box) and
    # its column on (bin column, sample column, box), not on the channel: as Funcs a schedule
    # computes them once per box instead of once per channel.
    i = hl.Var("i")

    def axis(lo, size, bins, extent, name, per_box):
        f = hl.Func(name)
        step = size * lit(t, 1.0 / g) if g > 0 else size / hl.cast(t, hl.max(per_box, 1))
        p = lo + hl.cast(t, bins) * size + hl.cast(t, i + hl.f32(0.5)) * step
        pc = hl.max(p, zero)
        low = hl.clamp(hl.cast(hl.Int(32), hl.min(pc, hl.cast(t, extent))), 0, extent - 1)
        f[i, bins, k] = (low, hl.select(low >= extent - 1, zero, pc - hl.cast(t, low)),
                         (p >= -one) & (p <= hl.cast(t, extent)))
        return f

    ysmp = axis(y1, bh, oh, H, "sample_rows", gy)
    xsmp = axis(x1, bw, ow, W, "sample_cols", gx)
    yl, ly, y_in = (ysmp[s.y, oh, k][j] for j in range(3))
    xl, lx, x_in = (xsmp[s.x, ow, k][j] for j in range(3))
    inside = y_in & x_in
    yh = hl.min(yl + 1, H - 1)
    xh = hl.min(xl + 1, W - 1)
    hy, hx = one - ly, one - lx
    val = (hy * hx * x[xl, yl, c, n] + hy * lx * x[xh, yl, c, n]
           + ly * hx * x[xl, yh, c, n] + ly * lx * x[xh, yh, c, n])
    acc = hl.Func("acc")
    acc[ow, oh, c, k] = zero
    acc[ow, oh, c, k] += hl.select(inside, val, zero)
    out = hl.Func("out")
    if g > 0:
        out[ow, oh, c, k] = acc[ow, oh, c, k] * lit(t, 1.0 / (g * g))
    else:
        out[ow, oh, c, k] = acc[ow, oh, c, k] / hl.cast(t, hl.max(gy * gx, 1))
    return out


# -- anchor_boxes -------------------------------------------------------------------------------

def _anchor_args(feat_h, feat_w, stride, sizes, ratios, dtype, name="anchor_boxes"):
    fh = _check_sizes(name, "feat_h", feat_h, 1, 1 << 16)
    fw = _check_sizes(name, "feat_w", feat_w, 1, 1 << 16)
    st = tuple(stride) if isinstance(stride, (tuple, list)) else (stride, stride)
    if len(st) != 2:
        raise ParamError(f"{name}: parameter 'stride' must be a number or a pair (h, w), "
                         f"got {stride!r}")
    for v in st:
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                or not (math.isfinite(v) and v > 0):
            raise ParamError(f"{name}: parameter 'stride' must be finite and > 0, got {stride!r}")
    if dtype not in _FLOATS:
        raise ParamError(f"{name}: parameter 'dtype' must be one of {_FLOATS}, got {dtype!r}")
    vals = {}
    for arg, v in (("sizes", sizes), ("ratios", ratios)):
        a = np.asarray(v, dtype=np.float64).ravel() if not isinstance(v, str) else np.zeros(0)
        if a.size == 0 or not np.all(np.isfinite(a)) or np.any(a <= 0):
            raise ParamError(f"{name}: parameter '{arg}' must be a non-empty sequence of "
                             f"positive numbers, got {v!r}")
        vals[arg] = a
    return fh, fw, float(st[0]), float(st[1]), vals["sizes"], vals["ratios"]


def _anchor_ref(feat_h, feat_w, stride, sizes, ratios, dtype="float32"):
    fh, fw, sh, sw, sizes, ratios = _anchor_args(feat_h, feat_w, stride, sizes, ratios, dtype)
    dt = np.dtype(dtype).type
    rows = []
    for y in range(fh):
        for x in range(fw):
            for r in ratios:
                hr = np.sqrt(dt(r))
                wr = dt(1) / hr
                for s in sizes:
                    half_w = wr * dt(s) / dt(2)
                    half_h = hr * dt(s) / dt(2)
                    dx, dy = dt(x * sw), dt(y * sh)
                    rows.append([np.round(-half_w) + dx, np.round(-half_h) + dy,
                                 np.round(half_w) + dx, np.round(half_h) + dy])
    return np.asarray(rows, dtype=dtype).reshape(-1, 4)


def _anchor_frontend(feat_h, feat_w, stride, sizes, ratios, dtype="float32"):
    """Anchor boxes of a feature map, like torchvision's ``AnchorGenerator``.

    For each ratio ``r`` (height / width) and size ``s`` the centered base anchor is
    ``round([-w, -h, w, h] / 2)`` with ``h = s * sqrt(r)``, ``w = s / sqrt(r)`` (computed in
    ``dtype``, rounded half to even). Anchors are shifted to every feature-map cell
    ``(x * stride_w, y * stride_h)``. Returns ``[feat_h * feat_w * A, 4]`` boxes (x1, y1, x2, y2),
    ordered by row, then column, then ratio, then size (``A = len(ratios) * len(sizes)``).
    ``stride`` is a number or a pair ``(stride_h, stride_w)``.

    The base anchors (``[A, 4]``) are built with NumPy; the kernel adds the grid offsets.
    """
    fh, fw, sh, sw, sizes, ratios = _anchor_args(feat_h, feat_w, stride, sizes, ratios, dtype)
    dt = np.dtype(dtype)
    scales = sizes.astype(dt)
    hr = np.sqrt(ratios.astype(dt))
    wr = (dt.type(1) / hr).astype(dt)
    ws = (wr[:, None] * scales[None, :]).ravel()
    hs = (hr[:, None] * scales[None, :]).ravel()
    base = np.round(np.stack([-ws, -hs, ws, hs], axis=1) / dt.type(2)).astype(dt)
    out = anchor_boxes.kernel(base, feat_h=fh, feat_w=fw, stride_h=sh, stride_w=sw)
    return out.reshape(-1, 4)


def _anchor_kernel_ref(base, feat_h, feat_w, stride_h, stride_w):
    base = np.asarray(base)
    ys = (np.arange(feat_h, dtype=np.float64) * stride_h).astype(base.dtype)
    xs = (np.arange(feat_w, dtype=np.float64) * stride_w).astype(base.dtype)
    shift = np.zeros((feat_h, feat_w, 1, 4), base.dtype)
    shift[..., 0] = shift[..., 2] = xs[None, :, None]
    shift[..., 1] = shift[..., 3] = ys[:, None, None]
    return shift + base[None, None]


def _anchor_validate(dims, params):
    if dims["E"] != 4:
        raise ShapeError(f"anchor_boxes: argument 'base' must be [A, 4] boxes (x1, y1, x2, y2), "
                         f"got {dims['E']} columns")


def _anchor_derive(dims, params):
    return {"FH": params["feat_h"], "FW": params["feat_w"]}


@op(category="image", inputs={"base": "A E"}, output="FH FW A E", dtypes=_FLOATS,
    params=[Param("feat_h", int, low=1, high=1 << 16, doc="feature map height"),
            Param("feat_w", int, low=1, high=1 << 16, doc="feature map width"),
            Param("stride_h", float, low=0.0, doc="pixels per feature row"),
            Param("stride_w", float, low=0.0, doc="pixels per feature column")],
    reference=_anchor_ref, kernel_reference=_anchor_kernel_ref, frontend=_anchor_frontend,
    doc=_anchor_frontend.__doc__,
    validate=_anchor_validate, derive=_anchor_derive, example={"A": 9, "E": 4})
def anchor_boxes(base, *, feat_h, feat_w, stride_h, stride_w):
    """Base anchors [A, 4] shifted to every cell of a feat_h x feat_w grid: [FH, FW, A, 4]."""
    e, a, fw, fh = hl.Var("e"), hl.Var("a"), hl.Var("fw"), hl.Var("fh")
    t = base.type()
    dx = hl.cast(t, hl.cast(hl.Float(64), fw) * lit64(stride_w))
    dy = hl.cast(t, hl.cast(hl.Float(64), fh) * lit64(stride_h))
    out = hl.Func("out")
    out[e, a, fw, fh] = base[e, a] + hl.select(e % 2 == 0, dx, dy)
    return out


# These frontends depend only on their arguments' dtypes, shapes and parameters, never on array
# values: a repeated call may skip them (runtime.call_public records what they did once).
for _fe in (_box_blur_frontend, _gaussian_blur_frontend, _sobel_frontend, _resize_frontend):
    _fe.shape_only = True
