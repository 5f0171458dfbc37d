"""The sampler: filters never leak, penalties follow their definitions, seeds are batch-independent."""

import pytest
import torch

from enginetui.core.sample.metadata import SamplingMetadata
from enginetui.core.sample.penalties import apply_penalties
from enginetui.core.sample.sampler import CDF_CHUNK, Sampler, filter_logits, invert_cdf

VOCAB = 50


def meta(
    n,
    temperature=1.0,
    top_k=None,
    top_p=None,
    min_p=None,
    seeds=None,
    num_out=None,
    penalties=None,
    outputs=None,
    prompts=None,
    blocked=None,
    logprobs=None,
):
    def col(v, dt):
        return None if v is None else torch.tensor([v] * n if not isinstance(v, list) else v, dtype=dt)

    pres, freq, rep = penalties or (None, None, None)
    return SamplingMetadata(
        temperature=col(temperature, torch.float32),
        top_k=col(top_k, torch.long),
        top_p=col(top_p, torch.float32),
        min_p=col(min_p, torch.float32),
        seeds=seeds or [None] * n,
        num_output_tokens=num_out or [0] * n,
        presence_penalty=col(pres, torch.float32),
        frequency_penalty=col(freq, torch.float32),
        repetition_penalty=col(rep, torch.float32),
        output_token_ids=outputs or [[] for _ in range(n)],
        prompt_token_ids=prompts or [[] for _ in range(n)],
        min_tokens_blocked=blocked or [[] for _ in range(n)],
        max_num_logprobs=logprobs,
    )


def random_logits(n, seed=0):
    return torch.randn(n, VOCAB, generator=torch.Generator().manual_seed(seed)) * 3


def test_greedy_is_argmax():
    logits = random_logits(4)
    tokens, _ = Sampler(0)(logits, meta(4, temperature=0.0))
    assert tokens == logits.argmax(-1).tolist()


@pytest.mark.parametrize("k", [1, 3, 10])
def test_top_k_never_emits_outside_the_k_most_likely(k):
    logits = random_logits(8, seed=k)
    allowed = logits.topk(k, dim=-1).indices
    sampler = Sampler(1)
    for _ in range(30):
        tokens, _ = sampler(logits, meta(8, top_k=k))
        assert all(t in allowed[i].tolist() for i, t in enumerate(tokens))


def test_top_p_keeps_exactly_the_nucleus():
    logits = random_logits(6, seed=3)
    probs = logits.softmax(-1)
    kept = filter_logits(logits, meta(6, top_p=0.7)) > float("-inf")
    for row in range(6):
        order = probs[row].argsort(descending=True)
        mass_before = probs[row][order].cumsum(0) - probs[row][order]
        expected = set(order[mass_before < 0.7].tolist())
        assert set(kept[row].nonzero().flatten().tolist()) == expected
    sampler = Sampler(2)
    for _ in range(30):
        tokens, _ = sampler(logits, meta(6, top_p=0.7))
        assert all(kept[i, t] for i, t in enumerate(tokens))


def test_min_p_drops_tokens_below_the_threshold():
    logits = random_logits(5, seed=4)
    probs = logits.softmax(-1)
    sampler = Sampler(3)
    for _ in range(30):
        tokens, _ = sampler(logits, meta(5, min_p=0.2))
        for i, t in enumerate(tokens):
            assert probs[i, t] >= 0.2 * probs[i].max()


def test_draws_follow_the_softmax_distribution():
    """20,000 draws from one row's distribution: their frequencies match its probabilities."""
    logits = random_logits(1, seed=6).repeat(2000, 1)  # [2000, VOCAB], one distribution
    probs = (logits[0] / 0.8).softmax(-1)
    sampler = Sampler(7)
    counts = torch.zeros(VOCAB)
    for _ in range(10):
        tokens, _ = sampler(logits, meta(2000, temperature=0.8))
        counts += torch.bincount(torch.tensor(tokens), minlength=VOCAB)
    freq = counts / counts.sum()
    assert 0.5 * (freq - probs).abs().sum() < 0.02  # total variation; about 0.01 expected by chance
    assert counts[probs < 1e-4].sum() <= 5  # the unlikely stay rare


@pytest.mark.parametrize("vocab", [50, CDF_CHUNK, 1000, 50272])  # one short chunk, one whole, whole + short
def test_the_two_level_cdf_inverts_like_the_whole_cdf(vocab):
    gen = torch.Generator().manual_seed(vocab)
    probs = torch.rand(16, vocab, generator=gen) ** 4  # [16, vocab], unnormalized
    u = torch.rand(16, dtype=torch.float64, generator=gen)  # [16]
    cdf = probs.double().cumsum(dim=-1)  # [16, vocab]
    expected = torch.searchsorted(cdf, u[:, None] * cdf[:, -1:], right=True).squeeze(-1)  # [16]
    assert torch.equal(invert_cdf(probs, u), expected)


