"""Watermark schemes: one module per scheme, all registered by name here.

A provider names its scheme (``kgw``, ``aar``...) and gets an instance of the
registered class, built with its key, its token-space size and any
``name=value`` overrides of the scheme's published defaults. ``derive_seed`` is the
one seeding hash, exported for callers that derive keys of their own (an experiment's
check keys), so no second hash is written.
"""

from __future__ import annotations

import importlib

from wash.watermarks.base import Detection, Detector, WatermarkScheme
from wash.watermarks.hashing import derive_seed
from wash.watermarks.registry import (SCHEMES, build_scheme, default_forms, form_params, paper_schemes,
                                      published_schemes, rank, register, release_forms, scheme_class, scheme_names,
                                      stateful_schemes, title)

# Each module registers its class on import; the order here is the order users see.
_MODULES = (
    "none",
    # green-list family
    "kgw", "biased_kgw", "unigram", "waterbag", "dipmark",
    # sampling family
    "aar", "its_edit", "exp_edit", "synthid",
)
for _name in _MODULES:
    importlib.import_module(f"wash.watermarks.{_name}")

__all__ = ["Detection", "Detector", "WatermarkScheme", "SCHEMES", "register", "scheme_names",
           "scheme_class", "build_scheme", "title", "published_schemes", "stateful_schemes", "default_forms",
           "form_params", "release_forms", "paper_schemes", "rank", "derive_seed"]
