"""enginetui: the live Textual dashboard of the inference engine, and its command line."""
