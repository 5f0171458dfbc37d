"""A tokenizer carried inside a recording: packed from the engine's, unpacked by a viewer offline."""

import tempfile
import zlib
from pathlib import Path

from enginetui.core.record.format import TokenizerFiles


def pack_tokenizer(tokenizer) -> TokenizerFiles | None:
    """The tokenizer's files as `save_pretrained` writes them (fast tokenizer only), compressed;
    None for no tokenizer."""
    if tokenizer is None:
        return None
    with tempfile.TemporaryDirectory(prefix="enginetui-tokenizer-") as tmp:
        tokenizer.save_pretrained(tmp, legacy_format=False)
        files = {p.name: zlib.compress(p.read_bytes(), 6) for p in sorted(Path(tmp).iterdir()) if p.is_file()}
    return TokenizerFiles(files=files)


def unpack_tokenizer(packed: TokenizerFiles | None):
    """The HF tokenizer the files describe (None for none)."""
    if packed is None:
        return None
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory(prefix="enginetui-tokenizer-") as tmp:
        for name, data in packed.files.items():
            (Path(tmp) / Path(name).name).write_bytes(zlib.decompress(data))
        return AutoTokenizer.from_pretrained(tmp)
