"""The embedded default model through the engine: same loader as any directory, same tokens as transformers."""

from transformers import AutoTokenizer, OPTForCausalLM

from enginetui.core import LLM, SamplingParams
from enginetui.core.models.default_model import DEFAULT_MODEL_DIR

PROMPTS = ["The function", "A class is", "In Python, an exception", "The return value of"]


def test_default_model_generates_what_transformers_generates():
    llm = LLM(multiprocess=False)  # no model: the embedded one
    try:
        assert llm.engine.info.model_dir == str(DEFAULT_MODEL_DIR)
        outs = llm.generate(PROMPTS, SamplingParams(temperature=0, max_tokens=20), use_tqdm=False)
    finally:
        llm.shutdown()
    tok = AutoTokenizer.from_pretrained(DEFAULT_MODEL_DIR)
    model = OPTForCausalLM.from_pretrained(DEFAULT_MODEL_DIR).eval()
    for prompt, out in zip(PROMPTS, outs):
        ids = tok(prompt, return_tensors="pt").input_ids
        ref = model.generate(ids, max_new_tokens=20, do_sample=False, pad_token_id=1)[0, ids.shape[1] :].tolist()
        assert out.outputs[0].token_ids == ref
        assert out.outputs[0].text == tok.decode(ref, skip_special_tokens=True)
        assert len(out.outputs[0].text.split()) >= 2  # words, not noise
