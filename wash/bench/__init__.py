"""``python -m wash bench``: speed and memory of the WASH loop, on the catalog's models (``models``)
or on dummy members at any shape and device (``shapes``), both timed the same way (``timing``).

The benches time the engine's own parts from inside (members, forwards side by side, the served
laws), so they import the engine's modules, not only its declared exports.
"""
