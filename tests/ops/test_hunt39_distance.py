"""Distance ops' argument errors found in a bug hunt: they name the argument as the call spells
it (torch's ``dim``)."""

from __future__ import annotations

import numpy as np
import pytest

import pypto.ops as P
from pypto.errors import ParamError


@pytest.mark.parametrize("dim,match", [(5, r"'dim' must be in \[-2, 1\].*got 5"),
                                       (-3, r"'dim' must be in \[-2, 1\].*got -3"),
                                       (1.5, r"'dim' must be an int, got 1.5"),
                                       (True, r"'dim' must be an int, got True")])
def test_cosine_similarity_bad_dim_names_dim(dim, match):
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ParamError, match=match):
        P.cosine_similarity(x, x, dim=dim)


def test_cosine_similarity_dim_still_taken():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    for d in (0, 1, 2, -1, np.int64(-2)):
        na = np.sqrt((a * a).sum(axis=int(d)))
        nb = np.sqrt((b * b).sum(axis=int(d)))
        np.testing.assert_allclose(P.cosine_similarity(a, b, dim=d),
                                   (a * b).sum(axis=int(d)) / (na * nb), rtol=1e-12)
