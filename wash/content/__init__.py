"""What the app and the experiments show and run, as plain data: the prompt sets under
``assets/``, the demo's one-click presets and the Lesson's steps.

No widgets and no models here: ``wash.ui`` turns a preset or a lesson step into the page's inputs and
the experiments run the same data (``experiment presets``, the prompt sets' runs), so the page runs
exactly what was measured.
"""