def test_the_two_level_cdf_never_draws_a_zero_probability_entry():
    probs = torch.zeros(4, 1000)  # [4, 1000]: mass only on a few entries, as after top-k
    probs[:, [3, 130, 131, 999]] = torch.tensor([0.5, 1e-30, 0.25, 0.25])
    for u in (0.0, 0.5, 0.5 + 1e-17, 0.75, 1.0 - 2.0**-53):
        drawn = invert_cdf(probs, torch.full((4,), u, dtype=torch.float64))
        assert bool((probs.gather(1, drawn[:, None]) > 0).all()), (u, drawn)


def test_seeded_rows_are_reproducible_whatever_the_batch():
    logits = random_logits(4, seed=5)
    alone, _ = Sampler(0)(logits[2:3], meta(1, seeds=[1234], num_out=[7]))
    batched, _ = Sampler(99)(logits, meta(4, seeds=[None, 5, 1234, None], num_out=[0, 0, 7, 3]))
    assert batched[2] == alone[0]
    # A different output position draws differently (not one frozen draw).
    draws = {Sampler(0)(logits[2:3], meta(1, seeds=[1234], num_out=[n]))[0][0] for n in range(20)}
    assert len(draws) > 1


def test_penalties_change_logits_as_defined():
    logits = torch.tensor([[2.0, -1.0, 0.5, 3.0]])
    m = meta(1, penalties=(0.5, 0.25, 2.0), outputs=[[0, 0, 1]], prompts=[[2]])
    out = logits.clone()
    apply_penalties(out, m)
    # token 0: seen twice -> 2/2 - 0.25*2 - 0.5 = 0; token 1: once -> -1*2 - 0.25 - 0.5 = -2.75
    # token 2: prompt only -> 0.5/2 = 0.25 (no frequency/presence); token 3: unseen -> 3
    assert torch.allclose(out, torch.tensor([[0.0, -2.75, 0.25, 3.0]]))


def test_min_tokens_blocks_stop_tokens():
    logits = torch.zeros(2, VOCAB)
    logits[:, 2] = 100.0  # EOS overwhelmingly likely
    tokens, _ = Sampler(0)(logits, meta(2, temperature=0.0, blocked=[[2], []]))
    assert tokens[0] != 2 and tokens[1] == 2


def test_logprobs_are_sampled_first_then_top_n():
    logits = random_logits(3, seed=6)
    tokens, lps = Sampler(0)(logits, meta(3, temperature=0.0, logprobs=2))
    ref = logits.log_softmax(-1)
    for row, entries in enumerate(lps):
        assert entries[0].token_id == tokens[row]
        assert entries[0].logprob == pytest.approx(ref[row, tokens[row]].item(), abs=1e-5)
        assert [e.token_id for e in entries[1:]] == ref[row].topk(2).indices.tolist()


@pytest.mark.parametrize("name", ["n", "top_k", "min_tokens", "temperature"])
def test_none_where_a_number_is_required_is_a_value_error(name):
    from enginetui.core.sampling_params import SamplingParams

    with pytest.raises(ValueError, match=name):
        SamplingParams(**{name: None})


@pytest.mark.parametrize("logprobs", [None, 0, 3])
def test_one_device_read_a_step(monkeypatch, logprobs):
    """A step of greedy, sampled and seeded rows reads device values on the host once (on CUDA each read
    waits for the GPU): the tokens and logprobs in one copy; which branches run is known on the host."""
    from torch.utils._python_dispatch import TorchDispatchMode

    reads = []

    class ScalarReads(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.__name__.split(".")[0] in ("_local_scalar_dense", "is_nonzero", "nonzero"):
                reads.append(func.__name__)
            return func(*args, **(kwargs or {}))

    tolist = torch.Tensor.tolist
    monkeypatch.setattr(torch.Tensor, "tolist", lambda t: reads.append("tolist") or tolist(t))
    temps = [0.0, 0.7, 1.0, 0.0]
    m = meta(4, temperature=temps, top_p=0.9, seeds=[None, 5, None, None], logprobs=logprobs)
    m.greedy = [t == 0 for t in temps]
    logits = random_logits(4, seed=7)
    with ScalarReads():
        tokens, lps = Sampler(0)(logits, m)
    assert reads == ["tolist"]
    monkeypatch.undo()
    m.greedy = None  # the same step, the branches read from the tensor: the same tokens and logprobs
    assert Sampler(0)(logits, m) == (tokens, lps)
    assert tokens[0] == logits[0].argmax() and tokens[3] == logits[3].argmax()
