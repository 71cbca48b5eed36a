"""WASH: averaging several independently watermarked LLMs washes their watermarks out.

The package is the engine; it knows nothing of any UI. Start at
``wash.ensemble.generate`` (the decoding loop) and ``wash.watermarks`` (the schemes).
"""

from wash.errors import WashInputError

__all__ = ["WashInputError"]
__version__ = "0.1.0"
