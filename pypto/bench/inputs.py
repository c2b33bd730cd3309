"""Input generation now lives in the shared low layer, :mod:`pypto.infra.inputs`; re-exported here."""

from ..infra.inputs import complete_dims, make_inputs, parse_shape

__all__ = ["complete_dims", "make_inputs", "parse_shape"]
