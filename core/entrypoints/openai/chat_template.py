"""Chat messages -> prompt text, through the tokenizer's own chat template (as vLLM does).

A tokenizer without a template gets vLLM's error, word for word; message content may be a
string or a list of text parts (joined with newlines, vLLM's "string" content format).
"""

from typing import Any

from enginetui.core.entrypoints.openai.errors import bad_request

# vLLM 0.32's words (vllm/renderers/hf.py) when the tokenizer has no chat template.
NO_TEMPLATE = (
    "As of transformers v4.44, default chat template is no longer allowed, so you must provide "
    "a chat template if the tokenizer does not define one."
)


def render_chat(
    tokenizer,
    messages: list[dict[str, Any]],
    add_generation_prompt: bool,
    continue_final_message: bool,
    template_kwargs: dict[str, Any] | None,
) -> str:
    """The prompt text for `messages`; raises APIError (400) for bad messages or template failures."""
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        raise bad_request(NO_TEMPLATE, "chat_template")
    if not messages:
        raise bad_request("messages must hold at least one message", "messages")
    if continue_final_message and add_generation_prompt:
        raise bad_request(
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True.", "continue_final_message"
        )
    conversation = [_plain_message(i, m) for i, m in enumerate(messages)]
    try:
        return tokenizer.apply_chat_template(
            conversation,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final_message,
            **(template_kwargs or {}),
        )
    except Exception as exc:  # jinja2 TemplateError, or the template's own raise_exception()
        raise bad_request(f"the chat template failed on these messages: {exc}", "messages") from exc


def _plain_message(index: int, message: dict[str, Any]) -> dict[str, Any]:
    """The message with its content as one string."""
    role = message.get("role")
    if not isinstance(role, str) or not role:
        raise bad_request(f"messages[{index}] needs a string `role`", f"messages.{index}.role")
    content = message.get("content")
    if content is None or isinstance(content, str):
        text = content or ""
    elif isinstance(content, list):
        text = "\n".join(_text_part(index, part) for part in content)
    else:
        raise bad_request(
            f"messages[{index}].content must be a string or a list of text parts", f"messages.{index}.content"
        )
    return {**message, "content": text}


def _text_part(index: int, part: Any) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
        return part["text"]
    kind = part.get("type") if isinstance(part, dict) else type(part).__name__
    raise bad_request(
        f"messages[{index}] has a content part of type {kind!r}: only text parts are supported",
        f"messages.{index}.content",
    )
