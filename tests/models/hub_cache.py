"""A local Hugging Face hub cache, and a fresh Python that reads only it (no HF_ variable of this process)."""

import os
import shutil
import subprocess
import sys
import textwrap


def build_hub_cache(cache: str, repo_id: str, model_dir: str) -> None:
    """The layout huggingface_hub writes: models--org--name/{refs/main, snapshots/<commit>/...}."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = os.path.join(cache, "models--" + repo_id.replace("/", "--"))
    snap = os.path.join(repo, "snapshots", commit)
    os.makedirs(os.path.join(repo, "refs"))
    shutil.copytree(model_dir, snap)
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(commit)


def run_python(code: str, env_extra: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=timeout
    )
