"""When a request stops: after each sampled token, EOS / stop tokens first, then the length limits."""

from enginetui.core.request import Request, RequestStatus


def check_stop(request: Request, token: int, max_model_len: int) -> None:
    """Mark the request finished (status and detail) if the token it just sampled ends it.

    EOS and stop tokens count only from min_tokens on (the sampler masks them before that).
    """
    params = request.sampling_params
    n_out = request.num_output_tokens
    if n_out >= params.min_tokens:
        if not params.ignore_eos and token in request.eos_token_ids:
            request.status, request.finish_detail = RequestStatus.FINISHED_STOPPED, "EOS token"
            return
        if params.stop_token_ids and token in params.stop_token_ids:
            request.status, request.finish_detail = RequestStatus.FINISHED_STOPPED, f"stop token {token}"
            return
    if n_out >= request.max_tokens:
        request.status, request.finish_detail = (
            RequestStatus.FINISHED_LENGTH,
            f"max_tokens ({request.max_tokens}) reached",
        )
    elif request.num_tokens >= max_model_len:
        request.status, request.finish_detail = (
            RequestStatus.FINISHED_LENGTH,
            f"max_model_len ({max_model_len}) reached",
        )
