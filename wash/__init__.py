"""WASH: averaging several independently watermarked LLMs washes their watermarks out.

The package is the engine; it knows nothing of any UI. Its public API::

    import wash

    providers = ["smollm2:kgw:15485863", "gemma3:aar:42", "smollm2:dipmark:7"]
    result = wash.generate("The old lighthouse keeper", providers, max_new_tokens=48, seed=0)
    print(result.text)
    for d in wash.detect(result): print(d.provider, round(d.z, 2), d.detected)

* ``generate(prompt, providers, **settings)``: one text, as a ``RunResult``;
* ``stream(prompt, providers, **settings)``: the same run as events, token by token;
* ``detect(text_or_result, providers)``: each provider's own detector on a text;
* ``identify(providers, mode)``: is the system watermarked at all (Water-Probe, no key);
* ``Provider``: a base model served with a watermark scheme and a key;
* ``GenerationConfig``: every setting a text depends on;
* ``WashInputError``: bad input, one line, raised before any model loads.

They load on first use (``import wash`` alone imports no torch); ``wash.api`` holds
them with their full documentation.
"""

from wash.core.errors import WashInputError
from wash.core.version import __version__

__all__ = ["generate", "stream", "detect", "identify", "Provider", "GenerationConfig", "WashInputError"]

#: Public names served from ``wash.api`` on first use.
_API = {"generate", "stream", "detect", "identify", "Provider", "GenerationConfig"}


def __getattr__(name: str):
    if name in _API:
        from wash import api

        return getattr(api, name)
    raise AttributeError(f"module 'wash' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _API)
