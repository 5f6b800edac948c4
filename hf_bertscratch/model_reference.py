"""Where a model comes from: a local folder or a Hub id, told apart before anything loads.

The check is `hf_bertscratch_base.model_reference`'s (standard library only, so the `bertscratch` front door runs it
before torch loads); this module is its name inside the package.
"""

from __future__ import annotations

from hf_bertscratch_base.model_reference import check_model_reference, hub_offline, hub_unreachable

__all__ = ["check_model_reference", "hub_offline", "hub_unreachable"]
