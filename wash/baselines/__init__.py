"""The paper's baselines: other watermark-removal attacks, as generation modes beside WASH.

The paper judges WASH against three attacks (its Tables 1, 2, 3 and 5):

* ``toblend`` (Huang et al. 2024, ``toblend.py``): the providers take turns, each
  writing a fixed block of tokens from its own watermarked distribution, the
  context re-encoded at every switch;
* ``demark`` (Chen et al. 2024, ``demark.py``): probe provider 1 to estimate its
  green list and bias, then generate from its distribution with them undone (only
  for green-list schemes);
* ``randomwalk`` (Liu et al. 2024, ``randomwalk.py``): provider 1 writes the text,
  then spans of it are rewritten by a weaker unwatermarked model and kept only when
  a quality check accepts them.

Each is a step strategy (``decode.Strategy``) that registers itself as a mode
(``wash.engine.modes.register``; ``--mode toblend``) when this package is imported,
and runs in the same loop as WASH (``decode.decode``):
``ensemble.generate_stream`` validates the config and loads the providers as for
every mode, the strategy's steps yield the same event stream (``events.py``), and
the ``FinishedEvent``'s ``RunResult`` carries the providers' real detectors on the
final text, so the app, the CLI and the experiments consume a baseline exactly as
they consume WASH. A baseline's parameters are the fields of its dataclass,
written ``param=value,...`` in ``GenerationConfig.baseline_options``
(``--baseline-options block=8``); defaults come from its paper, and each module's
docstring says where from and what could not be reproduced on two small CPU
models. Its own costs (re-encoded ids, probing queries, rewrite passes) go into
``RunResult.settings["baseline"]``.
"""

# Registered in this order (the order users see after WASH's modes).
from wash.baselines import toblend, demark, randomwalk  # noqa: F401
from wash.baselines.demark import attackable

__all__ = ["attackable"]
