"""Helpers the tests of several folders share (the fakes they share are in tests/fakes)."""
