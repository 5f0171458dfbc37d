"""The prompts sent to a live vLLM by the fixture capture (tools/capture.py), the screenshot and the live tests:
two that share a long prefix (the KV prefix tree branches) and ten long ones (they overfill a small pool); the
proxied bursts' prompts (burst.py) are about the same topics."""

SHARED = (
    "Return the number of items in the list. This function reads a file and returns a new list of "
    "the items in the file, in the order they were read. If the file is empty, the list is empty. "
)
BRANCHES = (
    "The items are strings with the line endings removed, and",
    "Raises ValueError if the file does not exist or cannot be read, and",
)
TOPICS = (
    "A class is",
    "An exception",
    "The module",
    "A dictionary",
    "The method",
    "A tuple",
    "The iterator",
    "A generator",
    "The context manager",
    "A set",
)  # what the long prompts (and burst.burst_prompt's) are about
BURST = tuple(
    f"{topic} The function returns a new object of the same type, and the arguments are passed "
    f"to the constructor in the order they were given. It is an error to call it twice."
    for topic in TOPICS
)
