"""The engine: what makes a text, and nothing else (no UI, no detection, no experiments).

A newcomer who has read the paper's Section 2 finds each of its steps here:

* ``members``: a base model behind a small protocol (feed ids, give logits, cut back),
  with its KV cache; ``parallel`` runs in-process members side by side; ``ray_members``
  puts each in a Ray actor of its own (``--backend ray``), the rest staying here.
* ``providers``: a member served with a watermark scheme and a key;
  ``models`` the catalog and loading of the base models.
* ``served``: each provider's served law on the union vocabulary, and the aggregate;
  ``averaging`` the union and the mean; ``aggregation`` the other rules.
* ``routing``: fluency-aware routing (a word finished by the specialists that have it);
  ``resync``: context re-synchronisation (the span re-tokenised for every model).
* ``decode``: the one decoding loop; ``modes`` the step strategies (WASH, naive, single,
  unwatermarked and the baselines'); ``ensemble`` runs a configured generation.
* ``config``, ``settings``, ``options``: every setting a text depends on, parsed once;
  ``sampling`` the serving profile; ``events`` what a run streams.

Every file here, under ``wash/watermarks/`` and under ``wash/baselines/`` enters the engine
fingerprint (``wash.version``): a stored text is reused only by the same engine.
"""
