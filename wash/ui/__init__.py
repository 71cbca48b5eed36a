"""The Gradio app's helpers, kept free of widgets so tests can call them directly.

``app.py`` only lays out widgets and wires events; everything it shows is built
here from the engine's events and results:

* ``settings``  which models the app offers (``WASH_APP_MODELS``) and its limits;
* ``providers`` the providers table <-> ``ProviderSpec`` rows, and the presets;
* ``run``       the models' preload and warm-up, and one generation (or two, with
  the single-model comparison) in a worker thread turned into throttled views;
* ``plots``     plotly figures: live z traces, per-token distributions, theory;
* ``tokens``    highlighted-text segments and token descriptions;
* ``tables``    the detection table, routing statistics, downloads;
* ``detect``    the Detect tab: scoring pasted text with chosen providers;
* ``theory``    the numpy simulation of Theorem 1;
* ``texts``     the app's explanatory prose and example prompts;
* ``latency``   a script timing the app's start-up and click-to-first-token.
"""
