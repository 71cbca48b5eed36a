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
fingerprint (``wash.core.version``): a stored text is reused only by the same engine.
"""

from wash.core.exports import lazy_exports

#: What the layers above may use, by the module that holds it (loaded on first use:
#: reading one name imports only the module that holds it). Anything else here is the engine's own.
_EXPORTS = {
    # settings, parsed once (config), and their command line
    **dict.fromkeys(("GenerationConfig", "ProviderSpec", "ServingProfile", "DEFAULT_PROFILE", "PROFILES",
                     "FORWARDS", "MODE_TABLE", "MAX_NEW_TOKENS_CAP", "MAX_NEW_TOKENS_ENGINE", "MAX_PROVIDERS", "MAX_TOP_K",
                     "mode_names", "profile", "profile_name", "add_generate_arguments", "command_line",
                     "from_command_line", "add_backend_arguments"), "config"),
    "RULES": "aggregation", "Rule": "aggregation",
    "describe_rules": "aggregation:describe", "parse_mode": "modes:parse", "STRATEGIES": "modes",
    # running a generation and what it streams
    "generate": "ensemble", "generate_stream": "ensemble", "Generation": "decode",
    **dict.fromkeys(("StepEvent", "ResyncEvent", "LoadEvent", "FinishedEvent", "RunResult",
                     "ProviderDetection", "event_from_dict"), "events"),
    "build_providers": "providers", "member_of": "providers", "LocalMember": "members", "require": "members",
    "align": "vocab", "model_vocab": "vocab",
    # where the members run: the backend registry
    **dict.fromkeys(("BACKENDS", "default_backend", "parse_backend", "backend_text", "backend_name"), "backends"),
    "parallel_enabled": "parallel", "parallel_settings": "parallel:settings",
    "caller_on_one_thread": "parallel",
    # the models: catalog, packaged files, one loaded copy per process
    **dict.fromkeys(("CATALOG", "OFFLINE_DEFAULTS", "HUB_MODELS", "ALLOW_EXTERNAL_ENV", "check_model_name",
                     "external_allowed", "shape_names"),
                    "catalog"),
    **dict.fromkeys(("Progress", "cache_dir", "gguf_file", "gguf_parsed_once", "marker_ok", "missing_reason",
                     "hub_reason"), "cache"),
    **dict.fromkeys(("load_model", "load_tokenizer", "read_tokenizer", "parse_dtype", "is_loaded", "prepare_cache"),
                    "models"),
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
