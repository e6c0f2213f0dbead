"""Chat templates: the backbone's own when its tokenizer has one, else rewardlab's plain documented template.

The plain template (`PLAIN_TEMPLATE_NAME`) renders a prompt as one block per message, `"{Role}: {content}"`,
joined by a blank line, followed by `"\\n\\nAssistant: "` (the response follows it). Roles are capitalised
(`user` → `User`, `assistant` → `Assistant`, `system` → `System`). Example:

    >>> render_plain_prompt([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
    ...                      {"role": "user", "content": "Bye?"}])
    'User: Hi\\n\\nAssistant: Hello\\n\\nUser: Bye?'

For BERT-like tokenizers (a pair encoding `[CLS] A [SEP] B [SEP]`), the rendered prompt is segment A and the
response is segment B (token type ids 0 and 1), so the model sees where the response starts without a marker.
For any other tokenizer without a chat template, the text is `render_plain_prompt(prompt) + ASSISTANT_PREFIX
+ response`, wrapped in whatever special tokens the tokenizer adds to a single sequence (BOS/EOS).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rewardlab.types import Message, Prompt

PLAIN_TEMPLATE_NAME = "rewardlab-plain-v1"
"""Name of the plain template (saved in reward-model metadata so scoring renders exactly as training did)."""

CHAT_TEMPLATE_NAME = "tokenizer-chat-template"
"""Name recorded when the tokenizer's own `chat_template` renders the text."""

PLAIN_PAIR_TEMPLATE_NAME = "rewardlab-plain-v1-pair"
"""Name recorded when the plain template is used with the tokenizer's pair encoding (BERT: prompt = A, response = B)."""

TURN_SEPARATOR = "\n\n"
ASSISTANT_PREFIX = "\n\nAssistant: "


def prompt_messages(prompt: Prompt) -> list[Message]:
    """The prompt as chat messages: a string becomes one user message; a message list is checked and copied."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}] if prompt else []
    if not isinstance(prompt, list):
        raise TypeError(f"a prompt must be a string or a list of messages, got {type(prompt).__name__}")
    messages: list[Message] = []
    for index, message in enumerate(prompt):
        if not isinstance(message, Mapping):
            raise TypeError(f"prompt message {index} must be a {{'role', 'content'}} object, "
                            f"got {type(message).__name__}")
        role = message.get("role")
        content = message.get("content")
        if not isinstance(role, str) or not isinstance(content, str):
            raise TypeError(f"prompt message {index} needs string 'role' and 'content', got {dict(message)!r:.120}")
        messages.append({"role": role, "content": content})
    return messages


def role_label(role: str) -> str:
    """How the plain template names a role: `user` → `User`, `assistant` → `Assistant`."""
    return role[:1].upper() + role[1:] if role else "User"


def render_plain_prompt(messages: list[Message]) -> str:
    """The prompt in the plain template: `"{Role}: {content}"` blocks joined by a blank line."""
    return TURN_SEPARATOR.join(f"{role_label(str(m['role']))}: {m['content']}" for m in messages)


def has_chat_template(tokenizer: Any) -> bool:
    """True when the tokenizer carries its own chat template (that template is then used)."""
    template = getattr(tokenizer, "chat_template", None)
    return bool(template)


def is_pair_encoder(tokenizer: Any) -> bool:
    """True for BERT-like tokenizers (CLS and SEP tokens defined): the prompt/response go in as a sentence pair."""
    return getattr(tokenizer, "cls_token", None) is not None and getattr(tokenizer, "sep_token", None) is not None


def template_name(tokenizer: Any) -> str:
    """The name of the template `encode_sample` uses for this tokenizer."""
    if has_chat_template(tokenizer):
        return CHAT_TEMPLATE_NAME
    if is_pair_encoder(tokenizer):
        return PLAIN_PAIR_TEMPLATE_NAME
    return PLAIN_TEMPLATE_NAME


def render_text(tokenizer: Any, prompt: Prompt, response: str) -> str:
    """The whole text (prompt + response) as the template renders it, for display and debugging."""
    messages = prompt_messages(prompt)
    if has_chat_template(tokenizer):
        rendered = tokenizer.apply_chat_template(
            [*messages, {"role": "assistant", "content": response}], tokenize=False
        )
        return str(rendered)
    if is_pair_encoder(tokenizer):
        return f"{render_plain_prompt(messages)} [SEP] {response}"
    return render_plain_prompt(messages) + ASSISTANT_PREFIX + response
