"""The live engine dashboard (`enginetui`, `enginetui attach`): the app and its layout, the state it
folds from step events, its panels, the engine it talks to, and what the vLLM watch, replay and
simulate dashboards reuse of it (panels, prompt box, bursts, redraw pacing)."""
