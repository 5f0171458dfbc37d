"""The dashboard's panels, one per file."""
